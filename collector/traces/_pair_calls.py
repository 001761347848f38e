"""Pair tool executions with the tool calls the model requested, and order them (argument matching: `arguments.py`).

Rules (tool spans and the calls the model requested are recorded apart and must be paired):

1. A tool span matches the requested call with the same call id. Placeholder ids (`unknown`,
   `<not specified>`) identify nothing.
2. The remaining tool spans match the remaining requested calls by tool name, in order; a call
   with the same arguments first (parallel calls of one tool whose spans started out of order).
3. Requested calls keep the model's order (iteration, then position in the reply), so parallel
   calls keep it even when their spans overlap or end in another order.
4. A requested call with no span still appears; its result comes from the tool-result message of
   a later model call's input, where one was recorded, and so does its error where that message
   reports one (a provider's `tool_result` block with `is_error: true`).
5. A tool span no model call requested still appears, after the calls of the last model call
   that started before it.
6. Arguments: the tool span's recorded arguments win (they are what the tool received, taken out
   of a framework's envelope by `conventions/envelopes`), except
   that a missing value, or a bare value (text, a number, JSON cut short) where the model's call
   has a JSON object, gives the model's object: LangChain records a one-argument tool's input as
   the bare value (`"Paris"` for `{"city": "Paris"}`) and a tool without arguments as nothing. A
   bare value with no object to fall back on is kept; assembly then wraps it when the tool's
   schema names exactly one parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _attributes as A
from evaltrace.collector.traces._construct import RecordFactory, texts_or_none
from evaltrace.collector.traces._normalized import NormalizedSpan, ToolExec
from evaltrace.collector.traces._spanutil import ns_to_datetime
from evaltrace.collector.traces.conventions.envelopes import unwrap_arguments, unwrap_result
from evaltrace.collector.traces.records import Message, MessagePart, ToolCall

_TOOL_CALL = RecordFactory(ToolCall)
assert _TOOL_CALL.names == (
    *("call_id", "name", "arguments", "result", "error", "iteration", "span_id"),
    *("start_time", "end_time", "arguments_truncated", "child", "handoff"),
)  # `merge`'s order


@dataclass(slots=True)
class Requested:
    """A tool call found in a model reply."""

    call: ToolCall
    iteration: int
    position: int


@dataclass(slots=True)
class ToolSpan:
    """A tool execution span in the trace's scope, with the nested agent run it started, if any."""

    normalized: NormalizedSpan
    child: Any = None
    """The child `Trace` of an agent started by this tool (agent-as-tool), or handed the run to."""
    handoff: bool = False
    """This span handed the run over to `child`, whose calls are also in the parent's list."""

    @property
    def span(self) -> Span:
        return self.normalized.span


def usable_id(call_id: str | None) -> str | None:
    """The call id, or `None` for missing and placeholder ids."""
    return None if call_id is None or call_id.strip() in A.PLACEHOLDER_CALL_IDS else call_id.strip()


def pair(requested: list[Requested], tools: list[ToolSpan]) -> dict[int, int]:
    """Map tool-span index to requested-call index: by call id first, then by name in order."""
    matches: dict[int, int] = {}
    taken: set[int] = set()
    by_id: dict[str, int] = {}
    for r_index, req in enumerate(requested):
        key = usable_id(req.call.call_id)
        if key is not None:
            by_id.setdefault(key, r_index)
    for t_index, tool in enumerate(tools):
        assert tool.normalized.tool is not None
        found = by_id.get(usable_id(tool.normalized.tool.call_id) or "")
        if found is not None and found not in taken:
            matches[t_index] = found
            taken.add(found)
    # Same name and the same arguments first: parallel calls of one tool whose spans started out of order.
    for same_arguments in (True, False):
        for t_index, tool in enumerate(tools):
            if t_index in matches:
                continue
            execution = tool.normalized.tool
            assert execution is not None
            own_id = usable_id(execution.call_id)
            for r_index, req in enumerate(requested):
                other_id = usable_id(req.call.call_id)
                if r_index in taken or req.call.name != execution.name:
                    continue
                if own_id is not None and other_id is not None and own_id != other_id:
                    continue  # both ids known and different: not the same call
                if same_arguments and not _same_arguments(execution, req.call):
                    continue
                matches[t_index] = r_index
                taken.add(r_index)
                break
    return matches


def _same_arguments(execution: ToolExec, call: ToolCall) -> bool:
    requested = call.arguments
    return requested is not None and unwrap_arguments(execution.arguments, requested) == requested


def tool_results(
    messages_per_iteration: list[list[Message] | None],
) -> tuple[dict[str, MessagePart], dict[str, list[MessagePart]]]:
    """Tool-result parts found in model inputs: by call id, and by tool name in order."""
    by_id: dict[str, MessagePart] = {}
    by_name: dict[str, list[MessagePart]] = {}
    seen: set[tuple[str | None, str | None, str]] = set()
    # Histories share the earlier calls' `Message` objects: one read already gave every key of theirs.
    read: set[int] = set()
    for messages in messages_per_iteration:
        for message in messages or []:
            if id(message) in read:
                continue
            read.add(id(message))
            for part in message.parts:
                if part.type != "tool_result":
                    continue
                # Later inputs repeat the history: count each result once.
                key = (part.call_id, part.name, repr(part.result))
                if key in seen:
                    continue
                seen.add(key)
                call_id = usable_id(part.call_id)
                if call_id is not None:
                    by_id.setdefault(call_id, part)
                if part.name:
                    by_name.setdefault(part.name, []).append(part)
    return by_id, by_name


def merge(req: Requested | None, tool: ToolSpan | None) -> ToolCall:
    """One `ToolCall` from a requested call and/or its tool span (the span's recorded values win)."""
    if tool is None:
        assert req is not None
        return req.call.model_copy(update={"iteration": req.iteration})
    call = req.call if req is not None else None  # only read below: no copy needed
    execution = tool.normalized.tool
    assert execution is not None
    span = tool.span
    arguments, truncated = merged_arguments(execution, call)
    call_id = usable_id(execution.call_id) or (call.call_id if call is not None else None) or execution.call_id
    name = execution.name or (call.name if call is not None else "")
    error = tool.normalized.error
    values = (  # in `ToolCall`'s field order
        call_id,
        name,
        arguments,
        unwrap_result(execution.result, span.scope_name),  # a framework's envelope holds the return value
        error,
        req.iteration if req is not None else None,
        span.span_id,
        ns_to_datetime(span.start_time_ns),
        ns_to_datetime(span.end_time_ns),
        truncated,
        tool.child,
        tool.handoff,
    )
    # Ids, names and errors read from attributes go through validation unless they are text (`_construct`).
    if type(name) is str and texts_or_none(call_id, error, span.span_id) and type(truncated) is bool:
        return _TOOL_CALL.make(*values)
    return ToolCall(**dict(zip(_TOOL_CALL.names, values, strict=True)))


def merged_arguments(execution: ToolExec, call: ToolCall | None) -> tuple[Any, bool]:
    """`(arguments, truncated)` of a tool span and the call that requested it (module rule 6)."""
    requested = call.arguments if call is not None else None
    recorded = unwrap_arguments(execution.arguments, requested)
    if recorded is None or (isinstance(requested, dict) and not isinstance(recorded, (dict, list))):
        if call is not None and requested is not None:
            return requested, call.arguments_truncated
    return recorded, execution.arguments_truncated if recorded is not None else False
