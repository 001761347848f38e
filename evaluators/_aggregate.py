"""From scores to sample outcomes, and from samples to an entry by the case's repeat rule.

The rules are documented in `evaluators/report.py` (outcomes, the gate) and `evaluators/spec.py`
(`repeat`). This module holds the arithmetic only, so it can be tested without traces.
"""

from __future__ import annotations

from collections.abc import Sequence
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


def aggregate_case(case: Case, policy: RepeatPolicy, samples: Sequence[SampleResult]) -> EntryResult:
    """Decide a spec case from its samples by `policy`.

    Args:
        case: the case.
        policy: its repeat rule.
        samples: the scored samples, in any order.

    Returns:
        The entry, with the samples sorted by start time.
    """
    ordered = sorted(samples, key=lambda s: (s.start_time or _FAR_FUTURE, s.trace_id or ""))
    base = _entry_base(case, ordered, policy)
    if len(ordered) < policy.min_samples:
        return _missing(base, len(ordered), policy.min_samples)
    considered = ordered[: policy.k] if policy.rule == "pass@k" and policy.k is not None else ordered
    scored = [s for s in considered if s.status != "not_applicable"]
    if not scored:
        return base.model_copy(update={"status": "not_applicable", "passed": None, "pass_rate": None})
    n_pass = sum(1 for s in scored if s.status == "passed")
    passed, rate = _apply_rule(policy, n_pass, len(scored))
    reason = None if n_pass == len(scored) else _failure_reason(scored, n_pass, policy)
    status = "passed" if passed else "failed"
    return base.model_copy(update={"status": status, "passed": passed, "pass_rate": rate, "reason": reason})


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


def _entry_base(case: Case, samples: Sequence[SampleResult], policy: RepeatPolicy) -> EntryResult:
    first = samples[0] if samples else None
    rule = f"pass@{policy.k}" if policy.rule == "pass@k" else policy.rule
    return EntryResult(
        case_id=case.id,
        trace_id=first.trace_id if first else None,
        passed=None,
        status="not_applicable",
        pass_rate=None,
        rule=rule,
        scores=aggregate_scores(samples),
        samples=list(samples),
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


def _failure_reason(scored: Sequence[SampleResult], n_pass: int, policy: RepeatPolicy) -> str:
    failing = next(s for s in scored if s.status == "failed")
    first = next((sc for sc in failing.scores if sc.passed is False), None)
    why = f"{first.scorer}: {first.reason}" if first is not None else "failed"
    if len(scored) == 1:
        return why
    return f"{n_pass} of {len(scored)} samples passed (rule {policy.rule}); first failure: {why}"


def aggregate_scores(samples: Sequence[SampleResult]) -> list[ScoreResult]:
    """The entry-level scores: the sample's own for one sample, else one row per scorer over samples."""
    if len(samples) == 1:
        return list(samples[0].scores)
    groups: dict[tuple[str, int | None, int], list[ScoreResult]] = {}
    for sample in samples:
        occurrence: dict[tuple[str, int | None], int] = {}
        for score in sample.scores:
            key = (score.scorer, score.turn)
            occurrence[key] = occurrence.get(key, 0) + 1
            groups.setdefault((*key, occurrence[key]), []).append(score)
    return [_merge(rows, len(samples)) for rows in groups.values()]


def _merge(rows: Sequence[ScoreResult], n_samples: int) -> ScoreResult:
    applicable = [r for r in rows if r.passed is not None]
    failed = [r for r in applicable if r.passed is False]
    values = [r.value for r in rows if r.value is not None]
    passed = None if not applicable else not failed
    reason = f"passed in {len(applicable) - len(failed)} of {n_samples} samples"
    if failed:
        reason += f"; first failure: {failed[0].reason}"
    error = next((r.error for r in rows if r.error is not None), None)
    value = sum(values) / len(values) if values else None
    return ScoreResult(scorer=rows[0].scorer, passed=passed, value=value, reason=reason, error=error, turn=rows[0].turn)


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
