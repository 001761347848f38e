"""Case tallies: samples added in any order and tallies merged in parts decide a case as report order does.

Sharded scoring keeps one tally per case in each worker and merges them in the parent, so the
verdict, the entry-level scores (first failures, first errors, means) and the row order must not
depend on which worker scored which sample or in which order they arrived.
"""

from __future__ import annotations

import math
import pickle
import random
from datetime import UTC, datetime, timedelta
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from evaltrace.evaluators.engine import _aggregate
from evaltrace.evaluators.engine._aggregate import CaseTally, ExactSum, aggregate_case, decide_case, sample_order
from evaltrace.evaluators.results.report.model import EntryResult, SampleResult, ScoreResult
from evaltrace.evaluators.results.report.sample_row import SampleRow
from evaltrace.evaluators.scoring.spec.model import Case, RepeatPolicy

T0 = datetime(2025, 1, 1, tzinfo=UTC)
CASE = Case(id="c", input="q")
POLICIES = [
    RepeatPolicy(rule="mean"),
    RepeatPolicy(rule="all"),
    RepeatPolicy(rule="majority"),
    RepeatPolicy(rule="pass@k", k=2),
    RepeatPolicy(rule="pass@k", k=5),
    RepeatPolicy(rule="mean", min_samples=4),
]

_rows = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from([True, False, None]),
        st.one_of(st.none(), st.floats(0, 1)),
        st.sampled_from([None, None, "ValueError"]),
    ),
    max_size=4,
)


def _sample(index: int, rows: list[tuple[str, bool | None, float | None, str | None]], late: bool) -> SampleResult:
    scores = [
        ScoreResult(scorer=name, passed=passed, value=value, reason=f"{name} of sample {index}", error=error)
        for name, passed, value, error in rows
    ]
    if any(s.passed is False or s.error is not None for s in scores):
        status = "failed"
    elif any(s.passed for s in scores):
        status = "passed"
    else:
        status = "not_applicable"
    return SampleResult(
        trace_id=f"t{index:03d}",
        status=status,  # type: ignore[arg-type]
        passed=None if status == "not_applicable" else status == "passed",
        scores=scores,
        output=f"answer {index}",
        # Some samples have no start time: they sort last, by trace id.
        start_time=None if late else T0 + timedelta(seconds=index * 7 % 11, microseconds=index),
    )


def _in_order(policy: RepeatPolicy, samples: list[SampleResult]) -> EntryResult:
    tally = CaseTally.for_policy(policy)
    for sample in sorted(samples, key=sample_order):
        tally.add(SampleRow.of(sample))
    return decide_case(CASE, policy, tally)


def _in_parts(policy: RepeatPolicy, samples: list[SampleResult], seed: int, parts: int) -> EntryResult:
    rng = random.Random(seed)
    shuffled = list(samples)
    rng.shuffle(shuffled)
    tallies = [CaseTally.for_policy(policy) for _ in range(parts)]
    given: list[list[SampleRow]] = [[] for _ in range(parts)]
    for sample in shuffled:
        given[rng.randrange(parts)].append(SampleRow.of(sample))
    for tally, rows in zip(tallies, given, strict=True):
        while rows:  # in batches of any size, as the warm path keeps a batch's rows at once
            size = rng.randint(1, len(rows))
            tally.add(*rows[:size])
            del rows[:size]
    rng.shuffle(tallies)
    merged = tallies[0]
    for tally in tallies[1:]:
        merged.merge(tally)
    return decide_case(CASE, policy, merged)


@settings(max_examples=150, deadline=None)
@given(
    samples=st.lists(st.tuples(_rows, st.booleans()), max_size=9).map(
        lambda drawn: [_sample(i, rows, late) for i, (rows, late) in enumerate(drawn)]
    ),
    seed=st.integers(0, 2**32),
    parts=st.integers(1, 4),
)
def test_any_order_and_any_split_decide_like_report_order(samples: list[SampleResult], seed: int, parts: int) -> None:
    for policy in POLICIES:
        assert _in_parts(policy, samples, seed, parts) == _in_order(policy, samples)


_alike = st.lists(  # every sample with the same scorers, as a case's rows the warm path keeps (grouped by column)
    st.tuples(
        st.sampled_from([True, False, None]),
        st.one_of(st.none(), st.floats(0, 1)),
        st.sampled_from([None, "E"]),
    ),
    min_size=3,
    max_size=3,
).map(lambda verdicts: [(name, *verdict) for name, verdict in zip(["a", "b", "a"], verdicts, strict=True)])


@settings(max_examples=100, deadline=None)
@given(
    samples=st.lists(st.tuples(_alike, st.booleans()), max_size=9).map(
        lambda drawn: [_sample(i, rows, late) for i, (rows, late) in enumerate(drawn)]
    ),
    seed=st.integers(0, 2**32),
    parts=st.integers(1, 3),
)
def test_batches_of_alike_samples_decide_like_report_order(samples: list[SampleResult], seed: int, parts: int) -> None:
    for policy in POLICIES:
        assert _in_parts(policy, samples, seed, parts) == _in_order(policy, samples)


def test_firsts_are_the_earliest_samples_whatever_the_arrival() -> None:
    failing, passing = [("a", False, 0.0, None)], [("a", True, 1.0, None)]
    # Start times are index * 7 % 11 seconds: samples 1..5 start at 7, 3, 10, 6, 2 s.
    samples = [_sample(i, failing if i in (2, 4) else passing, late=False) for i in range(1, 6)]
    entry = aggregate_case(CASE, RepeatPolicy(rule="mean"), samples)
    assert [s.trace_id for s in entry.samples] == ["t005", "t002", "t004", "t001", "t003"]
    assert (entry.trace_id, entry.output) == ("t005", "answer 5")
    assert entry.reason == "3 of 5 samples passed (rule mean); first failure: a: a of sample 2"
    (row,) = entry.scores
    assert row.reason == "passed in 3 of 5 samples; first failure: a of sample 2"
    assert row.value == 0.6


def test_exact_sum_does_not_depend_on_order_or_split() -> None:
    rng = random.Random(5)
    values = [rng.random() * 10 ** rng.randint(-8, 3) for _ in range(500)]
    forward, backward, halves = ExactSum(), ExactSum(), ExactSum()
    for value in values:
        forward.add(value)
    for value in reversed(values):
        backward.add(value)
    other = ExactSum()
    for index, value in enumerate(values):
        (halves if index % 2 else other).add(value)
    halves.merge(other)
    assert forward.total() == backward.total() == halves.total()
    assert forward.mean() == halves.mean() and forward.count == 500
    special = ExactSum()
    for value in (1.0, float("inf")):
        special.add(value)
    assert special.mean() == float("inf") and ExactSum().mean() is None


@settings(max_examples=100, deadline=None)
@given(
    samples=st.lists(st.tuples(_alike, st.booleans()), min_size=1, max_size=12).map(
        lambda drawn: [_sample(i, rows, late) for i, (rows, late) in enumerate(drawn)]
    ),
    held=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_held_samples_count_when_read_merged_or_handed_over(samples: list[SampleResult], held: int, seed: int) -> None:
    """A tally holds samples and counts them `_HELD` at a time: a hand-over (pickled) or a merge counts the rest."""
    rng = random.Random(seed)
    with patch.object(_aggregate, "_HELD", held):
        for policy in POLICIES:
            tallies = [CaseTally.for_policy(policy) for _ in range(3)]
            for sample in samples:
                rng.choice(tallies).add(SampleRow.of(sample))
            first, second, third = tallies
            first.merge(pickle.loads(pickle.dumps(second)))  # a worker's tally, sent to its parent
            first.merge(third)
            assert decide_case(CASE, policy, first) == _in_order(policy, samples)


def test_a_value_added_times_over_sums_as_added_one_by_one() -> None:
    once, times = ExactSum(), ExactSum()
    for value in (0.1, 0.1, 0.1, 1e-300, float("nan")):
        once.add(value)
    times.add(0.1, 3)
    times.add(1e-300)
    times.add(float("nan"))
    assert (times.count, times.units) == (once.count, once.units) and math.isnan(times.mean() or 0.0)
