"""OTel GenAI conventions: current JSON messages, the older per-message events, pydantic-ai's extras.

Three extractors, tried in this order by `rebuild.py` (after OpenInference and OpenLLMetry):

- `extract`: v1.37+ shape. `gen_ai.input.messages` / `gen_ai.output.messages` /
  `gen_ai.system_instructions` / `gen_ai.tool.definitions` as JSON text (or structured values),
  on the span or on a `gen_ai.client.inference.operation.details` event; tool spans with
  `gen_ai.tool.call.arguments` / `gen_ai.tool.call.result`.
- `extract_events`: v1.36-and-earlier shape. One span event per message (`gen_ai.user.message`,
  `gen_ai.assistant.message`, `gen_ai.tool.message`, `gen_ai.choice`, ...), bodies JSON-encoded in
  the event attributes; Strands-style tool spans with their input and result as events.
- `extract_pydantic_ai`: pydantic-ai's own agent-run attributes (`pydantic_ai.all_messages`,
  `final_result`), its v2 tool spans (`running tool` with `tool_arguments` / `tool_response`)
  and its v1 `events` attribute.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _attributes as A
from evaltrace.collector.traces._genai_messages import (
    event_message,
    parse_messages,
    system_message,
    tool_calls_of,
)
from evaltrace.collector.traces._lenient_json import json_list
from evaltrace.collector.traces._normalized import NormalizedSpan, SpanRole
from evaltrace.collector.traces._spanutil import (
    as_int,
    as_str,
    read_arguments,
    read_content,
    span_label,
    text_or_none,
    usage,
)
from evaltrace.collector.traces.conventions.payload import tool_schema
from evaltrace.collector.traces.conventions.structure import base, genai_role
from evaltrace.collector.traces.records import Message, ToolSchema, Usage

_CONTENT_KEYS = (A.INPUT_MESSAGES, A.OUTPUT_MESSAGES, A.TOOL_CALL_ARGUMENTS, A.TOOL_CALL_RESULT)


def last_text(messages: list[Message] | None, role: str) -> str | None:
    """Text of the last message of `role` that has text."""
    for message in reversed(messages or []):
        if message.role == role and message.text is not None:
            return message.text
    return None


def tool_schemas(value: Any) -> list[ToolSchema]:
    """`gen_ai.tool.definitions` (GenAI, Strands `inputSchema`, or OpenAI `{"function": {...}}`) as schemas."""
    if not isinstance(value, str):
        return _tool_schemas(value)
    # Every model call of every trace usually carries the same definitions text: parse it once.
    # The cached `ToolSchema` objects are shared (records are read-only once built); the list is not.
    cached = _SCHEMAS.get(value)
    if cached is None:
        if len(_SCHEMAS) >= _SCHEMAS_MAX:
            _SCHEMAS.clear()
        cached = _SCHEMAS[value] = _tool_schemas(value)
    return list(cached)


_SCHEMAS: dict[str, list[ToolSchema]] = {}
_SCHEMAS_MAX = 64


def _tool_schemas(value: Any) -> list[ToolSchema]:
    return [schema for item in json_list(value) or [] if (schema := tool_schema(item)) is not None]


# --- v1.37+ -----------------------------------------------------------------------------------


def _content_attributes(span: Span) -> dict[str, Any] | None:
    """The content attributes: the span's own, else those of an operation-details event."""
    attrs = span.attributes
    if A.INPUT_MESSAGES in attrs or A.OUTPUT_MESSAGES in attrs or A.TOOL_CALL_ARGUMENTS in attrs:
        return attrs
    if A.TOOL_CALL_RESULT in attrs:  # `_CONTENT_KEYS`, spelled out: this runs for every span
        return attrs
    merged: dict[str, Any] | None = None
    for event in span.events:
        if event.name == A.OPERATION_DETAILS_EVENT and any(key in event.attributes for key in _CONTENT_KEYS):
            # Strands writes the input and the output messages as two events of this name: take both.
            merged = {**(merged or attrs), **event.attributes}
    return merged


def extract(span: Span) -> NormalizedSpan | None:
    """The v1.37+ GenAI shape, or `None` when the span carries none of its content attributes."""
    attrs = _content_attributes(span)
    if attrs is None:
        return None
    role = genai_role(span) or _role_from_content(attrs)
    normalized = base(span, role, "genai")
    where = span_label(span)
    warnings = normalized.warnings
    if normalized.llm is not None:
        llm = normalized.llm
        llm.input_loader = partial(_input_messages, attrs, where, warnings)
        llm.output_messages = parse_messages(attrs.get(A.OUTPUT_MESSAGES), where, warnings, history=False)
        llm.tool_calls = tool_calls_of(llm.output_messages)
        llm.tool_schemas = tool_schemas(attrs.get(A.TOOL_DEFINITIONS))
    elif normalized.tool is not None:
        tool = normalized.tool
        args = read_arguments(attrs.get(A.TOOL_CALL_ARGUMENTS), f"{where}: tool {tool.name!r}")
        tool.arguments, tool.arguments_truncated = args.value, args.truncated
        if args.warning:
            warnings.append(args.warning)
        tool.result = read_content(attrs.get(A.TOOL_CALL_RESULT), f"{where}: result", warnings)
    elif normalized.agent is not None:
        agent = normalized.agent
        agent.input_messages = _input_messages(attrs, where, warnings)
        agent.output_messages = parse_messages(attrs.get(A.OUTPUT_MESSAGES), where, warnings, history=False)
        agent.input = last_text(agent.input_messages, "user")
        agent.output = last_text(agent.output_messages, "assistant")
        agent.tool_schemas = tool_schemas(attrs.get(A.TOOL_DEFINITIONS))
        agent.usage = _aggregated_usage(attrs)
    return normalized


def _role_from_content(attrs: dict[str, Any]) -> SpanRole:
    if A.TOOL_CALL_ARGUMENTS in attrs or A.TOOL_CALL_RESULT in attrs:
        return "tool"
    return "llm"


def _input_messages(attrs: dict[str, Any], where: str, warnings: list[str]) -> list[Message] | None:
    messages = parse_messages(attrs.get(A.INPUT_MESSAGES), where, warnings)
    system = system_message(attrs.get(A.SYSTEM_INSTRUCTIONS), where, warnings)
    if system is None:
        return messages
    # Some emitters (pydantic-ai) repeat the instructions as a system message: keep one copy.
    rest = [m for m in messages or [] if not (m.role == "system" and m.text == system.text)]
    return [system, *rest]


def _aggregated_usage(attrs: dict[str, Any]) -> Usage | None:
    aggregated = usage(
        input_tokens=as_int(attrs.get(A.AGGREGATED_INPUT_TOKENS) or attrs.get(A.INPUT_TOKENS[0])),
        output_tokens=as_int(attrs.get(A.AGGREGATED_OUTPUT_TOKENS) or attrs.get(A.OUTPUT_TOKENS[0])),
    )
    return aggregated if aggregated.total_tokens is not None else None


# --- v1.36 and earlier: per-message events ----------------------------------------------------


def extract_events(span: Span) -> NormalizedSpan | None:
    """The per-message event shape, or `None` when the span has no GenAI message events."""
    events = [e for e in span.events if e.name in A.EVENT_ROLES or e.name == A.CHOICE_EVENT]
    if not events:
        return None
    role = genai_role(span) or "llm"
    normalized = base(span, role, "genai-events")
    where = span_label(span)
    warnings = normalized.warnings
    inputs = [
        event_message(A.EVENT_ROLES[e.name], e.attributes, where, warnings) for e in events if e.name != A.CHOICE_EVENT
    ]
    choices = [e.attributes for e in events if e.name == A.CHOICE_EVENT]
    outputs = [event_message("assistant", body, where, warnings) for body in choices]
    if normalized.llm is not None:
        normalized.llm.input_messages = inputs
        normalized.llm.output_messages = outputs
        normalized.llm.tool_calls = tool_calls_of(outputs)
        if not normalized.llm.finish_reasons:
            normalized.llm.finish_reasons = [str(b["finish_reason"]) for b in choices if b.get("finish_reason")]
    elif normalized.agent is not None:
        normalized.agent.input_messages, normalized.agent.output_messages = inputs, outputs
        normalized.agent.input = last_text(inputs, "user")
        normalized.agent.output = last_text(outputs, "assistant")
    elif normalized.tool is not None:
        _tool_from_events(normalized, span, where)
    return normalized


def _tool_from_events(normalized: NormalizedSpan, span: Span, where: str) -> None:
    # Strands tool spans: the input as a `gen_ai.tool.message` event, the result as `gen_ai.choice`.
    assert normalized.tool is not None
    for event in span.events:
        if event.name == "gen_ai.tool.message" and normalized.tool.arguments is None:
            args = read_arguments(event.attributes.get("content"), f"{where}: tool {normalized.tool.name!r}")
            normalized.tool.arguments, normalized.tool.arguments_truncated = args.value, args.truncated
            if args.warning:
                normalized.warnings.append(args.warning)
            normalized.tool.call_id = normalized.tool.call_id or as_str(event.attributes.get("id"))
        elif event.name == A.CHOICE_EVENT:
            raw = event.attributes.get("message")
            normalized.tool.result = read_content(raw, f"{where}: result", normalized.warnings)


# --- pydantic-ai fallbacks --------------------------------------------------------------------


def extract_pydantic_ai(span: Span) -> NormalizedSpan | None:
    """pydantic-ai's agent-run and v2 tool attributes, or its v1 `events` attribute."""
    attrs = span.attributes
    if A.PYDANTIC_ALL_MESSAGES in attrs or span.name in A.PYDANTIC_AGENT_SPAN_NAMES:
        return _pydantic_agent(span)
    if (
        A.PYDANTIC_TOOL_ARGUMENTS in attrs
        or A.PYDANTIC_TOOL_RESPONSE in attrs
        or span.name in A.PYDANTIC_TOOL_SPAN_NAMES
    ):
        return _pydantic_tool(span)
    if isinstance(json_list(attrs.get(A.PYDANTIC_EVENTS)), list) and genai_role(span) in (None, "llm"):
        return _pydantic_v1_events(span)
    return None


def _pydantic_agent(span: Span) -> NormalizedSpan:
    normalized = base(span, "agent", "pydantic-ai")
    assert normalized.agent is not None
    attrs, where, warnings = span.attributes, span_label(span), normalized.warnings
    messages = parse_messages(attrs.get(A.PYDANTIC_ALL_MESSAGES), where, warnings)
    start = as_int(attrs.get(A.PYDANTIC_NEW_MESSAGE_INDEX)) or 0
    new = (messages or [])[start:]
    agent = normalized.agent
    agent.input_messages = messages
    agent.input = next((m.text for m in new if m.role == "user" and m.text is not None), None) or last_text(
        (messages or [])[:start], "user"
    )
    agent.output = _final_result(attrs.get(A.PYDANTIC_FINAL_RESULT), where, warnings)
    agent.usage = _aggregated_usage(attrs)
    agent.tool_schemas = tool_schemas(attrs.get(A.TOOL_DEFINITIONS))
    return normalized


def _final_result(value: Any, where: str, warnings: list[str]) -> str | None:
    if value is None or isinstance(value, str):
        return text_or_none(value, f"{where}: final_result", warnings)
    # Structured output (an output type other than str): keep it as JSON text.
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _pydantic_tool(span: Span) -> NormalizedSpan:
    normalized = base(span, "tool", "pydantic-ai")
    assert normalized.tool is not None
    attrs, where = span.attributes, span_label(span)
    tool = normalized.tool
    tool.name = as_str(attrs.get(A.TOOL_NAME)) or as_str(attrs.get("tool_name")) or tool.name
    args = read_arguments(attrs.get(A.PYDANTIC_TOOL_ARGUMENTS), f"{where}: tool {tool.name!r}")
    tool.arguments, tool.arguments_truncated = args.value, args.truncated
    if args.warning:
        normalized.warnings.append(args.warning)
    tool.result = read_content(attrs.get(A.PYDANTIC_TOOL_RESPONSE), f"{where}: result", normalized.warnings)
    return normalized


def _pydantic_v1_events(span: Span) -> NormalizedSpan:
    normalized = base(span, "llm", "pydantic-ai")
    assert normalized.llm is not None
    where, warnings = span_label(span), normalized.warnings
    inputs, outputs = [], []
    for body in json_list(span.attributes.get(A.PYDANTIC_EVENTS)) or []:
        if not isinstance(body, dict):
            continue
        name = body.get("event.name")
        if name == A.CHOICE_EVENT:
            outputs.append(event_message("assistant", body, where, warnings))
        elif name in A.EVENT_ROLES:
            inputs.append(event_message(A.EVENT_ROLES[name], body, where, warnings))
    normalized.llm.input_messages, normalized.llm.output_messages = inputs, outputs
    normalized.llm.tool_calls = tool_calls_of(outputs)
    return normalized
