"""How a recorded run ended, read from its trace: one classification for every place that says so.

The `outcome` scorer and the STATUS of `evaltrace traces` and `evaltrace show` both call
`trace_outcome`, so the listing never says `success` for a run the scorer calls a failure (a
run whose last model call was cut short, or whose only tool call failed, used to be listed as
`success`: the listing read the root span's status alone). The rules are in the docstring of
`output.py`.

Kept apart from the scorers (`output.py`) because listing traces must not import the
scoring machinery (the registry, JSON Schema): this module needs only the records.
"""

from __future__ import annotations

from typing import Literal

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.scorers.arguments import clip
from evaltrace.evaluators.scoring.scorers.evidence import no_answer

OutcomeKind = Literal["success", "failure", "error", "timeout"]
RunOutcome = Literal["success", "failure", "error", "timeout", "unknown"]
"""An outcome as read from a trace: `unknown` when nothing recorded shows how it ended."""


def trace_outcome(trace: Trace) -> tuple[RunOutcome, str]:
    """The run's outcome and the evidence for it (the rules: `output.py`'s module docstring)."""
    if trace.status == "timeout":
        return "timeout", f"the run timed out{f': {trace.error}' if trace.error else ''}"
    if trace.status == "error" or trace.error:
        return "error", f"the run raised: {trace.error or 'status error'}"
    problem = _failure_evidence(trace)
    if problem:
        return "failure", f"the run returned but {problem}"
    if trace.final_answer() is None:
        return "unknown", f"the run returned but {no_answer(trace)}"
    return "success", "the run returned normally"


CUT_SHORT = frozenset({"length", "content_filter"})
"""Normalised stop reasons (`Iteration.stop_reason`) that mean the reply was cut short: a token limit
(OpenAI's `length`, Anthropic's `max_tokens`, Gemini's `MAX_TOKENS`, ...) or a content filter
(`content_filter`, Anthropic's `refusal`, Gemini's `SAFETY`, ...)."""


def cut_short(stop_reason: str | None, finish_reasons: list[str]) -> str | None:
    """`length`, or `length: max_tokens` when recorded in the provider's words, if a model call was cut short."""
    if stop_reason not in CUT_SHORT:
        return None
    recorded = next((text for reason in finish_reasons if (text := reason.strip().lower())), stop_reason)
    return stop_reason if recorded == stop_reason else f"{stop_reason}: {recorded}"


def _failure_evidence(trace: Trace) -> str | None:
    """Why a run that returned normally still failed, or `None`."""
    answer = trace.final_answer()
    if answer is not None and not answer.strip():
        return "its final answer is empty"
    if trace.iterations:
        last = trace.iterations[-1]
        if last.error:
            return f"its last model call failed: {clip(last.error, 80)}"
        cut = cut_short(last.stop_reason, last.finish_reasons)
        if cut:
            return f"its last model call was cut short ({cut})"
    # A failed call is one with a recorded error (`calls.call_failure` without error results).
    errors = [c.error or None for c in trace.tool_calls]
    if errors and all(errors):
        first = f"{trace.tool_calls[0].name}: {clip(errors[0] or '', 80)}"
        return (
            f"its only tool call failed ({first})"
            if len(errors) == 1
            else f"all {len(errors)} tool calls failed ({first}, ...)"
        )
    return None
