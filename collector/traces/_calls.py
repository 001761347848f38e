"""A trace's tool calls: the model's requests paired with the tool spans that ran them, in order.

Results the tool spans lack are taken from later model inputs (the history the framework resent),
and a bare argument value becomes `{param: value}` when the tool's schema names one parameter.
"""

from __future__ import annotations

from evaltrace.collector.traces._normalized import NormalizedSpan
from evaltrace.collector.traces._pair_calls import Requested, ToolSpan, merge, pair, tool_results, usable_id
from evaltrace.collector.traces._spanutil import ns_to_datetime
from evaltrace.collector.traces.conventions.envelopes import unwrap_result
from evaltrace.collector.traces.records import Iteration, Message, MessagePart, ToolCall, ToolSchema


def tool_schemas(heads: list[NormalizedSpan], llms: list[NormalizedSpan]) -> list[ToolSchema]:
    found: dict[str, ToolSchema] = {}
    sources = [h.agent.tool_schemas for h in heads if h.agent] + [n.llm.tool_schemas for n in llms if n.llm]
    for schemas in sources:
        for schema in schemas:
            found.setdefault(schema.name, schema)
    return list(found.values())


def tool_calls(
    iterations: list[Iteration],
    llms: list[NormalizedSpan],
    tools: list[ToolSpan],
    schemas: list[ToolSchema],
    warnings: list[str],
) -> list[ToolCall]:
    requested = [Requested(c, it.index, pos) for it in iterations for pos, c in enumerate(it.tool_calls)]
    matches = pair(requested, tools)
    keyed: list[tuple[tuple[int, int, int], ToolCall]] = []
    matched_requests = {r: t for t, r in matches.items()}
    for r_index, req in enumerate(requested):
        t_index = matched_requests.get(r_index)
        call = merge(req, tools[t_index] if t_index is not None else None)
        keyed.append(((req.iteration, 0, req.position), call))
    starts = [it.start_time for it in iterations]
    for t_index, tool in enumerate(tools):
        if t_index in matches:
            continue
        started = ns_to_datetime(tool.span.start_time_ns)
        before = [i for i, s in enumerate(starts) if s is not None and started is not None and s <= started]
        keyed.append(((before[-1] if before else -1, 1, tool.span.start_time_ns), merge(None, tool)))
    keyed.sort(key=lambda item: item[0])
    calls = [call for _, call in keyed]
    if any(call.result is None for call in calls):
        # Only calls without a result take one from later model inputs: skip the history scan otherwise.
        missing = [call for call in calls if call.result is None]
        _fill_results(calls, *tool_results([prompt_of(n) for n in llms]))
        # A result the framework handed the model in its envelope (ADK's `{"result": ...}`) is unwrapped
        # as a tool span's own would be: by the envelopes of the span that ran the call.
        scopes = {tool.span.span_id: tool.span.scope_name for tool in tools}
        for call in missing:
            if call.span_id in scopes:
                call.result = unwrap_result(call.result, scopes[call.span_id])
    _normalise_arguments(calls, schemas, warnings)
    by_iteration: dict[int | None, list[ToolCall]] = {}
    for call in calls:
        by_iteration.setdefault(call.iteration, []).append(call)
    for iteration in iterations:
        iteration.tool_calls = by_iteration.get(iteration.index, [])
    return calls


def _fill_results(calls: list[ToolCall], by_id: dict[str, MessagePart], by_name: dict[str, list[MessagePart]]) -> None:
    """Results (and, for calls no tool span recorded, errors) from the tool results the model was given."""
    used: dict[str, int] = {}
    for call in calls:
        key = usable_id(call.call_id)
        part: MessagePart | None = None
        if key is not None and key in by_id:
            part = by_id[key]
        else:
            queue = by_name.get(call.name, [])
            position = used.get(call.name, 0)
            if position < len(queue):
                used[call.name] = position + 1
                part = queue[position]
        if part is None:
            continue
        if call.result is None:
            call.result = part.result
        # A tool span records the tool's own outcome; without one, the model's tool result is the evidence.
        if call.error is None and call.span_id is None:
            call.error = part.error


def _normalise_arguments(calls: list[ToolCall], schemas: list[ToolSchema], warnings: list[str]) -> None:
    """A bare value where the tool's schema names exactly one parameter becomes `{param: value}`."""
    by_name = {s.name: s for s in schemas}
    for call in calls:
        args = call.arguments
        if args is None or isinstance(args, dict) or call.arguments_truncated:
            continue
        schema = by_name.get(call.name)
        properties = (schema.parameters or {}).get("properties") if schema else None
        if isinstance(properties, dict) and len(properties) == 1:
            call.arguments = {next(iter(properties)): args}
        elif isinstance(args, str):
            warnings.append(f"tool call {call.name!r}: arguments are text, not a JSON object")


def prompt_of(normalized: NormalizedSpan) -> list[Message] | None:
    # Parsed here even when iterations leave prompts out: the results and the input they hold count.
    return normalized.llm.inputs() if normalized.llm is not None else None
