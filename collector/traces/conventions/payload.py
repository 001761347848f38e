"""The user's text and the final answer inside agent and workflow payloads.

Agent and workflow spans of the flattened conventions record their input and output as one
value (`input.value`, `traceloop.entity.input`): plain text, or JSON whose shape is the
framework's, not the convention's. The shapes recognised here are the ones real frameworks write:

- a chat-message list or a `{"messages": [...]}` state (LangGraph), where a message is
  `{"role", "content"}`, a `["user", "text"]` pair, a serialised LangChain message
  (`{"type": "human", "data": {"content"}}` or `{"lc": 1, "id": [..., "HumanMessage"], "kwargs": {...}}`),
  or a Responses-API input item (`{"role": "user", "content": [{"type": "input_text", "text"}]}`);
- a dict with one well-known text field (`input`, `task`, `query`, `output`, `final_output`, ...);
- traceloop's `{"args": [...], "kwargs": {...}}` call record.

Anything else yields `None` for the input (a JSON blob is not the user's message) and the raw text
for the output (a structured final result is still the answer).
"""

from __future__ import annotations

from typing import Any

from evaltrace.collector.traces._flatten import as_list, content, text
from evaltrace.collector.traces._lenient_json import json_object, parse_json, parse_json_deep
from evaltrace.collector.traces.conventions.envelopes import opaque_output, unwrap_answer
from evaltrace.collector.traces.records import ToolSchema

_ROLES = {
    "human": "user",
    "humanmessage": "user",
    "humanmessagechunk": "user",
    "ai": "assistant",
    "aimessage": "assistant",
    "aimessagechunk": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "system": "system",
    "systemmessage": "system",
    "developer": "system",
    "tool": "tool",
    "toolmessage": "tool",
    "function": "tool",
    "functionmessage": "tool",
}
# `inputs` / `outputs`: a LangChain callback's record of a chain run (OpenLLMetry's entity input and output).
_INPUT_KEYS = ("input", "inputs", "task", "query", "question", "prompt", "message", "user_input", "text", "content")
_OUTPUT_KEYS = ("output", "outputs", "final_output", "answer", "result", "response", "content", "text")


def normalize_role(role: Any) -> str | None:
    """`user`, `assistant`, `system` or `tool` for the synonyms frameworks use; other roles as given."""
    if not isinstance(role, str) or not role:
        return None
    lowered = role.lower()
    return _ROLES.get(lowered, lowered)


def message_role_and_text(message: Any) -> tuple[str | None, str | None]:
    """The role and text of one chat message in any of the recognised shapes."""
    if isinstance(message, (list, tuple)) and len(message) == 2 and isinstance(message[0], str):
        return normalize_role(message[0]), content_text(message[1])
    if not isinstance(message, dict):
        return None, None
    if message.get("lc") == 1 and isinstance(message.get("kwargs"), dict):
        ident = message.get("id")
        class_name = ident[-1] if isinstance(ident, list) and ident else None
        kwargs = message["kwargs"]
        return normalize_role(kwargs.get("type") or class_name), content_text(kwargs.get("content"))
    data = message.get("data")
    if isinstance(data, dict) and "content" in data:
        return normalize_role(message.get("type") or data.get("type")), content_text(data.get("content"))
    role = message.get("role") or message.get("type")
    return normalize_role(role), content_text(message.get("content"))


def content_text(value: Any) -> str | None:
    """Text of a message content: a string, or the text blocks of a content list joined by newlines."""
    if isinstance(value, str):
        return text(value)
    if not isinstance(value, list):
        return None
    texts: list[str] = []
    for block in value:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") in (None, "text", "input_text", "output_text"):
            block_text = block.get("text")
            if isinstance(block_text, str):
                texts.append(block_text)
    return "\n".join(texts) if texts else None


def last_text(messages: Any, role: str) -> str | None:
    """The text of the last message with `role` in a message list, or `None`."""
    if not isinstance(messages, list):
        return None
    for message in reversed(messages):
        found_role, found_text = message_role_and_text(message)
        if found_role == role and found_text is not None:
            return found_text
    return None


def input_text(value: Any) -> str | None:
    """The user's message text inside an agent or workflow input value, or `None`."""
    outcome = parse_json(text(value))
    if not outcome.parsed:
        return None if outcome.malformed else text(value)
    return _find_text(outcome.value, "user", _INPUT_KEYS)


def output_text(value: Any) -> str | None:
    """The final answer text inside an agent or workflow output value, or `None`."""
    raw = text(value)
    outcome = parse_json(raw)
    if not outcome.parsed:
        return None if raw is not None and opaque_output(raw) else raw  # a printed result object
    found = unwrap_answer(outcome.value)  # a framework's result object (CrewAI's CrewOutput)
    if found is None:
        found = _find_text(outcome.value, "assistant", _OUTPUT_KEYS)
    return found if found is not None else raw


def _find_text(data: Any, role: str, keys: tuple[str, ...]) -> str | None:
    if isinstance(data, str):
        return text(data)
    if isinstance(data, list):
        return last_text(data, role)
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("messages"), list):
        return last_text(data["messages"], role)
    if "args" in data and "kwargs" in data:
        return _call_text(data, role, keys)
    found_role, found_text = message_role_and_text(data)
    if found_role == role and found_text is not None:
        return found_text
    for key in keys:
        candidate = data.get(key)
        if isinstance(candidate, str):
            return text(candidate)
        if isinstance(candidate, (list, dict)):
            nested = _find_text(candidate, role, keys)
            if nested is not None:
                return nested
    return None


def _call_text(call: dict[str, Any], role: str, keys: tuple[str, ...]) -> str | None:
    """A traceloop `{"args": [...], "kwargs": {...}}`: a well-known kwarg, else the first text argument."""
    kwargs = call.get("kwargs")
    if isinstance(kwargs, dict) and kwargs:
        found = _find_text(kwargs, role, keys)
        if found is not None:
            return found
        strings = [v for v in kwargs.values() if isinstance(v, str)]
        if len(strings) == 1:
            return text(strings[0])
    for arg in as_list(call.get("args")):
        found = _find_text(arg, role, keys)
        if found is not None:
            return found
    return None


def arguments_value(raw: Any) -> tuple[Any, bool]:
    """Tool-call arguments as recorded: `(parsed JSON object or raw value, truncated?)`.

    Arguments are JSON text by convention, but a model may send non-JSON, and a length limit may
    cut the text; both keep the raw text, the second flagged as truncated. Double-encoded JSON
    (a JSON string holding the object) is unwrapped.
    """
    value = content(raw)
    if value is None or not isinstance(value, str):
        return value, False
    outcome = parse_json_deep(value)
    if outcome.parsed:
        return outcome.value, False
    return value, outcome.truncated


def tool_schema(definition: Any) -> ToolSchema | None:
    """A `ToolSchema` from one tool definition, or `None` when it names no tool.

    Accepts the OpenAI chat shape (`{"type": "function", "function": {...}}`), the Responses shape
    (`{"type": "function", "name", ...}`) and a flat `{name, description, parameters}`, whose
    parameters may be Strands' `inputSchema` or Anthropic's `input_schema` (and JSON text).
    """
    if not isinstance(definition, dict):
        return None
    inner = definition.get("function")
    fields = inner if isinstance(inner, dict) else definition
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        return None
    parameters = fields.get("parameters", fields.get("inputSchema", fields.get("input_schema")))
    if not isinstance(parameters, dict):
        parameters = json_object(parameters)
    description = fields.get("description")
    return ToolSchema(
        name=name, description=description if isinstance(description, str) else None, parameters=parameters
    )
