"""GenAI message JSON (v1.37+ parts, and the v1.36-and-earlier event bodies) to `Message` records.

The schema drifts between emitters, so every variant seen from the emitters is accepted:
`tool_call_response` carries `response` or `result` (and pydantic-ai adds `name`); tool results
sit in `user`, `tool` or `""` messages; `model` means `assistant`; arguments are objects or JSON
text; old-style tool calls sit at the top of a `gen_ai.choice` body or inside its `message`.

A message in the other widely used shape, a provider's `content` (text, or a list of content
blocks) and OpenAI's `tool_calls` / `tool_call_id` instead of `parts`, is read, not dropped; the
provider's content blocks (`tool_use`, `tool_result` with `is_error`) are parts wherever they sit,
and a result handed over as a list of text blocks is their text (`_provider`).
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from evaltrace.collector.traces._construct import RecordFactory, texts_or_none
from evaltrace.collector.traces._lenient_json import json_list, json_object, parse_json
from evaltrace.collector.traces._provider import block_error, unwrap_blocks
from evaltrace.collector.traces._spanutil import is_redacted, read_arguments
from evaltrace.collector.traces.records import Message, MessagePart, ToolCall

_ROLE_SYNONYMS = {"model": "assistant", "human": "user", "ai": "assistant", "function": "tool"}


def normalise_role(role: Any) -> str:
    """Lower-cased role with provider synonyms mapped (`model` -> `assistant`)."""
    text = str(role or "").strip().lower()
    return _ROLE_SYNONYMS.get(text, text)


def parse_part(part: Any, where: str, warnings: list[str]) -> MessagePart:
    """One GenAI message part; unknown part types become `other` with a text rendering."""
    return MessagePart.model_validate(_part_fields(part, where, warnings))


# Message lists are built without validation (`_built`); a list holding a value that needs it is
# validated from its plain dicts in one call, pydantic building the nested records in Rust.
_MESSAGE_LIST: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
_PART = RecordFactory(MessagePart)
_MESSAGE = RecordFactory(Message)
_TOOL_CALL = RecordFactory(ToolCall)
assert _MESSAGE.names == ("role", "parts", "name")
assert _TOOL_CALL.names[:3] == ("call_id", "name", "arguments")
# A requested call's other fields, defaults in `ToolCall`'s order: result, error, iteration, span id,
# start and end time, arguments truncated, child, handoff.
_UNSET_CALL_FIELDS = (None, None, None, None, None, None, False, None, False)
assert _UNSET_CALL_FIELDS == tuple(ToolCall.model_fields[name].default for name in _TOOL_CALL.names[3:])
assert _PART.names == ("type", "text", "call_id", "name", "arguments", "result", "error")  # `_PartValues`' order


# A part's field values in `MessagePart` order: type, text, call id, name, arguments, result, error.
_PartValues = tuple[str, Any, Any, Any, Any, Any, Any]


def _part_fields(part: Any, where: str, warnings: list[str]) -> dict[str, Any]:
    """The `MessagePart` fields of one GenAI message part (see `parse_part`)."""
    return dict(zip(_PART.names, _part_values(part, where, warnings), strict=True))


def _part_values(part: Any, where: str, warnings: list[str]) -> _PartValues:
    if isinstance(part, str):
        return "text", _text(part, where, warnings), None, None, None, None, None
    if not isinstance(part, dict):
        return "other", str(part), None, None, None, None, None
    kind = part.get("type")
    if kind == "text":
        return "text", _text(part.get("content", part.get("text")), where, warnings), None, None, None, None, None
    if kind in ("tool_call", "tool_use"):  # the conventions' part, Anthropic's block (`input`)
        arguments = part.get("arguments", part.get("input"))
        if isinstance(arguments, str):  # structured arguments need no parse (and no warning text)
            args = read_arguments(arguments, f"{where}: tool call {part.get('name')!r}")
            if args.warning:
                warnings.append(args.warning)
            arguments = args.value
        return "tool_call", None, _id(part.get("id")), part.get("name"), arguments, None, None
    if kind in ("tool_call_response", "tool_result"):  # Anthropic's block: `tool_use_id`, `content`, `is_error`
        result = _result(part.get("response", part.get("result", part.get("content"))))
        call_id = _id(part.get("id", part.get("tool_use_id")))
        return "tool_result", None, call_id, part.get("name"), None, result, block_error(part, result)
    return "other", _render_other(part), None, None, None, None, None


def _text_part(value: Any, where: str, warnings: list[str]) -> MessagePart:
    return MessagePart(type="text", text=_text(value, where, warnings))


def _text(value: Any, where: str, warnings: list[str]) -> str | None:
    if value is None or is_redacted(value):
        if value is not None:
            warnings.append(f"{where}: message text was redacted ({str(value).strip()})")
        return None
    return value if isinstance(value, str) else str(value)


def _id(value: Any) -> str | None:
    # The spec's own examples write ids with a leading space (`" call_..."`).
    return str(value).strip() or None if value is not None else None


def _result(value: Any) -> Any:
    if is_redacted(value):
        return None
    value = unwrap_blocks(value)
    if isinstance(value, str) and value.lstrip().startswith(("{", "[")):
        return parse_json(value).value
    return value


def _render_other(part: dict[str, Any]) -> str | None:
    for key in ("content", "uri", "file_id"):
        value = part.get(key)
        if isinstance(value, str) and not is_redacted(value):
            return value
    return None


def parse_messages(value: Any, where: str, warnings: list[str], *, history: bool = True) -> list[Message] | None:
    """A `gen_ai.input.messages` / `gen_ai.output.messages` value; `None` when absent or unreadable.

    `history=False` says the value is not a conversation so far (a model's output), so no earlier
    text can open it: the look for one is skipped. It is still remembered for the next prompt,
    which opens with it.
    """
    if value is None:
        return None
    reused = _continue_history(value, where, warnings) if history else None
    if reused is not None:
        return reused
    items = json_list(value)
    if items is None:
        warnings.append(f"{where}: messages are not a JSON array; ignored")
        return None
    before = len(warnings)
    messages = _messages(items, where, warnings)
    if isinstance(value, str) and len(warnings) == before:
        _remember(value, messages)
    return messages


def _messages(items: list[Any], where: str, warnings: list[str]) -> list[Message]:
    before = len(warnings)
    built = _built(items, where, warnings)
    if built is not None:
        return built
    del warnings[before:]  # the validating build below reports them again
    fields: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, dict):
            name = item.get("name")
            fields.append(
                {
                    "role": normalise_role(item.get("role")),
                    "parts": [_part_fields(p, where, warnings) for p in _parts(item)],
                    "name": name if isinstance(name, str) else None,
                }
            )
    try:
        return _MESSAGE_LIST.validate_python(fields)
    except ValidationError:
        # Raise the error one record at a time gives (its location names the part, not a list index).
        for message in fields:
            part_fields: list[dict[str, Any]] = message["parts"]
            Message(role=message["role"], parts=[MessagePart(**p) for p in part_fields], name=message["name"])
        raise


def _parts(item: dict[str, Any]) -> list[Any]:
    parts = item.get("parts")
    if parts is None and ("content" in item or "tool_calls" in item):
        return _content_shape(item)
    return parts if isinstance(parts, list) else ([] if parts is None else [parts])


def _content_shape(item: dict[str, Any]) -> list[Any]:
    """The parts of a message in the providers' shape: `content` (text or blocks), OpenAI's tool fields."""
    body = item.get("content")
    if "tool_call_id" in item:  # an OpenAI chat tool message: its content is the result
        return [{"type": "tool_call_response", "id": item["tool_call_id"], "response": body}]
    parts: list[Any] = list(body) if isinstance(body, list) else ([] if body is None else [body])
    calls = item.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, dict):
            nested = call.get("function")
            function: dict[str, Any] = nested if isinstance(nested, dict) else call
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
    return parts


def _built(items: list[Any], where: str, warnings: list[str]) -> list[Message] | None:
    """The messages of `items` built without validation; `None` when a value needs validation."""
    found = message_values(items, where, warnings)
    if found is None:
        return None
    return [_MESSAGE.make(role, [_PART.make(*values) for values in parts], name) for role, name, parts in found]


MessageValues = tuple[str, str | None, list[_PartValues]]
"""A message's role, name and each part's field values, in `Part`'s field order."""


def message_values(items: list[Any], where: str, warnings: list[str]) -> list[MessageValues] | None:
    """Each message of `items` as plain values (`_built`'s records, and the traces table's flat rows).

    Every value has its field's type by construction except the names and texts taken from the
    recorded JSON (a number where a name belongs, a text-like value of a `str` subclass): those
    must be exactly text, else `None` leaves the whole list to validation, which decides.
    """
    messages: list[MessageValues] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        name = item.get("name")
        if not isinstance(name, str):
            name = None
        elif type(name) is not str:
            return None
        parts: list[_PartValues] = []
        for part in _parts(item):
            values = _part_values(part, where, warnings)
            if not texts_or_none(values[1], values[3], values[6]):
                return None
            parts.append(values)
        messages.append((normalise_role(item.get("role")), name, parts))
    return messages


# Each model call's input repeats the whole conversation so far: the text of call k+1 is that of
# call k with messages appended (`[A, B]` -> `[A, B, C, D]`). The last few texts parsed without
# warnings are kept with their messages (a few, because output messages and other spans are parsed
# in between); a text extending one of them parses only the new messages and shares the earlier
# `Message` objects (records are read-only once built). JSON items are context-free, so the shared
# prefix `[A, B` followed by `,` holds exactly the items A and B in both texts. Texts that produced
# warnings are never kept, so every span still reports its own warnings.
_RECENT = 4
_recent: list[tuple[str, list[Message]]] = []


def _remember(text: str, messages: list[Message]) -> None:
    global _recent
    # Replaced, never mutated in place: a thread reading the old list is unaffected.
    _recent = [(text, messages), *_recent[: _RECENT - 1]]


def _extends(value: str, text: str, cut: int) -> bool:
    """Whether `value` is the array `text` (closing bracket at `cut`) with more items appended."""
    return len(value) > len(text) and text[cut] == "]" and value[cut] == "," and value.startswith(text[:cut])


def _continue_history(value: Any, where: str, warnings: list[str]) -> list[Message] | None:
    if not isinstance(value, str):
        return None
    for text, earlier in _recent:
        cut = len(text) - 1
        if earlier and _extends(value, text, cut):
            break
    else:
        return None
    reply, rest = _reused_items(value[cut + 1 :])
    items: list[Any] = []
    if not (reply and rest.strip() == "]"):  # more items follow the reused ones (or none were reused)
        parsed = json_list("[" + (rest[1:] if reply else rest))
        if not parsed:
            return None
        items = parsed
    before = len(warnings)
    messages = earlier + reply + _messages(items, where, warnings)
    if len(warnings) == before:
        _remember(value, messages)
    return messages


def _reused_items(rest: str) -> tuple[list[Message], str]:
    """The messages of a remembered array whose items open `rest`, and the text after them.

    The items appended to a history usually start with the previous call's reply, parsed moments
    ago as that call's output (`[X]`): when `rest` (`X, T]`) opens with exactly those items,
    followed by `,` or `]`, their messages are reused and only the text after them is left (it
    starts with that `,` or `]`). Otherwise nothing is reused and `rest` comes back unchanged.
    """
    body = rest.lstrip()
    for text, messages in _recent:
        if messages and len(text) > 2 and text[0] == "[" and text[-1] == "]" and body.startswith(text[1:-1]):
            after = body[len(text) - 2 :].lstrip()
            if after[:1] in (",", "]"):
                return messages, after
    return [], rest


def system_message(value: Any, where: str, warnings: list[str]) -> Message | None:
    """`gen_ai.system_instructions` (a bare list of parts, or text) as one system message."""
    if value is None:
        return None
    if not isinstance(value, str):
        return _system_message(value, where, warnings)
    # Every model call of a run (and usually of every run) carries the same instructions text:
    # build the message once and share it (records are read-only once built, see `_recent`).
    known = _SYSTEM.get(value)
    if known is not None:
        return known
    before = len(warnings)
    message = _system_message(value, where, warnings)
    if len(warnings) == before:
        if len(_SYSTEM) >= _SYSTEM_MAX:
            _SYSTEM.clear()
        _SYSTEM[value] = message
    return message


_SYSTEM: dict[str, Message] = {}
_SYSTEM_MAX = 64


def _system_message(value: Any, where: str, warnings: list[str]) -> Message:
    parts = json_list(value)
    if parts is None:
        return Message(role="system", parts=[_text_part(value, where, warnings)])
    return Message(role="system", parts=[parse_part(p, where, warnings) for p in parts])


def tool_calls_of(messages: list[Message] | None) -> list[ToolCall]:
    """The `tool_call` parts of assistant messages, in order, as result-less `ToolCall`s."""
    calls = []
    for message in messages or []:
        for part in message.parts:
            if part.type == "tool_call":
                # The part's fields were validated (or checked) when it was built: no validation again.
                calls.append(_TOOL_CALL.make(part.call_id, part.name or "", part.arguments, *_UNSET_CALL_FIELDS))
    return calls


# --- v1.36-and-earlier event bodies -----------------------------------------------------------


def event_message(role: str, body: dict[str, Any], where: str, warnings: list[str]) -> Message:
    """One `gen_ai.<role>.message` event, or the `message` of a `gen_ai.choice` event, as a `Message`."""
    nested = json_object(body.get("message"))
    source = nested if nested is not None else body
    role = normalise_role(source.get("role") or body.get("role") or role)
    # A choice's `message` is a `{role, content}` object by the conventions; Strands writes the content
    # itself there (content-block JSON, or the answer's text on its agent span).
    content = body.get("message") if nested is None and "content" not in body else source.get("content")
    parts = _content_parts(content, where, warnings)
    calls = json_list(source.get("tool_calls")) or json_list(body.get("tool_calls")) or []
    parts += [_event_tool_call(c, where, warnings) for c in calls if isinstance(c, dict)]
    if role == "tool":
        result = _result(source.get("content"))
        return Message(role="tool", parts=[MessagePart(type="tool_result", call_id=_id(body.get("id")), result=result)])
    return Message(role=role, parts=parts)


def _content_parts(content: Any, where: str, warnings: list[str]) -> list[MessagePart]:
    if content is None:
        return []
    blocks = json_list(content) if isinstance(content, str) and content.lstrip().startswith("[") else None
    if isinstance(content, list):
        blocks = content
    if blocks is None:
        return [_text_part(content, where, warnings)]
    # Bedrock-style content blocks (Strands): {"text": ...}, {"toolUse": ...}, {"toolResult": ...}.
    parts = []
    for block in blocks:
        if isinstance(block, dict) and "text" in block and "type" not in block:
            parts.append(_text_part(block["text"], where, warnings))
        elif isinstance(block, dict) and isinstance(block.get("toolUse"), dict):
            use = block["toolUse"]
            parts.append(
                MessagePart(
                    type="tool_call", call_id=use.get("toolUseId"), name=use.get("name"), arguments=use.get("input")
                )
            )
        else:
            parts.append(parse_part(block, where, warnings))
    return parts


def _event_tool_call(call: dict[str, Any], where: str, warnings: list[str]) -> MessagePart:
    nested = call.get("function")
    function: dict[str, Any] = nested if isinstance(nested, dict) else call
    name = function.get("name")
    args = read_arguments(function.get("arguments"), f"{where}: tool call {name!r}")
    if args.warning:
        warnings.append(args.warning)
    return MessagePart(type="tool_call", call_id=_id(call.get("id")), name=name, arguments=args.value)
