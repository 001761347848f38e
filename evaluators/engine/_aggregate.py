"""From scores to sample outcomes, and from samples to an entry by the case's repeat rule.

The rules are documented in `evaluators/results/report/model.py` (outcomes, the gate) and
`evaluators/scoring/spec/model.py` (`repeat`). This module holds the arithmetic only, so it can be
tested without traces.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import UTC, datetime
from itertools import chain
from typing import Any

from evaltrace.evaluators.engine._numbers import ExactSum as ExactSum  # where tests and callers found it
from evaltrace.evaluators.engine._score_merger import SCORES, SampleKey, ScoreMerger, earlier
from evaltrace.evaluators.results.report.model import EntryResult, SampleResult, SampleStatus, ScorerCount, ScoreResult
from evaltrace.evaluators.results.report.sample_row import SampleRow, ScoreRow
from evaltrace.evaluators.results.report.writer import EntryFields, entry_head
from evaltrace.evaluators.scoring.scorers.base import Score
from evaltrace.evaluators.scoring.scorers.evidence import UNINSTRUMENTED_HINT
from evaltrace.evaluators.scoring.spec.model import Case, RepeatPolicy

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


def score_row(score: Score, turn: int | None = None) -> ScoreRow:
    """A scorer's `Score` as reported; an error always reports `passed=False`."""
    passed = False if score.error is not None else score.passed
    return ScoreRow(score.scorer, passed, score.value, score.reason, score.error, turn, score.details)


def score_rows(samples: Sequence[Sequence[Score]]) -> list[list[ScoreRow]]:
    """Each sample's `score_row`s, one `ScoreRow` per `Score` object: its JSON and store values are made once."""
    made: dict[int, ScoreRow] = {}  # every `Score` is alive during the call: its id is its own
    return [[made.get(id(score)) or made.setdefault(id(score), score_row(score)) for score in row] for row in samples]


def score_result(score: Score, turn: int | None = None) -> ScoreResult:
    """`score_row` as a model (a `SampleResult`'s)."""
    return ScoreResult(**score_row(score, turn)._asdict())


class ScorerTally:
    """Per scorer, how its verdicts went: what the summary's scorer table shows.

    Counted as samples are scored (every worker keeps its own, the parent merges them), so the
    table needs no second pass over the entries.
    """

    def __init__(self) -> None:
        self.counts: dict[str, ScorerCount] = {}

    def add(self, *samples: Sequence[ScoreResult | ScoreRow]) -> None:
        """Count the verdicts of samples (each argument one sample's scores): once per distinct score object."""
        found: dict[int, list[Any]] = {}  # [score, times], in the order first seen (the table's row order)
        for score in chain.from_iterable(samples):
            found.setdefault(id(score), [score, 0])[1] += 1
        for score, times in found.values():
            self._count(score, times)

    def _count(self, score: ScoreResult | ScoreRow, times: int) -> None:
        count = self.counts.get(score.scorer)
        if count is None:
            count = self.counts[score.scorer] = ScorerCount(scorer=score.scorer)
        if score.error is not None or score.passed is False:
            count.failed += times
            count.errors += times * (score.error is not None)
        elif score.passed:
            count.passed += times
        else:
            count.not_applied += times
        if score.details and score.details.get("unrecorded") is True:
            count.unrecorded += times
            # The scorer chose the hint from the trace (`evidence.record_hint`); the summary follows it.
            count.uninstrumented += times * (UNINSTRUMENTED_HINT in (score.reason or ""))

    def merge(self, other: ScorerTally) -> None:
        """Add `other`'s counts (scorers it saw first come after ours)."""
        for name, theirs in other.counts.items():
            ours = self.counts.get(name)
            if ours is None:
                self.counts[name] = theirs.model_copy()
                continue
            ours.passed += theirs.passed
            ours.failed += theirs.failed
            ours.errors += theirs.errors
            ours.not_applied += theirs.not_applied
            ours.unrecorded += theirs.unrecorded
            ours.uninstrumented += theirs.uninstrumented

    def rows(self) -> list[ScorerCount]:
        """The counts, one row per scorer in the order first seen."""
        return [count.model_copy() for count in self.counts.values()]


def sample_status(scores: Sequence[ScoreResult | ScoreRow]) -> SampleStatus:
    """`failed` if any score failed or errored, `passed` if any passed, else `not_applicable`."""
    return _BY_CODE[max(map(_code, scores), default=0)]


def _code(score: ScoreResult | ScoreRow) -> int:
    """A score's weight in its sample's status: 2 failed or errored, 1 passed, 0 not applicable."""
    return 2 if score.error is not None or score.passed is False else int(bool(score.passed))


def sample_statuses(samples: Sequence[Sequence[ScoreRow]]) -> list[SampleStatus]:
    """Each sample's `sample_status`, each `ScoreRow` object looked at once (`score_rows` shares them)."""
    distinct = {id(score): score for row in samples for score in row}  # every score is alive during the call
    codes = {key: _code(score) for key, score in distinct.items()}
    return [_BY_CODE[max(map(codes.__getitem__, map(id, row)), default=0)] for row in samples]


_BY_CODE: tuple[SampleStatus, ...] = ("not_applicable", "passed", "failed")
"""A sample's status by its scores' highest `_code`."""


def status_passed(status: SampleStatus) -> bool | None:
    """`True`/`False` for passed/failed, `None` when not applicable."""
    return None if status == "not_applicable" else status == "passed"


def sample_order(sample: SampleResult | SampleRow) -> SampleKey:
    """The order of a case's samples in its entry: start time, then trace id."""
    return (sample.start_time or _FAR_FUTURE, sample.trace_id or "")


def aggregate_case(case: Case, policy: RepeatPolicy, samples: Sequence[SampleResult]) -> EntryResult:
    """Decide a spec case from its samples by `policy`.

    Args:
        case: the case.
        policy: its repeat rule.
        samples: the scored samples, in any order.

    Returns:
        The entry, with the samples sorted by start time.
    """
    tally = CaseTally.for_policy(policy)
    for sample in samples:
        tally.add(SampleRow.of(sample))
    ordered = sorted(samples, key=sample_order)
    return decide_case(case, policy, tally).model_copy(update={"samples": ordered})


def decide_case(case: Case, policy: RepeatPolicy, tally: CaseTally) -> EntryResult:
    """Decide a spec case from the tally of its samples.

    Returns:
        The entry without its `samples` (the caller attaches or streams them).
    """
    # Validated once (pydantic's validation is faster than `model_construct` for these models).
    return EntryResult(**{**_decided_fields(case, policy, tally), "scores": tally.scores.result()})


Decided = tuple[EntryFields, bytes]
"""A decided case: the entry's fields, and its JSON up to its samples (`entry_head`)."""


def decide_case_json(case: Case, policy: RepeatPolicy, tally: CaseTally) -> Decided:
    """`decide_case` as the report is written: the entry's fields and its JSON up to its samples (`entry_head`).

    No model is made: the fields are dumped as they are, with the scores' JSON the tally keeps (a
    lone sample's scores are its own); only a reader of the scores (`scores_from_json`) parses them.
    """
    fields = _decided_fields(case, policy, tally)
    return EntryFields.of(fields), entry_head(fields, tally.scores.result_json())


def passing_entry_json(case: Case, policy: RepeatPolicy, sample: SampleRow, scores: bytes) -> Decided:
    """`decide_case_json` for a case whose one sample (`scores`: its scores' JSON) passed, without a tally.

    Any rule passes it with a pass rate of 1.0 (`_apply_rule` of 1 of 1), unless `min_samples` asks for more.
    """
    assert sample.status == "passed" and policy.min_samples <= 1
    fields = _entry_fields(case, (sample.trace_id, sample.output), policy)
    fields.update(status="passed", passed=True, pass_rate=1.0)
    return EntryFields.of(fields), entry_head(fields, scores)


def scores_from_json(data: bytes) -> list[ScoreResult]:
    """Scores given as `decide_case_json` gives them."""
    return SCORES.validate_json(data)


def _decided_fields(case: Case, policy: RepeatPolicy, tally: CaseTally) -> dict[str, Any]:
    """Every field of the decided entry, in `EntryResult`'s order, but `samples` (and `scores`, left empty)."""
    scored, passed_count, first_failure = tally.verdicts()
    fields = _entry_fields(case, tally.first[1] if tally.first else (None, None), policy)
    if tally.samples < policy.min_samples:
        fields.update(_missing(tally.samples, policy.min_samples))
    elif scored:
        passed, rate = _apply_rule(policy, passed_count, scored)
        reason = None if passed_count == scored else _failure_reason(first_failure, passed_count, scored, policy)
        fields.update(status="passed" if passed else "failed", passed=passed, pass_rate=rate, reason=reason)
    else:  # no check applied to any sample that counts: nothing was verified, so the entry fails
        fields.update(_nothing_applied(tally.scores.result(), tally.samples == 1))
    return fields


def nothing_applied(scores: Sequence[ScoreResult], with_reasons: bool = True) -> str:
    """Why an entry no check applied to fails: the checks that did not apply (and why, `with_reasons`)."""
    if not scores:
        return "nothing applied: the entry has no check, so nothing was verified"
    named = [f"{s.scorer}: {s.reason}" if with_reasons and s.reason else s.scorer for s in scores[:3]]
    more = f" and {len(scores) - 3} more" if len(scores) > 3 else ""
    return f"nothing applied, so nothing was verified ({'; '.join(named)}{more})"


def _nothing_applied(scores: Sequence[ScoreResult], with_reasons: bool) -> dict[str, Any]:
    return {"status": "failed", "passed": False, "pass_rate": 0.0, "reason": nothing_applied(scores, with_reasons)}


_HELD = 64
"""Samples a case's tally holds before counting them (their memory: a few KB each)."""


class CaseTally:
    """What deciding a case needs from its samples: counts, the first sample and the first failure.

    Samples may be added in any order and tallies merged (each scoring worker keeps its own, the
    parent merges them): every "first" is kept with its sample's `sample_order` key, so the
    result is the one feeding the samples in report order gives, and deciding a case never has to
    read its samples back.
    """

    def __init__(self, considered: int | None) -> None:
        self._held: list[SampleRow] = []
        """Samples added but not counted yet: counted `_HELD` at a time (`_count`), or when the tally is read."""
        self.considered = considered
        """pass@k: only the k earliest samples count toward the verdict; `None`: all do."""
        self.samples = 0
        self.first: tuple[SampleKey, tuple[str | None, str | None]] | None = None
        """The earliest sample's trace id and output."""
        self.scores = ScoreMerger()
        self.scored = 0
        """Applicable samples (without `considered`)."""
        self.passed = 0
        self.first_failure: tuple[SampleKey, str] | None = None
        """Why the earliest failing sample failed (without `considered`)."""
        self.leading: list[tuple[SampleKey, SampleStatus, str]] = []
        """With `considered`: the earliest samples' status and failure text, sorted, at most k."""

    def __getstate__(self) -> dict[str, Any]:
        self._count()  # a worker hands its tallies over counted
        return self.__dict__

    @classmethod
    def for_policy(cls, policy: RepeatPolicy) -> CaseTally:
        """An empty tally for a case decided by `policy`."""
        return cls(policy.k if policy.rule == "pass@k" and policy.k is not None else None)

    def add(self, *samples: SampleRow) -> None:
        """Count samples: held, and counted many at a time.

        A batch of the warm path gives each case a few, and counting costs as much per call as per
        sample; the counts do not depend on how samples are grouped.
        """
        self._held += samples
        if len(self._held) >= _HELD:
            self._count()

    def _count(self) -> None:
        samples, self._held = self._held, []
        if not samples:
            return
        keys = [sample_order(sample) for sample in samples]
        self.samples += len(samples)
        self.scores.add(keys, [sample.scores for sample in samples])
        for key, sample in zip(keys, samples, strict=True):
            self.first = earlier(self.first, (key, (sample.trace_id, sample.output)))
            why = _failure_text(sample) if sample.status == "failed" else ""
            if self.considered is not None:
                bisect.insort(self.leading, (key, sample.status, why))
                del self.leading[self.considered :]
            elif sample.status != "not_applicable":
                self.scored += 1
                if sample.status == "passed":
                    self.passed += 1
                else:
                    self.first_failure = earlier(self.first_failure, (key, why))

    def merge(self, other: CaseTally) -> None:
        """Add the samples `other` counted."""
        self._count()
        other._count()
        self.samples += other.samples
        self.first = earlier(self.first, other.first)
        self.scores.merge(other.scores)
        self.scored += other.scored
        self.passed += other.passed
        self.first_failure = earlier(self.first_failure, other.first_failure)
        if self.considered is not None:
            self.leading = sorted(self.leading + other.leading)[: self.considered]

    def verdicts(self) -> tuple[int, int, str | None]:
        """Applicable and passing samples among those that count, and why the first failing one failed.

        Read first when a case is decided (`_decided_fields`): the held samples are counted then.
        """
        self._count()
        if self.considered is None:
            return self.scored, self.passed, self.first_failure[1] if self.first_failure else None
        counted = [(status, why) for _, status, why in self.leading if status != "not_applicable"]
        failures = [why for status, why in counted if status != "passed"]
        passed = len(counted) - len(failures)
        return len(counted), passed, failures[0] if failures else None


def _failure_text(sample: SampleRow) -> str:
    first = next((sc for sc in sample.scores if sc.passed is False), None)
    return f"{first.scorer}: {first.reason}" if first is not None else "failed"


def _apply_rule(policy: RepeatPolicy, n_pass: int, n: int) -> tuple[bool, float]:
    if policy.rule == "mean":
        return n_pass == n, n_pass / n
    if policy.rule == "all":
        passed = n_pass == n
    elif policy.rule == "majority":
        passed = 2 * n_pass > n
    else:  # pass@k: one passing sample among the first k is enough
        passed = n_pass >= 1
    return passed, 1.0 if passed else 0.0


def _entry_fields(case: Case, first: tuple[str | None, str | None], policy: RepeatPolicy) -> dict[str, Any]:
    """Every field of the case's entry but `samples` (`scores` empty), as when nothing applied to it.

    `first`: the earliest sample's trace id and output. In `EntryResult`'s order and types (floats as
    floats), as `entry_head` dumps them without the model.
    """
    trace_id, output = first
    rule = f"pass@{policy.k}" if policy.rule == "pass@k" else policy.rule
    return {
        "case_id": case.id,
        "trace_id": trace_id,
        "passed": None,
        "status": "not_applicable",
        "pass_rate": None,
        "rule": rule,
        "reason": None,
        "scores": [],
        "input": case.input if case.turns is None else case.turns[0].input,
        "output": output,
        "tier": case.tier,
        "tags": list(case.tags),
    }


def _missing(found: int, needed: int) -> dict[str, Any]:
    if found == 0:
        status, reason = "missing", "no trace matched this case (by evaltrace.case_id or by input)"
    else:
        status, reason = "failed", f"{found} matching sample(s), the case needs at least {needed} (repeat.min_samples)"
    return {"status": status, "passed": False, "pass_rate": 0.0, "reason": reason}


def _failure_reason(first_failure: str | None, passed: int, scored: int, policy: RepeatPolicy) -> str:
    why = first_failure or "failed"
    if scored == 1:
        return why
    return f"{passed} of {scored} samples passed (rule {policy.rule}); first failure: {why}"


def trace_entry(sample: SampleResult, case_id: str | None) -> EntryResult:
    """The entry for one trace scored without a spec; it fails when no check applied to the trace."""
    passed = bool(status_passed(sample.status))
    failing = next((s for s in sample.scores if s.passed is False), None)
    reason = f"{failing.scorer}: {failing.reason}" if failing is not None else None
    if sample.status == "not_applicable":
        reason = nothing_applied(sample.scores)
    return EntryResult(
        case_id=case_id,
        trace_id=sample.trace_id,
        passed=passed,
        status="passed" if passed else "failed",
        pass_rate=float(passed),
        reason=reason,
        scores=list(sample.scores),
        samples=[sample],
        input=sample.input,
        output=sample.output,
    )
