"""The converter's shortcut for the common OTel GenAI trace: one `invoke_agent` span over its model and tool calls.

Most recorded runs are that shape (the GenAI instrumentations' own, the recorder's `agent_run`
with `tool_call`, the benchmarks' sets): a root `invoke_agent` span whose children are model-call
(`chat`, `generate_content`, `text_completion`) and `execute_tool` spans, nothing nested, each
tool span answering one call the model requested by its call id. For such a trace the general
assembly (the span tree, convention detection, scopes, nested runs, handoffs, model calls
described twice, pairing by name) decides nothing, so `flat_trace` builds the same `Trace`
straight from the spans: each span read by the GenAI extractor the converter would pick,
iterations, calls and the outcome made by the assembly's own field builders. It answers `None`
whenever a rule it skips could apply (any attribute key outside the shape's, events, links, a
warning, a call without its span, a result only a prompt holds under a name), and
`convert_trace` then runs the general converter, the reference: both give equal records
(tests/collector/traces/test_flat_genai.py compares them over recorded framework runs and
generated traces).
"""

from __future__ import annotations

from typing import Final

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _attributes as A
from evaltrace.collector.traces._calls import prompt_of, tool_schemas
from evaltrace.collector.traces._fields import iteration, new_trace, outcome
from evaltrace.collector.traces._model_calls import records_reply
from evaltrace.collector.traces._normalized import NormalizedSpan
from evaltrace.collector.traces._pair_calls import Requested, ToolSpan, merge, tool_results, usable_id
from evaltrace.collector.traces.conventions.answer_tool import ANSWER_TOOLS
from evaltrace.collector.traces.conventions.envelopes import unwrap_result
from evaltrace.collector.traces.conventions.genai import extract
from evaltrace.collector.traces.conventions.structure import extract as structure
from evaltrace.collector.traces.records import Iteration, ToolCall, Trace

_COMMON: Final = frozenset({A.OPERATION_NAME, A.ERROR_TYPE})
_ROOT_KEYS: Final = _COMMON | {
    A.AGENT_NAME,
    A.REQUEST_MODEL,
    A.PROVIDER_NAME,
    A.CONVERSATION_ID,
    A.INPUT_TOKENS[0],
    A.OUTPUT_TOKENS[0],
    A.INPUT_MESSAGES,
    A.OUTPUT_MESSAGES,
    A.TOOL_DEFINITIONS,
    A.CASE_ID,
    "agentevals.eval.case.id",
}
"""The attribute keys of a root the shortcut reads as the converter does (no other convention's, no other context)."""
_CHAT_KEYS: Final = _COMMON | {
    A.PROVIDER_NAME,
    A.REQUEST_MODEL,
    A.RESPONSE_MODEL,
    A.RESPONSE_ID,
    A.INPUT_TOKENS[0],
    A.OUTPUT_TOKENS[0],
    A.FINISH_REASONS,
    "server.address",
    "server.port",
    A.INPUT_MESSAGES,
    A.OUTPUT_MESSAGES,
    A.TOOL_DEFINITIONS,
}
_TOOL_KEYS: Final = _COMMON | {
    A.TOOL_NAME,
    A.TOOL_CALL_ID,
    "gen_ai.tool.type",
    A.TOOL_CALL_ARGUMENTS,
    A.TOOL_CALL_RESULT,
}
_KEYS: Final = {"invoke_agent": _ROOT_KEYS, A.TOOL_OPERATION: _TOOL_KEYS} | dict.fromkeys(A.LLM_OPERATIONS, _CHAT_KEYS)
_FRAMEWORK_NAMES: Final = A.PYDANTIC_AGENT_SPAN_NAMES | A.PYDANTIC_TOOL_SPAN_NAMES


def flat_trace(spans: list[Span]) -> Trace | None:
    """The converter's trace of one OTel trace's spans when they are the flat GenAI shape, else `None`."""
    try:
        return _flat_trace(spans)
    except Exception:  # a span an extractor fails on: the converter reads it, and says so in a warning
        return None


def _flat_trace(spans: list[Span]) -> Trace | None:
    shape = _shape(spans)
    members = _read_all(shape[0]) if shape is not None else None
    if shape is None or members is None:
        return None
    head, llms, executions = members[0], members[1 : shape[1] + 1], members[shape[1] + 1 :]
    if head.agent is None or not _plain(head, llms, executions):
        return None
    iterations = [iteration(index, normalized, False) for index, normalized in enumerate(llms)]
    calls = _calls(iterations, llms, executions)
    values = outcome([head], iterations, llms) if calls is not None else None
    if values is None or any(m.warnings for m in members):  # a prompt read for the input may warn
        return None
    attributes = {A.CASE_ID: case} if isinstance(case := head.span.attributes.get(A.CASE_ID), str) else {}
    values.update(
        iterations=iterations,
        tool_schemas=tool_schemas([head], llms),
        tool_calls=calls,
        attributes=attributes,
        warnings=[],
        convention="+".join(sorted({m.convention for m in members})),
        span_count=len(spans),
        conversation_id=head.conversation_id,
        case_id=attributes.get(A.CASE_ID),
    )
    return new_trace([head.span], [head], set(), values)


def _read_all(spans: list[Span]) -> list[NormalizedSpan] | None:
    """What `classify` makes of each span of the shape (its GenAI content, else its structure); `None` on a warning."""
    found = []
    for span in spans:
        normalized = extract(span) or structure(span)
        if normalized is None or normalized.warnings:
            return None
        found.append(normalized)
    return found


def _shape(spans: list[Span]) -> tuple[list[Span], int] | None:
    """The root, model-call and tool spans of a flat GenAI trace in the converter's order, and how many model calls."""
    roots = [span for span in spans if span.parent_span_id is None]
    if len(roots) != 1 or roots[0].attributes.get(A.OPERATION_NAME) != "invoke_agent":
        return None
    root = roots[0]
    chats: list[Span] = []
    tools: list[Span] = []
    for span in spans:
        operation = span.attributes.get(A.OPERATION_NAME)
        keys = _KEYS.get(operation) if type(operation) is str else None
        if keys is None or span.events or span.links or span.name in _FRAMEWORK_NAMES or span.attributes.keys() - keys:
            return None
        if span is root:
            continue
        if span.parent_span_id != root.span_id or operation == "invoke_agent":
            return None
        (tools if operation == A.TOOL_OPERATION else chats).append(span)
    if len({span.span_id for span in spans}) != len(spans):
        return None
    order = _start_order
    return [root, *sorted(chats, key=order), *sorted(tools, key=order)], len(chats)


def _start_order(span: Span) -> tuple[int, str]:
    return span.start_time_ns, span.span_id


def _plain(head: NormalizedSpan, llms: list[NormalizedSpan], executions: list[NormalizedSpan]) -> bool:
    """Whether the spans read as the roles the shortcut assumes, each model call its own."""
    case = head.span.attributes.get(A.CASE_ID)
    if case is not None and not isinstance(case, str):  # the converter would write its text
        return False
    if any(n.llm is None or not records_reply(n) for n in llms) or any(n.tool is None for n in executions):
        return False
    # Two spans of one model call would merge (`_model_calls`): one instrumentation, distinct response ids.
    responses = [n.llm.response_id for n in llms if n.llm is not None and n.llm.response_id]
    return len({n.span.scope_name for n in llms}) <= 1 and len(set(responses)) == len(responses)


def _calls(
    iterations: list[Iteration], llms: list[NormalizedSpan], executions: list[NormalizedSpan]
) -> list[ToolCall] | None:
    """The calls, each requested call paired with the one tool span of its id; `None` when the pairing is not that."""
    requested = [Requested(c, it.index, pos) for it in iterations for pos, c in enumerate(it.tool_calls)]
    by_id: dict[str, ToolSpan] = {}
    for normalized in executions:
        assert normalized.tool is not None
        key = usable_id(normalized.tool.call_id)
        if key is None or key in by_id:
            return None
        by_id[key] = ToolSpan(normalized)
    ids = [usable_id(req.call.call_id) for req in requested]
    if len(set(ids)) != len(ids) or set(ids) != by_id.keys():
        return None
    calls = [merge(req, by_id[key]) for req, key in zip(requested, ids, strict=True)]  # type: ignore[index]
    if any(call.name in ANSWER_TOOLS or not isinstance(call.arguments, (dict, type(None))) for call in calls):
        return None
    scopes = {n.span.span_id: n.span.scope_name for n in executions}
    if any(call.result is None for call in calls) and not _results_from_prompts(calls, llms, scopes):
        return None
    by_iteration: dict[int | None, list[ToolCall]] = {}
    for call in calls:
        by_iteration.setdefault(call.iteration, []).append(call)
    for it in iterations:
        it.tool_calls = by_iteration.get(it.index, [])
    return calls


def _results_from_prompts(calls: list[ToolCall], llms: list[NormalizedSpan], scopes: dict[str, str | None]) -> bool:
    """The results the tool spans lack, from the prompts by call id (as `_calls.tool_calls`); whether each had one."""
    prompts = [prompt_of(n) for n in llms]
    if any(n.warnings for n in llms):
        return False
    by_id, _ = tool_results(prompts)
    for call in calls:
        if call.result is None:
            part = by_id.get(usable_id(call.call_id) or "")
            if part is None:
                return False  # the converter would look by name next
            call.result = unwrap_result(part.result, scopes[call.span_id or ""])
    return True
