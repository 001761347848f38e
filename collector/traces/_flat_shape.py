"""The common OTel GenAI trace's shape: one `invoke_agent` span over its model and tool calls.

Most recorded runs are that shape (the GenAI instrumentations' own, the recorder's `agent_run`
with `tool_call`, the benchmarks' sets): a root `invoke_agent` span whose children are model-call
(`chat`, `generate_content`, `text_completion`) and `execute_tool` spans, nothing nested, every
attribute key one the GenAI extractor reads as the converter does, no events, no links.
`_flat_columns.flat_row` makes such a trace's traces-table row straight from its spans.
"""

from __future__ import annotations

from typing import Final

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _attributes as A

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
"""The attribute keys of a root read as the converter reads them (no other convention's, no other context)."""
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


def flat_shape(spans: list[Span]) -> tuple[Span, list[Span], list[Span]] | None:
    """The root, model-call and tool spans of a flat GenAI trace, each kind in start order; `None` for another shape."""
    roots = [span for span in spans if span.parent_span_id is None]
    if len(roots) != 1 or roots[0].attributes.get(A.OPERATION_NAME) != "invoke_agent":
        return None
    root = roots[0]
    chats: list[Span] = []
    tools: list[Span] = []
    for span in spans:
        attrs = span.attributes
        operation = attrs.get(A.OPERATION_NAME)
        keys = _KEYS.get(operation) if type(operation) is str else None
        if keys is None or span.events or span.links or span.name in _FRAMEWORK_NAMES or not keys.issuperset(attrs):
            return None
        if span is root:
            continue
        if span.parent_span_id != root.span_id or operation == "invoke_agent":
            return None
        (tools if operation == A.TOOL_OPERATION else chats).append(span)
    if len({span.span_id for span in spans}) != len(spans):
        return None
    return root, sorted(chats, key=_start_order), sorted(tools, key=_start_order)


def _start_order(span: Span) -> tuple[int, str]:
    return span.start_time_ns, span.span_id
