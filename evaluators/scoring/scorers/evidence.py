"""What a trace did not record, said the same way by every scorer that needs it.

A check whose evidence was not recorded fails (see `base.Scorer.missing`); its reason names
what is missing and how to record it. Content (the input, the answer, tool arguments and
results) goes missing for two usual reasons: content capture is off, or the agent has no root
span, so the answer and input live on no span of the trace.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring.scorers.arguments import call_label

RECORD_HINT = "record content (is EVALTRACE_CAPTURE_CONTENT=0?) or wrap the agent in evaltrace.collector.agent_run(...)"
"""How to get the content recorded, appended to every reason about missing content."""
UNINSTRUMENTED_HINT = (
    "no model call or tool call of the agent was recorded: is its model client instrumented? (install the "
    "client's OpenTelemetry instrumentation, e.g. evaltrace[openai], which opentelemetry-instrument and "
    "evaltrace run load, or record the run with evaltrace.collector.agent_run and tool_call)"
)
"""The hint for a trace holding nothing of the agent's: content capture is not what is missing."""


def record_hint(trace: Trace) -> str:
    """How to record what `trace` lacks: the instrumentation when it holds nothing of the agent's, else content.

    A trace with no input, no output, no model call and no tool call is a root span and nothing
    under it (`evaltrace run`'s, around an agent whose client nothing instrumented): content
    capture cannot be what is missing.
    """
    if trace.input is None and trace.output is None and not trace.iterations and not trace.tool_calls:
        return UNINSTRUMENTED_HINT
    return RECORD_HINT


def no_answer(trace: Trace) -> str:
    """`no answer was recorded: ...`, saying what else is missing and how to record it."""
    what = "no input and no output" if trace.input is None else "no output"
    return f"no answer was recorded: the trace has {what}; {record_hint(trace)}"


def no_input(trace: Trace) -> str:
    """`no input was recorded: ...` with the hint."""
    return f"no input was recorded: the trace has no user message; {record_hint(trace)}"


def unrecorded_labels(calls: Sequence[ToolCall]) -> list[str]:
    """Per call, its label (`call #N name`) when its arguments were not recorded, else ``."""
    return [
        call_label(i, c.name) if c.arguments is None and not c.arguments_truncated else "" for i, c in enumerate(calls)
    ]


def unrecorded_arguments(calls: Sequence[ToolCall]) -> list[str]:
    """Labels (`call #N name`) of the calls whose arguments were not recorded."""
    return [label for label in unrecorded_labels(calls) if label]


def arguments_not_recorded(labels: Sequence[str], hint: bool = True) -> str:
    """`the arguments of call #1 x, call #2 y were not recorded; <hint>` (at most three named).

    `hint=False` leaves the hint out, for a reason that gives it once after several findings.
    """
    named = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    text = f"the arguments of {named} were not recorded"
    return f"{text}; {RECORD_HINT}" if hint else text
