"""Columnar forms of the `usage` and `latency` scorers: token totals and durations against bounds.

Answers, like every form, only for a sure pass with the reference's exact `Score` (see `forms.py`):
bounds on the whole run only (`total`; per-model bounds need the model calls, left to the
reference), every metric recorded in the row's `usage` column and within its bounds. `latency`:
the run's and the calls' durations from the table's microsecond timestamps, each within its bound.
"""

from __future__ import annotations

from evaltrace.collector.traces.records import Trace, Usage
from evaltrace.evaluators.scoring.columnar.calls import RowCalls
from evaltrace.evaluators.scoring.scorers.base import Score
from evaltrace.evaluators.scoring.scorers.limits import Latency, UsageLimits, metric_value


def usage_form(scorer: UsageLimits, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `usage` when every run-wide bound is recorded and met, else `None`."""
    if scorer.per_model or not scorer.total:
        return None
    usage = Usage.model_validate(row.usage)  # the row's values, as the trace holds them
    for metric, limit in scorer.total.items():
        value = metric_value(usage, metric)
        if value is None or limit.violation(value) is not None:
            return None
    return scorer.result(True, None, f"All {len(scorer.total)} usage limits met.", unknown=[])


def latency_form(scorer: Latency, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `latency` when every measured duration is within its bound, else `None`.

    Bounds on model calls (`max_iteration_seconds`) need the iterations' times: left to the reference.
    """
    if scorer.max_iteration_seconds is not None:
        return None
    checks: list[tuple[int | None, float]] = []
    if scorer.max_seconds is not None:
        checks.append((row.run_micros, scorer.max_seconds))
    for name, micros in zip(row.names, row.call_micros, strict=True):
        limit = scorer.max_tool_seconds
        if isinstance(limit, dict):
            limit = limit.get(name)
        if limit is not None:
            checks.append((micros, limit))
    measured = [(micros / 1_000_000, limit) for micros, limit in checks if micros is not None]
    if scorer.spec_check and len(measured) < len(checks):  # a duration not recorded fails a check
        return None
    if not checks:  # only per-tool bounds, for tools not called: a pass as a check, else not applicable
        if not scorer.spec_check:
            return None
        return scorer.result(True, None, "No call of a tool with a latency limit was made.")
    if not measured or any(seconds > limit for seconds, limit in measured):
        return None
    return scorer.result(True, None, f"All {len(measured)} measured durations within limits.")
