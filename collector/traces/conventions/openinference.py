"""OpenInference spans: `openinference.span.kind` and flattened `llm.*`, `tool.*`, `input.*`, `output.*`.

Roles: `LLM` is a model call; `TOOL` a tool execution; `AGENT` an agent run, and `CHAIN` a wrapper,
except where the attributes show otherwise:

- a `CHAIN` with no parent span, or a LangGraph graph run (metadata `ls_integration: langgraph`
  without `langgraph_node`), is a workflow run: the outermost span of the agent;
- an `AGENT` with no agent name, input or output (the OpenAI-Agents bridge's per-trace wrapper
  above the real agent spans) is a wrapper: the agent span beneath it is the run;
- an `AGENT` that is a LangGraph node (metadata `langgraph_node` equal to its name) is a step of its
  graph, not an agent of its own: the LangChain instrumentation names the kind AGENT whenever the
  run name contains "agent", and `create_react_agent` names its model node `agent`.

Other kinds (RETRIEVER, EMBEDDING, RERANKER, GUARDRAIL, EVALUATOR, PROMPT) are `other`: the model
did not request them, so they are not tool calls (a retriever the model calls sits under a TOOL).

Quirks handled, all detected from attributes:

- The OpenAI-Agents bridge starts input messages at index 1, and leaves out tool-call arguments
  equal to `"{}"`; those are recovered from the JSON request or response it also stores in
  `input.value` / `output.value`, matched by call id.
- Its handoffs are TOOL spans named `handoff to <agent>` without `tool.name`; they are reported as
  the call of the SDK's default handoff tool `transfer_to_<agent>`, with the target as result.
- LangChain TOOL spans store the tool's `ToolMessage` as output; its content is the result, its
  `tool_call_id` the call id and its `status: error` an error.
- `__REDACTED__` (the `OPENINFERENCE_HIDE_*` marker) is content not captured, never text.
"""

from __future__ import annotations

import re
from typing import Any

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._flatten import as_list, content, dig, dropped_warning, nest_list, text
from evaltrace.collector.traces._lenient_json import json_object, parse_json
from evaltrace.collector.traces._normalized import AgentRun, LlmCall, NormalizedSpan, ToolExec
from evaltrace.collector.traces._spanutil import as_int, span_error
from evaltrace.collector.traces.conventions.envelopes import prompt_in
from evaltrace.collector.traces.conventions.openinference_messages import (
    ArgumentLookup,
    messages_from_response_json,
    parse_messages,
    tool_calls_of,
)
from evaltrace.collector.traces.conventions.payload import (
    arguments_value,
    input_text,
    last_text,
    message_role_and_text,
    output_text,
    tool_schema,
)
from evaltrace.collector.traces.records import Message, MessagePart, ToolSchema, Usage

CONVENTION = "openinference"
_KIND = "openinference.span.kind"
_JSON_MIME = "application/json"
_HANDOFF_PREFIX = "handoff to "


def extract(span: Span) -> NormalizedSpan | None:
    """The span's meaning when it is an OpenInference span, else `None`.

    Args:
        span: A recorded span.

    Returns:
        The normalized span, or `None` when `openinference.span.kind` is absent.
    """
    kind = span.attributes.get(_KIND)
    if not isinstance(kind, str) or not kind:
        return None
    kind = kind.upper()
    attrs = span.attributes
    normalized = NormalizedSpan(
        span=span,
        role="other",
        convention=CONVENTION,
        conversation_id=text(attrs.get("session.id")),
        error=span_error(span),
        warnings=dropped_warning(span),
    )
    if kind == "LLM":
        normalized.role = "llm"
        normalized.llm = _llm_call(attrs, normalized.warnings)
    elif kind == "TOOL":
        normalized.role = "tool"
        normalized.tool = _tool_exec(span, normalized.warnings)
        # A LangChain tool that handled its own error reports it only in its ToolMessage.
        normalized.error = normalized.error or normalized.tool.error
    elif kind in ("AGENT", "CHAIN"):
        if _is_agent_run(span, kind):
            normalized.role = "agent"
            normalized.agent = _agent_run(span, normalized.warnings)
        else:
            normalized.role = "chain"
    return normalized


def _is_agent_run(span: Span, kind: str) -> bool:
    metadata = json_object(span.attributes.get("metadata")) or {}
    node = metadata.get("langgraph_node")
    if kind == "AGENT":
        return (node is None or node != span.name) and not _is_bare_wrapper(span.attributes)
    if span.parent_span_id is None:
        return True
    return metadata.get("ls_integration") == "langgraph" and node is None


def _is_bare_wrapper(attrs: dict[str, Any]) -> bool:
    """An AGENT span that says nothing of its own: no agent name, no input, no output.

    The OpenAI-Agents bridge opens one such span per SDK trace (named after the workflow) above the
    real agent spans; taken as an agent it would turn the real agent into a nested child run.
    """
    return not any(key in attrs for key in ("agent.name", "input.value", "output.value"))


# --- LLM ---------------------------------------------------------------------------------------


def _llm_call(attrs: dict[str, Any], warnings: list[str]) -> LlmCall:
    inputs = nest_list(attrs, "llm.input_messages")
    outputs = nest_list(attrs, "llm.output_messages")
    input_messages: list[Message] | None = None
    output_messages: list[Message] | None
    if inputs is not None:
        input_messages = parse_messages(inputs, ArgumentLookup(attrs.get("input.value")), warnings)
    if outputs is not None:
        output_messages = parse_messages(outputs, ArgumentLookup(attrs.get("output.value")), warnings)
    else:
        output_messages = _plain_output(attrs, warnings)
    finish = text(attrs.get("llm.finish_reason"))
    return LlmCall(
        model=_model(attrs),
        provider=text(attrs.get("llm.provider")) or text(attrs.get("llm.system")),
        input_messages=input_messages,
        output_messages=output_messages,
        tool_calls=tool_calls_of(output_messages or []),
        usage=usage_of(attrs),
        finish_reasons=[finish] if finish else [],
        tool_schemas=_tool_schemas(attrs),
    )


def _model(attrs: dict[str, Any]) -> str | None:
    for key in ("llm.model_name", "llm.response.model_name", "llm.request.model_name"):
        found = text(attrs.get(key))
        if found:
            return found
    return None


def _plain_output(attrs: dict[str, Any], warnings: list[str]) -> list[Message] | None:
    """A reply stored only as `output.value` (no flattened output messages): text, or response JSON."""
    reply = text(attrs.get("output.value"))
    if reply is None:
        return None
    if attrs.get("output.mime_type") == _JSON_MIME:
        outcome = parse_json(reply)
        return messages_from_response_json(outcome.value, warnings) if outcome.parsed else None
    return [Message(role="assistant", parts=[MessagePart(type="text", text=reply)])]


def usage_of(attrs: dict[str, Any]) -> Usage:
    """Token counts of `llm.token_count.*`; the detail counts are subsets, kept apart, never added."""
    return Usage(
        input_tokens=as_int(attrs.get("llm.token_count.prompt")),
        output_tokens=as_int(attrs.get("llm.token_count.completion")),
        cache_read_tokens=as_int(attrs.get("llm.token_count.prompt_details.cache_read")),
        reasoning_tokens=as_int(attrs.get("llm.token_count.completion_details.reasoning")),
    )


def _tool_schemas(attrs: dict[str, Any]) -> list[ToolSchema]:
    tools = nest_list(attrs, "llm.tools")
    definitions: list[Any] = []
    for item in tools or []:
        parsed = json_object(dig(item, "tool", "json_schema"))
        definitions.append(parsed if parsed is not None else dig(item, "tool"))
    if tools is None:
        definitions = as_list((json_object(attrs.get("llm.invocation_parameters")) or {}).get("tools"))
    schemas = [tool_schema(d) for d in definitions]
    return [s for s in schemas if s is not None]


# --- TOOL --------------------------------------------------------------------------------------


def _tool_exec(span: Span, warnings: list[str]) -> ToolExec:
    attrs = span.attributes
    name = text(attrs.get("tool.name"))
    if name is None and span.name.startswith(_HANDOFF_PREFIX):
        return _handoff(span)
    arguments, truncated = _tool_arguments(attrs)
    if truncated:
        warnings.append(f"tool span {span.span_id} ({span.name}): arguments cut short; kept as raw text")
    result, result_call_id, result_error = _tool_result(attrs)
    call_id = text(attrs.get("tool.id")) or text(attrs.get("tool_call.id")) or result_call_id
    return ToolExec(
        name=name or span.name,
        call_id=call_id,
        arguments=arguments,
        arguments_truncated=truncated,
        result=result,
        error=span_error(span) or result_error,
        description=text(attrs.get("tool.description")),
    )


def _handoff(span: Span) -> ToolExec:
    target = text(span.attributes.get("output.value")) or span.name[len(_HANDOFF_PREFIX) :]
    # The SDK's default handoff tool name (`Handoff.default_tool_name`): what the model called.
    tool_name = re.sub(r"[^a-zA-Z0-9_]", "_", re.sub(r"\s", "_", f"transfer_to_{target}")).lower()
    return ToolExec(name=tool_name, result=target, error=span_error(span), description=span.name)


def _tool_arguments(attrs: dict[str, Any]) -> tuple[Any, bool]:
    raw = content(attrs.get("input.value"))
    if not isinstance(raw, str) or attrs.get("input.mime_type") == "text/plain":
        return raw, False
    return arguments_value(raw)


def _tool_result(attrs: dict[str, Any]) -> tuple[Any, str | None, str | None]:
    """`(result, call id, error)` from `output.value`, unwrapping a LangChain ToolMessage."""
    raw = content(attrs.get("output.value"))
    if not isinstance(raw, str):
        return raw, None, None
    outcome = parse_json(raw)
    if not outcome.parsed:
        return raw, None, None
    message = _tool_message(outcome.value)
    if message is None:
        return (outcome.value if attrs.get("output.mime_type") == _JSON_MIME else raw), None, None
    _, result = message_role_and_text(outcome.value)
    if result is None:
        result = content(message.get("content"))
    error = result if message.get("status") == "error" else None
    return result, text(message.get("tool_call_id")), error


def _tool_message(value: Any) -> dict[str, Any] | None:
    """The fields of a serialised LangChain ToolMessage, or `None` for any other value."""
    if not isinstance(value, dict):
        return None
    role, _ = message_role_and_text(value)
    if role != "tool":
        return None
    fields = value.get("data") if isinstance(value.get("data"), dict) else value.get("kwargs")
    return fields if isinstance(fields, dict) and "tool_call_id" in fields else None


# --- AGENT / workflow --------------------------------------------------------------------------


def _agent_run(span: Span, warnings: list[str]) -> AgentRun:
    attrs = span.attributes
    inputs = nest_list(attrs, "llm.input_messages")
    input_messages = parse_messages(inputs, ArgumentLookup(None), warnings) if inputs is not None else None
    user_text = input_text(attrs.get("input.value"))
    if user_text is None and input_messages:
        user_text = last_text([(m.role, m.text) for m in input_messages], "user")
    if user_text is None:
        user_text = prompt_in(attrs)  # a framework's own place for it (CrewAI's `crew_tasks`)
    usage = usage_of(attrs)
    return AgentRun(
        name=text(attrs.get("agent.name")) or span.name,
        input=user_text,
        output=output_text(attrs.get("output.value")) if attrs.get("output.value") is not None else None,
        input_messages=input_messages,
        usage=usage if usage != Usage() else None,
    )
