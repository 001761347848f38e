"""OpenInference chat messages, re-nested from `llm.{input,output}_messages.<i>.message.*`.

One item is `{"message": {role, content, contents: [{message_content: {type, text, ...}}],
tool_call_id, name, tool_calls: [{tool_call: {id, function: {name, arguments}}}],
function_call_name, function_call_arguments_json}}`. A message with `contents` keeps those parts
(the flat `content` some emitters add is their join, so it is not added again). A `tool` message
is one `tool_result` part linked by `tool_call_id`.
"""

from __future__ import annotations

from typing import Any

from evaltrace.collector.traces._flatten import as_list, content, dig, text
from evaltrace.collector.traces._lenient_json import parse_json
from evaltrace.collector.traces._provider import block_error, unwrap_blocks
from evaltrace.collector.traces.conventions.payload import arguments_value, normalize_role
from evaltrace.collector.traces.records import Message, MessagePart, ToolCall


class ArgumentLookup:
    """Tool-call arguments and tool-result errors by call id, read from a raw request or response JSON on demand.

    The OpenAI-Agents bridge drops arguments equal to `"{}"` from the flattened tool calls but keeps
    the whole request in `input.value` and the response in `output.value`. The flattened messages
    have no field for a provider's failed tool result (Anthropic's `tool_result` block with
    `is_error: true`), which the raw request keeps. Parsing those (large) values happens only when
    a call actually lacks its arguments, or a tool result is read.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._found: dict[str, Any] | None = None
        self._errors: dict[str, str] = {}
        self._marks: bool | None = None  # whether the raw request names `is_error` at all (looked up once)

    def _read(self) -> dict[str, Any]:
        if self._found is None:
            self._found = {}
            outcome = parse_json(content(self._raw))
            if outcome.parsed:
                _collect_arguments(outcome.value, self._found, self._errors)
        return self._found

    def get(self, call_id: str | None) -> Any:
        """The arguments recorded for `call_id` (raw text, or an object), or `None`."""
        if call_id is None or self._raw is None:
            return None
        return self._read().get(call_id)

    def error(self, call_id: str | None) -> str | None:
        """The error of the tool result for `call_id` that the raw request marks failed (`is_error`), or `None`."""
        if self._marks is None:  # one scan of the (large) request per span, not one per tool result in it
            self._marks = isinstance(self._raw, str) and "is_error" in self._raw
        if call_id is None or not self._marks:
            return None  # the common case (no failed result in the request) parses nothing
        self._read()
        return self._errors.get(call_id)


def _collect_arguments(node: Any, found: dict[str, Any], errors: dict[str, str]) -> None:
    if isinstance(node, list):
        for item in node:
            _collect_arguments(item, found, errors)
        return
    if not isinstance(node, dict):
        return
    call_id = node.get("call_id") or node.get("id")
    if isinstance(call_id, str):
        arguments = _arguments_field(node)
        if arguments is not None:
            found.setdefault(call_id, arguments)
    result_of = node.get("tool_use_id")
    if node.get("type") == "tool_result" and isinstance(result_of, str):
        error = block_error(node, unwrap_blocks(node.get("content")))
        if error is not None:
            errors.setdefault(result_of, error)
    for value in node.values():
        if isinstance(value, (dict, list)):
            _collect_arguments(value, found, errors)


def _arguments_field(node: dict[str, Any]) -> Any:
    """Arguments of one recorded call, or `None`.

    Shapes: OpenAI chat / Responses (`arguments` text), LangChain (`args`), Anthropic (`tool_use` `input`).
    """
    function = node.get("function")
    if isinstance(function, dict) and isinstance(function.get("arguments"), str):
        return function["arguments"]
    if isinstance(node.get("arguments"), str):
        return node["arguments"]
    if node.get("type") == "tool_call" and isinstance(node.get("args"), dict):
        return node["args"]
    if node.get("type") == "tool_use" and isinstance(node.get("input"), dict):
        return node["input"]
    return None


def parse_messages(items: list[Any], lookup: ArgumentLookup, warnings: list[str]) -> list[Message]:
    """The messages of a re-nested `llm.*_messages` list, in index order (gaps skipped)."""
    messages = [_message(item, lookup, warnings) for item in items]
    return [m for m in messages if m is not None]


def _message(item: Any, lookup: ArgumentLookup, warnings: list[str]) -> Message | None:
    fields = dig(item, "message")
    if not isinstance(fields, dict):
        return None
    calls = [_tool_call_part(dig(tc, "tool_call"), lookup, warnings) for tc in as_list(fields.get("tool_calls"))]
    calls += _legacy_function_call(fields, warnings)
    parts = [p for p in calls if p is not None]
    role = normalize_role(fields.get("role")) or ("assistant" if parts else "user")
    content_parts = [_content_part(c, lookup, warnings) for c in as_list(fields.get("contents"))]
    body = [p for p in content_parts if p is not None]
    if role == "tool":
        result = content(fields.get("content"))
        if result is None:
            result = "\n".join(p.text for p in body if p.type == "text" and p.text is not None) or None
        call_id = text(fields.get("tool_call_id"))
        tool_result = MessagePart(
            type="tool_result",
            call_id=call_id,
            name=text(fields.get("name")),
            result=result,
            error=lookup.error(call_id),
        )
        return Message(role=role, parts=[tool_result])
    if not body and text(fields.get("content")) is not None:
        body = [MessagePart(type="text", text=text(fields.get("content")))]
    return Message(role=role, parts=body + parts, name=text(fields.get("name")))


def _content_part(item: Any, lookup: ArgumentLookup, warnings: list[str]) -> MessagePart | None:
    if isinstance(dig(item, "tool_call"), dict):
        return _tool_call_part(dig(item, "tool_call"), lookup, warnings)
    fields = dig(item, "message_content")
    if not isinstance(fields, dict):
        return None
    kind = fields.get("type")
    body = text(fields.get("text"))
    if kind in (None, "text"):
        return MessagePart(type="text", text=body) if body is not None else None
    if kind == "image":
        return MessagePart(type="other", text=text(dig(fields, "image", "image", "url")))
    # Reasoning, audio, video: kept, but never as answer text.
    return MessagePart(type="other", text=body)


def _tool_call_part(fields: Any, lookup: ArgumentLookup, warnings: list[str]) -> MessagePart | None:
    if not isinstance(fields, dict):
        return None
    name = text(dig(fields, "function", "name"))
    call_id = text(fields.get("id"))
    raw = dig(fields, "function", "arguments")
    if raw is None:
        raw = lookup.get(call_id)
    return _call(call_id, name, raw, warnings)


def _legacy_function_call(fields: dict[str, Any], warnings: list[str]) -> list[MessagePart | None]:
    name = text(fields.get("function_call_name"))
    if name is None:
        return []
    return [_call(None, name, fields.get("function_call_arguments_json"), warnings)]


def _call(call_id: str | None, name: str | None, raw: Any, warnings: list[str]) -> MessagePart | None:
    if name is None and call_id is None:
        return None
    arguments, truncated = arguments_value(raw)
    if truncated:
        warnings.append(f"tool call {call_id or name}: arguments cut short; kept as raw text")
    return MessagePart(type="tool_call", call_id=call_id, name=name, arguments=arguments)


def tool_calls_of(messages: list[Message]) -> list[ToolCall]:
    """The tool calls requested in a reply, in order, with a truncation flag where the JSON was cut."""
    calls: list[ToolCall] = []
    for message in messages:
        for part in message.parts:
            if part.type != "tool_call":
                continue
            truncated = isinstance(part.arguments, str) and arguments_value(part.arguments)[1]
            calls.append(
                ToolCall(
                    call_id=part.call_id, name=part.name or "", arguments=part.arguments, arguments_truncated=truncated
                )
            )
    return calls


def messages_from_response_json(value: Any, warnings: list[str]) -> list[Message] | None:
    """Reply messages rebuilt from a raw response JSON, for LLM spans without flattened output messages.

    The OpenAI-Agents bridge stores a streamed chat-completions reply only as `output.value`: a
    list of Responses-API `Response` objects. Also read: one `Response`, a chat completion
    (`choices[].message`), and a list of chat messages. Anything else gives `None`.
    """
    messages: list[Message] = []
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, dict):
            return None
        if isinstance(item.get("output"), list):
            messages += _response_items(item["output"], warnings)
        elif isinstance(item.get("choices"), list):
            chat = [c.get("message") for c in item["choices"] if isinstance(c, dict)]
            messages += [m for m in (_chat_message(c, warnings) for c in chat) if m is not None]
        else:
            message = _chat_message(item, warnings)
            if message is None:
                return None
            messages.append(message)
    return messages


def _response_items(items: list[Any], warnings: list[str]) -> list[Message]:
    """Responses-API output items: text messages, and function calls joined into one assistant message."""
    messages: list[Message] = []
    calls: list[MessagePart] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            part = _call(text(item.get("call_id")), text(item.get("name")), item.get("arguments"), warnings)
            calls += [part] if part is not None else []
        elif item.get("type") == "message":
            texts = [text(c.get("text")) for c in as_list(item.get("content")) if isinstance(c, dict)]
            parts = [MessagePart(type="text", text=t) for t in texts if t is not None]
            messages.append(Message(role=normalize_role(item.get("role")) or "assistant", parts=parts))
    if calls:
        messages.append(Message(role="assistant", parts=calls))
    return messages


def _chat_message(fields: Any, warnings: list[str]) -> Message | None:
    if not isinstance(fields, dict) or not isinstance(fields.get("role"), str):
        return None
    parts: list[MessagePart] = []
    body = text(fields.get("content"))
    if body:
        parts.append(MessagePart(type="text", text=body))
    for call in as_list(fields.get("tool_calls")):
        name, arguments = text(dig(call, "function", "name")), dig(call, "function", "arguments")
        part = _call(text(dig(call, "id")), name, arguments, warnings)
        parts += [part] if part is not None else []
    return Message(role=normalize_role(fields["role"]) or "assistant", parts=parts)
