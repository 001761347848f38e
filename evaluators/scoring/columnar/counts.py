"""Columnar forms of the rule scorers that count calls: `tool_errors` and `budget`.

Each reads only per-row flags and counts (`RowCalls`), and answers only for a sure pass, with the
reference's exact `Score`; anything else goes to the reference (see `forms.py`).

`tool_errors`: no call has an error recorded and, with `error_results`, no result's JSON text holds
`"error"` (so no result is an object with an `error` field): every call succeeded. A run without
calls passes only as a spec check (a default does not apply, which the reference says).
`budget`: the counts of tool calls, model calls and steps are within every limit that is set.
With `nested`, a row whose calls started nested agents is left to the reference (their calls count).
"""

from __future__ import annotations

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.columnar.calls import RowCalls
from evaltrace.evaluators.scoring.scorers.base import Score
from evaltrace.evaluators.scoring.scorers.calls import Budget, ToolErrors


def tool_errors_form(scorer: ToolErrors, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `tool_errors` when no call can have failed, else `None`."""
    if (scorer.nested and row.nested) or row.failed or (scorer.error_results and row.error_text):
        return None
    if not row.names:
        return scorer.result(True, 1.0, "The agent made no tool calls, so none failed.") if scorer.spec_check else None
    return scorer.result(True, 1.0, f"All {len(row.names)} tool calls succeeded.", failures=[])


def budget_form(scorer: Budget, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `budget` when every count set a limit is within it, else `None`."""
    if scorer.nested and row.nested:
        return None
    tool_calls, model_calls = len(row.names), row.model_calls
    counts = {"tool calls": tool_calls, "model calls": model_calls, "steps": tool_calls + model_calls}
    limits = {"tool calls": scorer.max_tool_calls, "model calls": scorer.max_model_calls, "steps": scorer.max_steps}
    checked = {k: (counts[k], limit) for k, limit in limits.items() if limit is not None}
    if not checked or any(n > limit for n, limit in checked.values()):
        return None
    within = ", ".join(f"{k} {n}/{limit}" for k, (n, limit) in checked.items())
    return scorer.result(
        True, None, f"Within budget ({within}).", tool_calls=tool_calls, model_calls=model_calls, steps=counts["steps"]
    )
