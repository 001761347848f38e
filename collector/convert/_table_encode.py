"""`Trace` records to rows of the traces table (`table.py` documents the columns).

Rows are plain dicts shaped like the Arrow schema, so `pa.RecordBatch.from_pylist` converts a
batch of them in C. A nested agent's trace becomes a row of its own, numbered when first met
(a call listed both in `Trace.tool_calls` and in its iteration's `tool_calls` refers to one row).
An iteration refers to the calls its trace lists by their positions (see `table.py`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final

from evaltrace.collector.convert.records import Iteration, Message, ToolCall, ToolSchema, Trace, Usage

Row = dict[str, Any]
ChildRow = Callable[[Trace], int]
"""Numbers a nested agent's trace (the same trace, the same row) and queues it to be written."""


def to_json(value: Any) -> str | None:
    """JSON text of a record's `Any` value; `None` (not recorded) stays `None`.

    Raises:
        TypeError: `value` is not a JSON value.
    """
    if value is None:
        return None
    return _encode(value)


# One encoder for every value: `json.dumps` with options builds a new `JSONEncoder` on each call,
# a third of its cost on the small values a trace holds.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_Chunks = Callable[[Any, int], Iterable[str]]


def _encode(value: Any) -> str:
    """`_ENCODER.encode(value)`, with the C encoder made once rather than on each call (a third of its cost)."""
    if isinstance(value, str):
        return json.encoder.encode_basestring(value)
    return "".join(_iterencode(value, 0))


def _c_iterencode() -> _Chunks:
    """What `_ENCODER.iterencode(value, _one_shot=True)` makes (the C encoder, if this Python has it).

    Without cycle markers: a shared markers dict would be state between calls (and threads), and a
    cyclic value, which JSON text cannot make, still fails (`RecursionError`, not `ValueError`).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the encoder's own method
        return lambda value, _level: _ENCODER.iterencode(value, _one_shot=True)
    encoder = _ENCODER
    return make(  # type: ignore[no-any-return]
        None,
        encoder.default,
        json.encoder.encode_basestring,
        encoder.indent,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )


_iterencode: Final[_Chunks] = _c_iterencode()


class _Shared:
    """The rows of one top-level trace's (and its nested agents') values, each value object encoded once.

    The converter shares objects: an iteration's input messages are the earlier iterations'
    messages again (the same `Message` objects), and a call's arguments are its message part's.
    Most of what a trace holds was met before while encoding it. Objects are remembered by `id`,
    which is sound while the trace is being encoded: it holds every value, so no id is reused
    meanwhile, and a trace is not changed once the converter made it. A remembered message row is
    the same dict in each place: Arrow reads it again for each.
    """

    def __init__(self) -> None:
        self._texts: dict[int, str | None] = {}
        self._messages: dict[int, Row] = {}

    def json(self, value: Any) -> str | None:
        """`to_json(value)`."""
        key = id(value)
        texts = self._texts
        if key in texts:
            return texts[key]
        text = texts[key] = to_json(value)
        return text

    def message(self, message: Message) -> Row:
        """The row of `message` (a struct of `MESSAGE_TYPE`)."""
        row = self._messages.get(id(message))
        if row is None:
            row = self._messages[id(message)] = _message(message, self)
        return row


class RowBuilder:
    """Rows of the traces table, numbered from 0 across every `add`."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self._next = 0

    def add(self, trace: Trace) -> None:
        """Append `trace`'s row, then one per nested agent run (breadth first)."""
        top = self._next
        numbered: dict[int, int] = {id(trace): top}
        queue: list[tuple[Trace, int | None]] = [(trace, None)]
        self._next += 1
        shared = _Shared()
        position = 0
        while position < len(queue):
            current, parent = queue[position]
            position += 1
            row = numbered[id(current)]

            def child_row(child: Trace, parent_row: int = row) -> int:
                found = numbered.get(id(child))
                if found is None:
                    found = numbered[id(child)] = self._next
                    self._next += 1
                    queue.append((child, parent_row))
                return found

            self.rows.append(_trace_row(current, row, top, parent, child_row, shared))


def _trace_row(trace: Trace, row: int, top: int, parent: int | None, child_row: ChildRow, shared: _Shared) -> Row:
    values = trace.__dict__
    calls = [_call(call, child_row, shared) for call in trace.tool_calls]
    # The converter lists each call twice, in the trace and in its iteration (the same object):
    # the iteration refers to it by its position in the trace's calls.
    positions = {id(call): position for position, call in reversed(list(enumerate(trace.tool_calls)))}
    return {
        "row": row,
        "top_row": top,
        "parent_row": parent,
        **{name: values[name] for name in _TRACE_SCALARS},
        "usage": _usage(trace.usage),
        "models": trace.models,
        "tool_calls": calls,
        "iterations": [
            _iteration(iteration, positions, len(calls), child_row, shared) for iteration in trace.iterations
        ],
        "tool_schemas": [_tool_schema(schema, shared) for schema in trace.tool_schemas],
        "handoffs": trace.handoffs,
        "warnings": trace.warnings,
        "attributes_json": _encode(trace.attributes),
    }


_TRACE_SCALARS = (
    "trace_id",
    "root_span_id",
    "name",
    "agent_name",
    "case_id",
    "conversation_id",
    "run_id",
    "service_name",
    "convention",
    "status",
    "input",
    "output",
    "error",
    "start_time",
    "end_time",
    "span_count",
)


def _usage(usage: Usage) -> Row:
    return usage.__dict__


def _call(call: ToolCall, child_row: ChildRow, shared: _Shared) -> Row:
    return {
        "call_id": call.call_id,
        "name": call.name,
        "arguments_json": shared.json(call.arguments),
        "arguments_truncated": call.arguments_truncated,
        "result_json": shared.json(call.result),
        "error": call.error,
        "iteration": call.iteration,
        "span_id": call.span_id,
        "start_time": call.start_time,
        "end_time": call.end_time,
        "handoff": call.handoff,
        "child_row": None if call.child is None else child_row(call.child),
    }


def _iteration(
    iteration: Iteration, positions: dict[int, int], listed_by_trace: int, child_row: ChildRow, shared: _Shared
) -> Row:
    """An iteration's row; `positions` are those of its trace's `listed_by_trace` calls, by `id`."""
    listed: list[int] = []
    others: list[Row] = []
    for call in iteration.tool_calls:
        position = positions.get(id(call))
        if position is None:  # a call its trace does not list: stored here, after the trace's
            position = listed_by_trace + len(others)
            others.append(_call(call, child_row, shared))
        listed.append(position)
    return {
        "index": iteration.index,
        "span_id": iteration.span_id,
        "model": iteration.model,
        "provider": iteration.provider,
        "input_messages": _messages(iteration.input_messages, shared),
        "output_messages": _messages(iteration.output_messages, shared),
        "tool_call_positions": listed,
        "other_tool_calls": others,
        "finish_reasons": iteration.finish_reasons,
        "usage": _usage(iteration.usage),
        "start_time": iteration.start_time,
        "end_time": iteration.end_time,
        "error": iteration.error,
    }


def _messages(messages: list[Message] | None, shared: _Shared) -> list[Row] | None:
    if messages is None:
        return None
    return [shared.message(message) for message in messages]


def _message(message: Message, shared: _Shared) -> Row:
    return {
        "role": message.role,
        "name": message.name,
        "parts": [
            {
                "type": part.type,
                "text": part.text,
                "call_id": part.call_id,
                "name": part.name,
                "arguments_json": shared.json(part.arguments),
                "result_json": shared.json(part.result),
            }
            for part in message.parts
        ],
    }


def _tool_schema(schema: ToolSchema, shared: _Shared) -> Row:
    return {"name": schema.name, "description": schema.description, "parameters_json": shared.json(schema.parameters)}
