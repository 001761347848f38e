"""Entries emitted as decided without a model: the same report entry, byte for byte, as the typed one.

The engine decides each case as its fields and its JSON up to its samples (`decide_case_json`),
dumped from plain values with the scores' JSON the tally kept; these tests hold those bytes to
pydantic's dump of the decided `EntryResult`, and the entry read back to the typed one.
"""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_aggregate_tally import CASE, POLICIES, _rows, _sample

from evaltrace.evaluators.engine._aggregate import (
    CaseTally,
    decide_case,
    decide_case_json,
    sample_order,
    scores_from_json,
)
from evaltrace.evaluators.engine._routers import Decided, RouterState, SpecRouter
from evaltrace.evaluators.results.report.model import EntryResult, SampleResult
from evaltrace.evaluators.results.report.sample_row import SampleRow
from evaltrace.evaluators.results.report.writer import EntryFields, Parked, ReportEntry, entry_head, park
from evaltrace.evaluators.scoring.spec.loader import compile_spec, validate_strictly
from evaltrace.evaluators.scoring.spec.model import Case


def _parked(samples: list[SampleResult]) -> Parked:
    return Parked.of([park(sample.model_dump_json().encode(), b"") for sample in sorted(samples, key=sample_order)])


def _model_head(entry: EntryResult) -> bytes:
    """The reference: pydantic's compact dump of `entry`, cut where its samples begin (they come last)."""
    return entry.model_dump_json(exclude={"samples"}).encode()[:-1] + b',"samples":['


CASES = [
    CASE,
    Case(id='c"\\\u2028\x00', input='q \u00e9\U0001f600 "quoted" \\ \x1f \u2029', tier="smoke", tags=["a", "\u00fc"]),
]


@settings(max_examples=120, deadline=None)
@given(
    samples=st.lists(st.tuples(_rows, st.booleans()), max_size=5).map(
        lambda drawn: [_sample(i, rows, late) for i, (rows, late) in enumerate(drawn)]
    ),
    case=st.sampled_from(CASES),
)
def test_an_entry_decided_without_a_model_is_the_decided_entry(samples: list[SampleResult], case: Case) -> None:
    for policy in POLICIES:
        tally = CaseTally.for_policy(policy)
        for sample in samples:
            tally.add(SampleRow.of(sample))
        typed = decide_case(case, policy, tally)
        fields, head = decide_case_json(case, policy, tally)
        assert head == _model_head(typed)  # pydantic's bytes: escaping, floats, field order
        assert fields == EntryFields.of(vars(typed))
        entry = ReportEntry.decided(head, fields, lambda: _parked(samples))
        whole = typed.model_copy(update={"samples": sorted(samples, key=sample_order)})
        # The samples' JSON placed last (the model's dump has them before `input`).
        assert json.loads(entry.json_bytes()) == json.loads(whole.model_dump_json())
        assert entry.result() == whole


def test_scores_text_in_a_reason_does_not_move_the_splice() -> None:
    # A reason quoting the key itself: inside a JSON string its quotes are escaped.
    samples = [_sample(0, [("a", False, None, None)], late=False)]
    tally = CaseTally.for_policy(POLICIES[0])
    tally.add(SampleRow.of(samples[0]))
    typed = decide_case(CASE, POLICIES[0], tally)
    tricky = {**vars(typed), "reason": 'x,"scores":[],"y', "case_id": '"scores":[],', "scores": []}
    del tricky["samples"]
    scores = tally.scores.result_json()
    entry = ReportEntry.decided(entry_head(tricky, scores), EntryFields.of(tricky), lambda: _parked(samples))
    parsed = EntryResult.model_validate_json(entry.json_bytes())
    assert parsed.reason == 'x,"scores":[],"y' and parsed.case_id == '"scores":[],'
    assert parsed.scores == scores_from_json(scores) and len(parsed.scores) == 1


def test_an_entry_given_scores_twice_is_refused() -> None:
    scores = _sample(0, [("a", True, 1.0, None)], False).scores
    typed = EntryResult(case_id="c", trace_id=None, status="passed", passed=True, pass_rate=1.0, scores=scores)
    with pytest.raises(ValueError, match="scores empty"):
        entry_head(typed.model_dump(exclude={"samples"}), b"[]")


def _tally(samples: int) -> CaseTally:
    tally = CaseTally.for_policy(POLICIES[0])
    for index in range(samples):
        tally.add(SampleRow.of(_sample(index, [("a", True, 1.0, None)], late=False)))
    return tally


def _spec_router() -> SpecRouter:
    spec = compile_spec(validate_strictly({"cases": [{"id": "x", "input": "q"}, {"id": "y", "input": "r"}]}), "spec")
    return SpecRouter(spec, spec.cases)


def test_a_router_hands_over_its_cases_decided_as_the_parent_would_decide_them() -> None:
    router = _spec_router()
    router.state.tallies = {"x": _tally(1), "y": _tally(2)}
    state = router.hand_over()
    assert sorted(state.decided) == ["x", "y"]
    for case_id in ("x", "y"):
        # The parent deciding the same tally itself gives the same entry, byte for byte.
        assert state.decided[case_id] == _spec_router()._decide(case_id, state.tallies[case_id])
    # Handed over by pickling (to the parent process): the decisions travel with the state.
    assert pickle.loads(pickle.dumps(state)).decided == state.decided


def _decided(case_id: str, tally: CaseTally) -> Decided:
    fields = EntryFields(case_id, None, (), "mean", "passed", True, 1.0)
    return fields, f"{case_id}:{tally.samples}".encode()


def test_a_merge_keeps_only_the_cases_decided_on_all_their_samples() -> None:
    first = RouterState(tallies={"x": _tally(1), "y": _tally(2)})
    second = RouterState(tallies={"x": _tally(3), "z": _tally(1)})
    for state in (first, second):
        state.decided = {case_id: _decided(case_id, tally) for case_id, tally in state.tallies.items()}
    parent = RouterState()
    parent.merge(first)
    parent.merge(second)
    # "x" has samples in both: decided on a part of them, it is decided again by the parent.
    assert sorted(parent.decided) == ["y", "z"] and parent.tallies["x"].samples == 4
