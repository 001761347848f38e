"""Which recorded span became what in a rebuilt trace, and why the others were set aside.

A user whose framework is rebuilt wrongly needs to see the converter's reading, span by span:
`evaltrace traces PATH --explain TRACE` prints it. Each span of the recorded trace gets one
`SpanReading`: the role and convention the converter read in it, and what it became in the
`Trace` (the run, an iteration, a tool call, the source of the input or the answer, a child
trace) or, when it became nothing, the rule that set it aside.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._model_calls import records_reply
from evaltrace.collector.traces._normalized import AgentRun, NormalizedSpan
from evaltrace.collector.traces.conventions.answer_tool import ANSWER_TOOLS
from evaltrace.collector.traces.rebuild import classify
from evaltrace.collector.traces.records import ToolCall, Trace

_SET_ASIDE = {
    "chain": "a container (workflow, chain or graph step): its children are read, it is not a call itself",
    "other": "no convention's model, tool or agent attributes (an HTTP, database or framework-internal span)",
    "llm": "a model call inside another model call or inside a tool (a second instrumentation of one request,"
    " or a tool's own model use): not an iteration of this run",
    "tool": "a tool span that matched no call of this run",
    "agent": "an agent span outside this run",
}
"""Why a span of each role that became nothing was set aside."""


@dataclass(frozen=True)
class SpanReading:
    """One span as the converter read it."""

    span_id: str
    parent_span_id: str | None
    name: str
    depth: int
    role: str
    """`agent`, `llm`, `tool`, `chain` or `other` (see `_normalized.SpanRole`)."""
    convention: str
    became: list[str]
    """What the span gave the trace; empty when it was set aside."""
    set_aside: str | None
    """Why it gave nothing, when `became` is empty."""


def explain_trace(spans: list[Span], trace: Trace) -> list[SpanReading]:
    """Every span of one recorded trace, in tree order, with what it became in `trace`.

    Args:
        spans: all spans of the recorded trace (as `reader.iter_traces` yields them).
        trace: the trace `convert_trace` rebuilt from them (the one whose root is explained).
    """
    normalized_by_id = {span.span_id: classify(span) for span in spans}
    became = _contributions(trace)
    add_source(became, _input_source(trace, normalized_by_id), "the input")
    add_source(became, _output_source(trace, normalized_by_id), "the answer")
    readings = []
    for depth, span in _tree_order(spans):
        normalized = normalized_by_id[span.span_id]
        gave = became.get(span.span_id, [])
        reason = None if gave else _set_aside(normalized)
        readings.append(
            SpanReading(
                span_id=span.span_id,
                parent_span_id=span.parent_span_id,
                name=span.name,
                depth=depth,
                role=normalized.role,
                convention=normalized.convention,
                became=gave,
                set_aside=reason,
            )
        )
    return readings


def _set_aside(normalized: NormalizedSpan) -> str:
    tool = normalized.tool
    if tool is not None and tool.name in ANSWER_TOOLS:
        return f"the framework's answer tool ({ANSWER_TOOLS[tool.name]}): it gave the answer, not a tool call"
    if normalized.role == "llm" and not records_reply(normalized):
        return (
            "a model-kind span that records no reply (no content, tool calls, usage or finish reason): it prepared"
            " the request of the model call after it, which is the iteration (one model call, one iteration)"
        )
    return _SET_ASIDE.get(normalized.role, "not read")


def _contributions(trace: Trace) -> dict[str, list[str]]:
    """Span id -> what that span gave the trace (its run, iterations, tool calls)."""
    gave: dict[str, list[str]] = {}
    add_source(gave, trace.root_span_id, f"the run ({trace.name or 'unnamed'})")
    for iteration in trace.iterations:
        add_source(gave, iteration.span_id, f"iteration {iteration.index}")
        if iteration.duplicate_call_ids:
            ids = ", ".join(iteration.duplicate_call_ids)
            add_source(gave, iteration.span_id, f"call ids recorded twice in it, each read as one call: {ids}")
        for other in iteration.merged_span_ids:
            add_source(
                gave,
                other,
                f"merged into iteration {iteration.index}: the same model call (its usage not counted again)",
            )
    for number, call in enumerate(trace.tool_calls):
        add_source(gave, call.span_id, _call_text(number, call))
        if call.child is not None and not call.handoff:
            add_source(gave, call.child.root_span_id, f"the child trace of tool call {number} ({call.name})")
    return gave


def add_source(gave: dict[str, list[str]], span_id: str | None, what: str) -> None:
    """Note that `span_id` gave `what` (nothing when the source is unknown)."""
    if span_id is not None:
        gave.setdefault(span_id, []).append(what)


def _call_text(number: int, call: ToolCall) -> str:
    outcome = "failed" if call.error is not None else "no result recorded" if call.result is None else "result"
    return f"tool call {number}: {call.name} ({outcome})"


def _input_source(trace: Trace, by_id: dict[str, NormalizedSpan]) -> str | None:
    # As the assembler reads it: the run span's own input, else the first model call's user message.
    if trace.input is None:
        return None
    run = _run_span_giving(by_id, trace.root_span_id, lambda agent: agent.input == trace.input)
    if run is not None:
        return run
    first = trace.iterations[0].span_id if trace.iterations else None
    return first if first in by_id else trace.root_span_id


def _output_source(trace: Trace, by_id: dict[str, NormalizedSpan]) -> str | None:
    # The last run span's own output, else the last model call's reply.
    if trace.output is None:
        return None
    run = _run_span_giving(by_id, trace.root_span_id, lambda agent: agent.output == trace.output)
    if run is not None:
        return run
    last = trace.iterations[-1] if trace.iterations else None
    if last is not None and last.output_text == trace.output:
        return last.span_id
    return None


def _run_span_giving(
    by_id: dict[str, NormalizedSpan], run_id: str | None, gives: Callable[[AgentRun], bool]
) -> str | None:
    """The run span itself, else the workflow span above it (a crew around its agent), that gave the input or answer."""
    current = run_id
    while current is not None and current in by_id:
        span = by_id[current]
        if span.agent is not None and gives(span.agent):
            return current
        current = span.span.parent_span_id
    return None


def _tree_order(spans: list[Span]) -> Iterator[tuple[int, Span]]:
    """Spans depth first from their roots, children by start time; orphans as roots."""
    ids = {span.span_id for span in spans}
    kids: dict[str | None, list[Span]] = {}
    for span in spans:
        parent = span.parent_span_id if span.parent_span_id in ids else None
        kids.setdefault(parent, []).append(span)
    stack = [(0, span) for span in sorted(kids.get(None, []), key=_start, reverse=True)]
    while stack:
        depth, span = stack.pop()
        yield depth, span
        stack += [(depth + 1, kid) for kid in sorted(kids.get(span.span_id, []), key=_start, reverse=True)]


def _start(span: Span) -> tuple[int, str]:
    return span.start_time_ns, span.span_id
