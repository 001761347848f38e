"""Google ADK's own content attributes (`gcp.vertex.agent.*`): its legacy telemetry schema.

ADK 1.x, and ADK 2.x with `ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`, keep the GenAI structure
(`invoke_agent`, `execute_tool`, a `call_llm` model span with `gen_ai.system` and
`gen_ai.request.model`) but put the content in vendor attributes instead of the GenAI ones:

- model span: `gcp.vertex.agent.llm_request`, the request as JSON (`contents`, Gemini-style
  messages `{role: user|model, parts: [{text} | {function_call: {id, name, args}} |
  {function_response: {id, name, response}}]}`, and `config` with the system instruction and the
  tool declarations); `gcp.vertex.agent.llm_response`, the reply (`content` in the same shape);
- tool span: `gcp.vertex.agent.tool_call_args` and `gcp.vertex.agent.tool_response` as JSON.

With ADK's content switch off (`ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=false`) each is `{}`, which
records nothing. ADK 2.x's default schema writes the GenAI attributes and events instead, read by
`conventions/genai`. Tried after the GenAI extractors and before the bare structure.
"""

from __future__ import annotations

from typing import Any, Final

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._genai_messages import normalise_role, tool_calls_of
from evaltrace.collector.traces._lenient_json import json_list, json_object
from evaltrace.collector.traces._normalized import NormalizedSpan
from evaltrace.collector.traces._spanutil import read_arguments, read_content, span_label
from evaltrace.collector.traces.conventions.structure import base, genai_role
from evaltrace.collector.traces.records import Message, MessagePart, ToolSchema

CONVENTION = "adk"
LLM_REQUEST: Final = "gcp.vertex.agent.llm_request"
LLM_RESPONSE: Final = "gcp.vertex.agent.llm_response"
TOOL_CALL_ARGS: Final = "gcp.vertex.agent.tool_call_args"
TOOL_RESPONSE: Final = "gcp.vertex.agent.tool_response"
_KEYS: Final = (LLM_REQUEST, LLM_RESPONSE, TOOL_CALL_ARGS, TOOL_RESPONSE)
_NOT_RECORDED: Final = frozenset({"{}", "N/A", ""})
"""What ADK writes in these attributes when it records no content (`{}`) or none applies (`N/A`)."""


def extract(span: Span) -> NormalizedSpan | None:
    """ADK's legacy content attributes on a GenAI-structured span, or `None` when it has none."""
    attrs = span.attributes
    if not any(key in attrs for key in _KEYS):
        return None
    role = genai_role(span)
    if role is None:
        return None
    normalized = base(span, role, CONVENTION)
    where, warnings = span_label(span), normalized.warnings
    if normalized.llm is not None:
        llm = normalized.llm
        request = _recorded_object(attrs.get(LLM_REQUEST))
        response = _recorded_object(attrs.get(LLM_RESPONSE))
        if request is not None:
            llm.input_messages = _request_messages(request)
            llm.tool_schemas = _tool_schemas(request)
        reply = _message(response.get("content")) if response is not None else None
        if reply is not None:
            llm.output_messages = [reply]
            llm.tool_calls = tool_calls_of(llm.output_messages)
    elif normalized.tool is not None:
        tool = normalized.tool
        raw_args = attrs.get(TOOL_CALL_ARGS)
        if raw_args is not None and raw_args != "N/A":
            args = read_arguments(raw_args, f"{where}: tool {tool.name!r}")
            tool.arguments, tool.arguments_truncated = args.value, args.truncated
            if args.warning:
                warnings.append(args.warning)
        raw_result = attrs.get(TOOL_RESPONSE)
        if raw_result is not None and raw_result not in _NOT_RECORDED:
            tool.result = read_content(raw_result, f"{where}: result", warnings)
    return normalized


def _recorded_object(value: Any) -> dict[str, Any] | None:
    if value is None or (isinstance(value, str) and value.strip() in _NOT_RECORDED):
        return None
    found = json_object(value)
    return found or None


def _request_messages(request: dict[str, Any]) -> list[Message]:
    config = request.get("config")
    instruction = config.get("system_instruction") if isinstance(config, dict) else None
    found: list[Message] = []
    system = instruction if isinstance(instruction, str) else None
    if isinstance(instruction, dict):  # a Content of its own
        system = "\n".join(p["text"] for p in instruction.get("parts") or [] if isinstance(p, dict) and p.get("text"))
    if system:
        found.append(Message(role="system", parts=[MessagePart(type="text", text=system)]))
    for content in json_list(request.get("contents")) or []:
        message = _message(content)
        if message is not None:
            found.append(message)
    return found


def _message(content: Any) -> Message | None:
    """One Gemini-style `{role, parts}` content as a `Message` (`model` is the assistant)."""
    if not isinstance(content, dict):
        return None
    parts = [part for raw in content.get("parts") or [] if (part := _part(raw)) is not None]
    return Message(role=normalise_role(content.get("role") or "assistant"), parts=parts)


def _part(raw: Any) -> MessagePart | None:
    if not isinstance(raw, dict):
        return None
    call, response = raw.get("function_call"), raw.get("function_response")
    if isinstance(call, dict):
        return MessagePart(type="tool_call", call_id=call.get("id"), name=call.get("name"), arguments=call.get("args"))
    if isinstance(response, dict):
        return MessagePart(
            type="tool_result", call_id=response.get("id"), name=response.get("name"), result=response.get("response")
        )
    if isinstance(raw.get("text"), str):
        return MessagePart(type="text", text=raw["text"])
    return None  # thoughts' signatures, inline data, code execution: nothing the trace records


def _tool_schemas(request: dict[str, Any]) -> list[ToolSchema]:
    config = request.get("config")
    tools = config.get("tools") if isinstance(config, dict) else None
    schemas = []
    for tool in tools if isinstance(tools, list) else []:
        declarations = tool.get("function_declarations") if isinstance(tool, dict) else None
        for declaration in declarations if isinstance(declarations, list) else []:
            if not isinstance(declaration, dict) or not isinstance(declaration.get("name"), str):
                continue
            params = declaration.get("parameters_json_schema", declaration.get("parameters"))
            description = declaration.get("description")
            schemas.append(
                ToolSchema(
                    name=declaration["name"],
                    description=description if isinstance(description, str) else None,
                    parameters=params if isinstance(params, dict) else None,
                )
            )
    return schemas
