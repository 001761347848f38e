"""OpenLLMetry (traceloop) spans: the `traceloop.*` workflow layer and flattened `gen_ai.prompt.<i>.*` LLM spans.

Workflow layer (traceloop-sdk decorators): `traceloop.span.kind` is `workflow` or `agent` (an agent
run: a Trace root candidate), `task` (a step), or `tool` (a tool execution). The span is named
`<entity>.<kind>`; `traceloop.entity.input` is the JSON of the call, `{"args": [...], "kwargs": {...}}`,
and `traceloop.entity.output` the JSON of the return value. `@tool` spans carry no call id, so they
are matched by name and order. traceloop drops entity values of a million characters or more and
cuts them at `OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT` (which may leave invalid JSON: kept raw, flagged).

LLM spans (the flattened form most deployed versions write): `llm.request.type` (`chat`,
`completion`; `embedding`/`rerank` are not model turns), `gen_ai.prompt.<i>.{role, content,
tool_call_id, tool_calls.<j>.{id, name, arguments}}`, `gen_ai.completion.<i>.{role, content,
finish_reason, tool_calls.<j>.*}` (`<i>` is the provider's choice index), tools offered in
`llm.request.functions.<i>.*` (or `gen_ai.tool.definitions`), usage under the old
`prompt_tokens`/`completion_tokens` or the newer `input_tokens`/`output_tokens` names.

Newer OpenLLMetry versions write the GenAI JSON messages (`gen_ai.input.messages`) instead: a span
with those and no flattened prompt is left to the GenAI extractor (this returns `None`).

`traceloop.association.properties.<key>` are the app's own keys; the ones that name a conversation
(`session_id`, `conversation_id`, `thread_id`, `chat_id`) give the conversation id.
"""

from __future__ import annotations

import re
from typing import Any

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._flatten import as_list, content, dropped_warning, nest_list, text
from evaltrace.collector.traces._lenient_json import json_list, parse_json
from evaltrace.collector.traces._normalized import AgentRun, LlmCall, NormalizedSpan, ToolExec
from evaltrace.collector.traces._spanutil import as_int, first_attr, keys_may_contain, span_error
from evaltrace.collector.traces.conventions.openinference_messages import tool_calls_of
from evaltrace.collector.traces.conventions.payload import (
    arguments_value,
    content_text,
    input_text,
    normalize_role,
    output_text,
    tool_schema,
)
from evaltrace.collector.traces.records import Message, MessagePart, ToolSchema, Usage

CONVENTION = "openllmetry"
_SPAN_KIND = "traceloop.span.kind"
_ENTITY_INPUT = "traceloop.entity.input"
_ENTITY_OUTPUT = "traceloop.entity.output"
_ASSOCIATION = "traceloop.association.properties."
_CONVERSATION_KEYS = ("session_id", "conversation_id", "thread_id", "chat_id", "sessionId", "conversationId")
_MODEL_TURNS = ("chat", "completion")
_INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens")
_OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.usage.completion_tokens")
_CACHE_READ = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
_REASONING = ("gen_ai.usage.reasoning.output_tokens", "llm.usage.reasoning_tokens", "gen_ai.usage.reasoning_tokens")


def extract(span: Span) -> NormalizedSpan | None:
    """The span's meaning when it is an OpenLLMetry span, else `None`.

    Args:
        span: A recorded span.

    Returns:
        The normalized span, or `None` when the span has neither `traceloop.span.kind` nor a
        flattened OpenLLMetry LLM request.
    """
    attrs = span.attributes
    kind = attrs.get(_SPAN_KIND)
    if not isinstance(kind, str) and not _is_llm_span(attrs):
        return None
    normalized = NormalizedSpan(
        span=span,
        role="other",
        convention=CONVENTION,
        conversation_id=_conversation_id(attrs),
        error=span_error(span),
        warnings=dropped_warning(span),
    )
    if isinstance(kind, str):
        _workflow_layer(normalized, kind.lower())
    elif attrs.get("llm.request.type") in (None, *_MODEL_TURNS):
        normalized.role = "llm"
        normalized.llm = _llm_call(attrs, normalized.warnings)
    return normalized


# Every span of every convention passes through here: one C-level regex match per key is much
# cheaper than a Python generator calling `startswith` per key.
_FLATTENED_KEY = re.compile(r"gen_ai\.(?:prompt|completion)\.").match


def _is_llm_span(attrs: dict[str, Any]) -> bool:
    if keys_may_contain(attrs, "gen_ai.prompt.", "gen_ai.completion.") and any(map(_FLATTENED_KEY, attrs)):
        return True
    new_shape = "gen_ai.input.messages" in attrs or "gen_ai.output.messages" in attrs
    return "llm.request.type" in attrs and not new_shape


def _conversation_id(attrs: dict[str, Any]) -> str | None:
    for key in _CONVERSATION_KEYS:
        value = attrs.get(_ASSOCIATION + key)
        if value is not None and not isinstance(value, (list, dict)):
            return str(value)
    return None


def _workflow_layer(normalized: NormalizedSpan, kind: str) -> None:
    span = normalized.span
    attrs = span.attributes
    name = text(attrs.get("traceloop.entity.name")) or span.name.removesuffix(f".{kind}")
    if kind in ("workflow", "agent"):
        normalized.role = "agent"
        output = attrs.get(_ENTITY_OUTPUT)
        normalized.agent = AgentRun(
            name=name,
            input=input_text(attrs.get(_ENTITY_INPUT)),
            output=output_text(output) if output is not None else None,
        )
    elif kind == "tool":
        normalized.role = "tool"
        normalized.tool = _tool_exec(name, span, normalized.warnings)
    else:
        normalized.role = "chain"


# --- tool --------------------------------------------------------------------------------------


def _tool_exec(name: str, span: Span, warnings: list[str]) -> ToolExec:
    attrs = span.attributes
    arguments, truncated = _call_arguments(attrs.get(_ENTITY_INPUT))
    if truncated:
        warnings.append(f"tool span {span.span_id} ({span.name}): input cut short; kept as raw text")
    return ToolExec(
        name=name,
        arguments=arguments,
        arguments_truncated=truncated,
        result=_entity_output(attrs.get(_ENTITY_OUTPUT), span, warnings),
        error=span_error(span),
    )


def _call_arguments(raw: Any) -> tuple[Any, bool]:
    """The tool's arguments from traceloop's `{"args": [...], "kwargs": {...}}` record.

    The keyword arguments, or the single dict passed positionally; the whole record when
    positional values cannot be named.
    """
    value, truncated = arguments_value(raw)
    if truncated or not isinstance(value, dict) or set(value) != {"args", "kwargs"}:
        return value, truncated
    args, kwargs = value["args"], value["kwargs"]
    if not args and isinstance(kwargs, dict):
        return kwargs, False
    if isinstance(args, list) and len(args) == 1 and isinstance(args[0], dict) and not kwargs:
        return args[0], False
    return value, False


def _entity_output(raw: Any, span: Span, warnings: list[str]) -> Any:
    value = content(raw)
    if not isinstance(value, str):
        return value
    outcome = parse_json(value)
    if outcome.truncated:
        warnings.append(f"tool span {span.span_id} ({span.name}): output cut short; kept as raw text")
    return outcome.value


# --- LLM ---------------------------------------------------------------------------------------


def _llm_call(attrs: dict[str, Any], warnings: list[str]) -> LlmCall:
    prompts = nest_list(attrs, "gen_ai.prompt")
    completions = nest_list(attrs, "gen_ai.completion")
    input_messages = _messages(prompts, warnings) if prompts is not None else None
    output_messages = _messages(completions, warnings) if completions is not None else None
    finish = [f for f in (text(c.get("finish_reason")) for c in completions or [] if isinstance(c, dict)) if f]
    if not finish and text(attrs.get("llm.response.finish_reason")):
        finish = [str(attrs["llm.response.finish_reason"])]
    return LlmCall(
        model=text(attrs.get("gen_ai.response.model")) or text(attrs.get("gen_ai.request.model")),
        provider=text(attrs.get("gen_ai.system")) or text(attrs.get("gen_ai.provider.name")),
        input_messages=input_messages,
        output_messages=output_messages,
        tool_calls=tool_calls_of(output_messages or []),
        usage=Usage(
            input_tokens=as_int(first_attr(attrs, _INPUT_TOKENS)),
            output_tokens=as_int(first_attr(attrs, _OUTPUT_TOKENS)),
            cache_read_tokens=as_int(first_attr(attrs, _CACHE_READ)),
            reasoning_tokens=as_int(first_attr(attrs, _REASONING)),
        ),
        finish_reasons=finish,
        tool_schemas=_tool_schemas(attrs),
        response_id=text(attrs.get("gen_ai.response.id")),
    )


def _messages(items: list[Any], warnings: list[str]) -> list[Message]:
    messages = [_message(item, warnings) for item in items if isinstance(item, dict)]
    return [m for m in messages if m is not None]


def _message(fields: dict[str, Any], warnings: list[str]) -> Message | None:
    calls = [_call_part(c, warnings) for c in as_list(fields.get("tool_calls"))]
    legacy = fields.get("function_call")
    if isinstance(legacy, dict):
        calls.append(_call_part(legacy, warnings))
    parts = [p for p in calls if p is not None]
    role = normalize_role(fields.get("role")) or ("assistant" if parts else "user")
    body = _body_text(fields.get("content"))
    if role == "tool":
        result = MessagePart(type="tool_result", call_id=text(fields.get("tool_call_id")), result=content(body))
        return Message(role=role, parts=[result])
    if body is not None:
        parts.insert(0, MessagePart(type="text", text=body))
    return Message(role=role, parts=parts)


def _body_text(value: Any) -> str | None:
    """Message content: text, or the text blocks of a multimodal list traceloop stored as JSON."""
    raw = text(value)
    if raw is not None and raw.lstrip().startswith("["):
        blocks = json_list(raw)
        if blocks is not None:
            return content_text(blocks)
    return raw


def _call_part(fields: Any, warnings: list[str]) -> MessagePart | None:
    if not isinstance(fields, dict):
        return None
    name, call_id = text(fields.get("name")), text(fields.get("id"))
    if name is None and call_id is None:
        return None
    arguments, truncated = arguments_value(fields.get("arguments"))
    if truncated:
        warnings.append(f"tool call {call_id or name}: arguments cut short; kept as raw text")
    return MessagePart(type="tool_call", call_id=call_id, name=name, arguments=arguments)


def _tool_schemas(attrs: dict[str, Any]) -> list[ToolSchema]:
    definitions = nest_list(attrs, "llm.request.functions") or nest_list(attrs, "gen_ai.tool.definitions")
    if definitions is None:
        definitions = json_list(attrs.get("gen_ai.tool.definitions")) or []
    schemas = [tool_schema(d) for d in definitions]
    return [s for s in schemas if s is not None]
