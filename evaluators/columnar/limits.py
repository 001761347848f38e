"""Columnar form of the `usage` scorer: the run's token totals against their bounds.

Answers, like every form, only for a sure pass with the reference's exact `Score` (see `forms.py`):
bounds on the whole run only (`total`; per-model bounds need the model calls, left to the
reference), every metric recorded in the row's `usage` column and within its bounds.
"""

from __future__ import annotations

from evaltrace.collector.convert.records import Trace, Usage
from evaltrace.evaluators.columnar.calls import RowCalls
from evaltrace.evaluators.scorers.base import Score
from evaltrace.evaluators.scorers.limits import UsageLimits, metric_value


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
