"""From scores to sample outcomes, and from samples to an entry by the case's repeat rule.

The rules are documented in `evaluators/report.py` (outcomes, the gate) and `evaluators/spec.py`
(`repeat`). This module holds the arithmetic only, so it can be tested without traces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from evaltrace.evaluators.base import Score
from evaltrace.evaluators.report import EntryResult, SampleResult, SampleStatus, ScoreResult
from evaltrace.evaluators.spec import Case, RepeatPolicy

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


def score_result(score: Score, turn: int | None = None) -> ScoreResult:
    """A scorer's `Score` as reported; an error always reports `passed=False`."""
    passed = False if score.error is not None else score.passed
    return ScoreResult(
        scorer=score.scorer,
        passed=passed,
        value=score.value,
        reason=score.reason,
        error=score.error,
        turn=turn,
        details=score.details,
    )


def sample_status(scores: Sequence[ScoreResult]) -> SampleStatus:
    """`failed` if any score failed or errored, `passed` if any passed, else `not_applicable`."""
    if any(s.error is not None or s.passed is False for s in scores):
        return "failed"
    if any(s.passed for s in scores):
        return "passed"
    return "not_applicable"


def status_passed(status: SampleStatus) -> bool | None:
    """`True`/`False` for passed/failed, `None` when not applicable."""
    return None if status == "not_applicable" else status == "passed"


def sample_order(sample: SampleResult) -> tuple[datetime, str]:
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
    ordered = sorted(samples, key=sample_order)
    return decide_case(case, policy, ordered).model_copy(update={"samples": ordered})


def decide_case(case: Case, policy: RepeatPolicy, ordered: Iterable[SampleResult]) -> EntryResult:
    """Decide a spec case in one pass over its samples, given in `sample_order`.

    The samples are consumed one at a time and not kept, so a case with many repeats can be
    decided from samples read back from disk.

    Returns:
        The entry without its `samples` (the caller attaches or streams them).
    """
    tally = _CaseTally(policy)
    for sample in ordered:
        tally.add(sample)
    base = _entry_base(case, tally, policy)
    if tally.samples < policy.min_samples:
        return _missing(base, tally.samples, policy.min_samples)
    if not tally.scored:
        return base.model_copy(update={"status": "not_applicable", "passed": None, "pass_rate": None})
    passed, rate = _apply_rule(policy, tally.passed, tally.scored)
    reason = None if tally.passed == tally.scored else _failure_reason(tally, policy)
    status = "passed" if passed else "failed"
    return base.model_copy(update={"status": status, "passed": passed, "pass_rate": rate, "reason": reason})


class _CaseTally:
    """What deciding a case needs from its samples, fed in order: counts, the first sample and failure."""

    def __init__(self, policy: RepeatPolicy) -> None:
        self._considered = policy.k if policy.rule == "pass@k" and policy.k is not None else None
        self.samples = 0
        self.scored = 0
        """Considered samples (the first k under pass@k) that are applicable."""
        self.passed = 0
        self.first: SampleResult | None = None
        self.first_failure: str | None = None
        """Why the first failing considered sample failed."""
        self.scores = ScoreMerger()

    def add(self, sample: SampleResult) -> None:
        if self.first is None:
            self.first = sample
        considered = self._considered is None or self.samples < self._considered
        self.samples += 1
        self.scores.add(sample.scores)
        if not considered or sample.status == "not_applicable":
            return
        self.scored += 1
        if sample.status == "passed":
            self.passed += 1
        elif self.first_failure is None:
            first = next((sc for sc in sample.scores if sc.passed is False), None)
            self.first_failure = f"{first.scorer}: {first.reason}" if first is not None else "failed"


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


def _entry_base(case: Case, tally: _CaseTally, policy: RepeatPolicy) -> EntryResult:
    first = tally.first
    rule = f"pass@{policy.k}" if policy.rule == "pass@k" else policy.rule
    return EntryResult(
        case_id=case.id,
        trace_id=first.trace_id if first else None,
        passed=None,
        status="not_applicable",
        pass_rate=None,
        rule=rule,
        scores=tally.scores.result(),
        input=case.input if case.turns is None else case.turns[0].input,
        output=first.output if first else None,
        tier=case.tier,
        tags=list(case.tags),
    )


def _missing(base: EntryResult, found: int, needed: int) -> EntryResult:
    if found == 0:
        status, reason = "missing", "no trace matched this case (by evaltrace.case_id or by input)"
    else:
        status, reason = "failed", f"{found} matching sample(s), the case needs at least {needed} (repeat.min_samples)"
    return base.model_copy(update={"status": status, "passed": False, "pass_rate": 0.0, "reason": reason})


def _failure_reason(tally: _CaseTally, policy: RepeatPolicy) -> str:
    why = tally.first_failure or "failed"
    if tally.scored == 1:
        return why
    return f"{tally.passed} of {tally.scored} samples passed (rule {policy.rule}); first failure: {why}"


def aggregate_scores(samples: Sequence[SampleResult]) -> list[ScoreResult]:
    """The entry-level scores: the sample's own for one sample, else one row per scorer over samples."""
    merger = ScoreMerger()
    for sample in samples:
        merger.add(sample.scores)
    return merger.result()


class ScoreMerger:
    """Entry-level scores over samples fed in order, without keeping the samples.

    One sample: its own scores. Several: one row per (scorer, turn, occurrence) with the number of
    passing samples, the first failure's reason, the first error and the mean value.
    """

    def __init__(self) -> None:
        self._samples = 0
        self._first: list[ScoreResult] = []
        self._groups: dict[tuple[str, int | None, int], _Merged] = {}

    def add(self, scores: Sequence[ScoreResult]) -> None:
        """Count one sample's scores."""
        self._samples += 1
        if self._samples == 1:
            self._first = list(scores)
        occurrence: dict[tuple[str, int | None], int] = {}
        for score in scores:
            key = (score.scorer, score.turn)
            occurrence[key] = occurrence.get(key, 0) + 1
            self._groups.setdefault((*key, occurrence[key]), _Merged(score.scorer, score.turn)).add(score)

    def result(self) -> list[ScoreResult]:
        """The entry-level scores."""
        if self._samples == 1:
            return list(self._first)
        return [group.result(self._samples) for group in self._groups.values()]


class _Merged:
    """One scorer's rows over samples (see `ScoreMerger`)."""

    def __init__(self, scorer: str, turn: int | None) -> None:
        self.scorer, self.turn = scorer, turn
        self.applicable = self.failed = self.values = 0
        self.total = 0.0
        self.first_failure: str | None = None
        self.error: str | None = None

    def add(self, row: ScoreResult) -> None:
        if row.passed is not None:
            self.applicable += 1
        if row.passed is False:
            if not self.failed:
                self.first_failure = str(row.reason)  # as the report always formatted it, `None` included
            self.failed += 1
        if row.value is not None:
            self.total += row.value
            self.values += 1
        if self.error is None:
            self.error = row.error

    def result(self, n_samples: int) -> ScoreResult:
        passed = None if not self.applicable else not self.failed
        reason = f"passed in {self.applicable - self.failed} of {n_samples} samples"
        if self.failed:
            reason += f"; first failure: {self.first_failure}"
        value = self.total / self.values if self.values else None
        return ScoreResult(
            scorer=self.scorer, passed=passed, value=value, reason=reason, error=self.error, turn=self.turn
        )


def trace_entry(sample: SampleResult, case_id: str | None) -> EntryResult:
    """The entry for one trace scored without a spec."""
    passed = status_passed(sample.status)
    failing = next((s for s in sample.scores if s.passed is False), None)
    return EntryResult(
        case_id=case_id,
        trace_id=sample.trace_id,
        passed=passed,
        status=sample.status,
        pass_rate=None if passed is None else float(passed),
        reason=f"{failing.scorer}: {failing.reason}" if failing is not None else None,
        scores=list(sample.scores),
        samples=[sample],
        input=sample.input,
        output=sample.output,
    )


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """Linear-interpolated percentile (`fraction` in [0, 1]); `None` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * fraction
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
