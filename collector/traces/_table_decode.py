"""Rows of the traces table back to `Trace` records (`table.py` documents the columns).

Decoding is columnar: each leaf column of a record batch becomes a Python list in one C call
(`Array.to_pylist` on a flat array is ~50x faster than on a nested one), nested lists are cut out
of their flat values by their offsets, and records are built from the lists by position. An
iteration's tool calls are the very records its trace's `tool_calls` holds, picked by position
(`table.py`), as the converter shares them.

Records are built without validation (`_construct.RecordFactory`): evaltrace wrote the table and
the reader checked its version, and validating every nested record again would cost as much as
rebuilding it.

A top-level trace's nested agents' rows follow it, possibly in the next record batch, so a trace
is yielded once the next top-level row (or the end) shows its group is whole, and each call's
`child_row` is resolved as soon as that row has been read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from evaltrace.collector.gc_policy import collections_paused
from evaltrace.collector.traces._construct import RecordFactory
from evaltrace.collector.traces.records import (
    Iteration,
    Message,
    MessagePart,
    ToolCall,
    ToolSchema,
    Trace,
    Usage,
)

# Calls whose `child` is still to be set: (the call, the row of its child trace).
_Pending = list[tuple[ToolCall, int]]
_loads = json.loads
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


_USAGE = RecordFactory(Usage)
_PART = RecordFactory(MessagePart)
_MESSAGE = RecordFactory(Message)
_CALL = RecordFactory(ToolCall)
_ITERATION = RecordFactory(Iteration)
_SCHEMA = RecordFactory(ToolSchema)
_TRACE = RecordFactory(Trace)


def _values(column: pa.Array) -> list[Any]:
    """The Python values of a flat column; timestamps made here, as the converter makes them.

    pyarrow's own conversion of zoned timestamps costs ~10 us a value (~50x the rest of a row).
    """
    if column.null_count == len(column):  # a field no record of the batch has (an error, a name)
        return [None] * len(column)
    if pa.types.is_timestamp(column.type):
        micros = column.cast(pa.int64()).to_pylist()
        if column.null_count:
            return [None if us is None else _EPOCH + timedelta(0, 0, us) for us in micros]
        return [_EPOCH + timedelta(0, 0, us) for us in micros]
    return column.to_pylist()  # type: ignore[no-any-return]


def _leaves(struct: pa.StructArray, names: Iterable[str]) -> dict[str, list[Any]]:
    return {name: _values(struct.field(name)) for name in names}


def _json_leaf(struct: pa.StructArray | pa.RecordBatch, name: str) -> list[Any]:
    """The values of a `*_json` column, parsed in one `json.loads` of them all as one JSON array.

    Each text is one JSON value (the encoder wrote it), so joined by commas they form an array of
    the same values; one parse of it saves the ~3 us each separate `json.loads` call costs.
    """
    column = struct.column(name) if isinstance(struct, pa.RecordBatch) else struct.field(name)
    if column.null_count == len(column):  # none recorded (most message parts' arguments and results)
        return [None] * len(column)
    texts = column.to_pylist()
    values: list[Any] = _loads("[" + ",".join("null" if text is None else text for text in texts) + "]")
    if len(values) != len(texts):  # a text that was not one JSON value: not a table evaltrace wrote
        raise ValueError(f"{name}: {len(texts)} texts gave {len(values)} JSON values")
    return values


def _flat(lists: pa.ListArray) -> tuple[pa.Array, list[int]]:
    """The values of the rows of `lists` (of a slice, its own only) and each row's offsets into them."""
    offsets = lists.offsets.to_pylist()
    values = lists.values  # the whole child array, even under a slice
    start, end = offsets[0], offsets[-1]
    if start or end != len(values):
        values = values.slice(start, end - start)
        offsets = [offset - start for offset in offsets]
    return values, offsets


def _split(lists: pa.ListArray, offsets: list[int], items: Sequence[Any]) -> list[Any]:
    """Per row of `lists`, its slice of `items` (built from its values); a null list stays `None`."""
    rows: list[Any] = [items[offsets[i] : offsets[i + 1]] for i in range(len(lists))]
    if lists.null_count:
        rows = [row if valid else None for row, valid in zip(rows, lists.is_valid().to_pylist(), strict=True)]
    return rows


def _nested(lists: pa.ListArray, build: Callable[[Any], Sequence[Any]]) -> list[Any]:
    values, offsets = _flat(lists)
    return _split(lists, offsets, build(values))


def _usages(struct: pa.StructArray) -> list[Usage]:
    return _USAGE.build_all(_leaves(struct, _USAGE.names))


def _parts(struct: pa.StructArray) -> list[MessagePart]:
    columns = _leaves(struct, ("type", "text", "call_id", "name", "error"))
    columns["arguments"] = _json_leaf(struct, "arguments_json")
    columns["result"] = _json_leaf(struct, "result_json")
    return _PART.build_all(columns)


def _messages(struct: pa.StructArray) -> list[Message]:
    columns = _leaves(struct, ("role", "name"))
    columns["parts"] = _nested(struct.field("parts"), _parts)
    return _MESSAGE.build_all(columns)


def _calls(struct: pa.StructArray, pending: _Pending) -> list[ToolCall]:
    names = ("call_id", "name", "error", "iteration", "span_id", "start_time", "end_time")
    columns = _leaves(struct, (*names, "arguments_truncated", "handoff"))
    columns["arguments"] = _json_leaf(struct, "arguments_json")
    columns["result"] = _json_leaf(struct, "result_json")
    columns["child"] = [None] * len(struct)
    calls = _CALL.build_all(columns)
    for call, child_row in zip(calls, struct.field("child_row").to_pylist(), strict=True):
        if child_row is not None:
            pending.append((call, child_row))
    return calls


def bare_calls(**fields: Sequence[Any]) -> list[ToolCall]:
    """Tool calls of these fields' values (a list per field, by position), the others their defaults, as decoded."""
    build, names = _CALL.build, list(fields)
    return [build(**dict(zip(names, values, strict=True))) for values in zip(*fields.values(), strict=True)]


def _iterations(struct: pa.StructArray, listed: Sequence[list[ToolCall]], pending: _Pending) -> list[Iteration]:
    """The iterations; `listed[i]` is the tool calls of iteration `i`'s trace (see `table.py`)."""
    names = ("index", "span_id", "model", "provider", "start_time", "end_time", "error", "stop_reason")
    columns = _leaves(struct, names)
    columns["input_messages"] = _nested(struct.field("input_messages"), _messages)
    columns["output_messages"] = _nested(struct.field("output_messages"), _messages)
    others = _nested(struct.field("other_tool_calls"), lambda values: _calls(values, pending))
    positions = _nested(struct.field("tool_call_positions"), _positions)
    columns["tool_calls"] = list(map(_listed_calls, listed, others, positions))
    for name in ("finish_reasons", "merged_span_ids", "duplicate_call_ids"):
        columns[name] = _nested(struct.field(name), pa.Array.to_pylist)
    columns["usage"] = _usages(struct.field("usage"))
    return _ITERATION.build_all(columns)


def _positions(values: pa.Array) -> list[int]:
    """The positions of iterations' calls; one past the end raises `IndexError` when it is used."""
    if values.null_count or (len(values) and pc.min(values).as_py() < 0):  # a list index would take them
        raise ValueError("tool_call_positions: a null or negative position")
    found: list[int] = values.to_pylist()
    return found


def _listed_calls(listed: list[ToolCall], others: list[ToolCall], positions: list[int]) -> list[ToolCall]:
    """An iteration's calls: the very records its trace lists, then its others, by position."""
    calls = listed + others if others else listed
    return [calls[position] for position in positions]


def _tool_schemas(struct: pa.StructArray) -> list[ToolSchema]:
    columns = _leaves(struct, ("name", "description"))
    columns["parameters"] = _json_leaf(struct, "parameters_json")
    return _SCHEMA.build_all(columns)


_STRING_LISTS = ("models", "handoffs", "warnings")
_TRACE_NESTED = frozenset((*_STRING_LISTS, "usage", "tool_calls", "iterations", "tool_schemas", "attributes"))
_TRACE_LEAVES = tuple(name for name in _TRACE.names if name not in _TRACE_NESTED)
"""The `Trace` fields stored as plain columns under their own names."""


def _batch_traces(batch: pa.RecordBatch, pending: _Pending) -> list[Trace]:
    """One `Trace` per row of `batch`; calls with a nested agent are added to `pending`.

    The cyclic garbage collector is paused meanwhile and the batch's records settled in the oldest
    generation after (`collections_paused`): records make no cycles, and they outlive the batch.
    """
    with collections_paused(settle=True):
        return _make_traces(batch, pending)


def _make_traces(batch: pa.RecordBatch, pending: _Pending) -> list[Trace]:
    columns = {name: _values(batch.column(name)) for name in _TRACE_LEAVES}
    for name in _STRING_LISTS:
        columns[name] = _nested(batch.column(name), pa.Array.to_pylist)
    columns["usage"] = _usages(batch.column("usage"))
    calls = columns["tool_calls"] = _nested(batch.column("tool_calls"), lambda values: _calls(values, pending))
    iterations = batch.column("iterations")
    values, offsets = _flat(iterations)
    listed = [row_calls for row, row_calls in enumerate(calls) for _ in range(offsets[row + 1] - offsets[row])]
    columns["iterations"] = _split(iterations, offsets, _iterations(values, listed, pending))
    columns["tool_schemas"] = _nested(batch.column("tool_schemas"), _tool_schemas)
    columns["attributes"] = _json_leaf(batch, "attributes_json")
    return _TRACE.build_all(columns)


def iter_traces(batches: Iterable[pa.RecordBatch]) -> Iterator[Trace]:
    """The top-level traces of the batches' rows, in order, with their nested agents attached."""
    known: dict[int, Trace] = {}  # rows of the top-level trace still open, and of this batch
    tops: list[Trace] = []  # top-level traces read and not yet yielded (the last may be open)
    pending: _Pending = []
    for batch in batches:
        if not batch.num_rows:
            continue
        rows, top_rows = batch.column("row").to_pylist(), batch.column("top_row").to_pylist()
        traces = _batch_traces(batch, pending)
        known.update(zip(rows, traces, strict=True))
        tops += [trace for row, top, trace in zip(rows, top_rows, traces, strict=True) if row == top]
        pending = _resolve(pending, known)
        last = top_rows[-1]
        if last >= rows[0]:  # a new top-level trace started here: the ones before it are whole
            known = {row: trace for row, top, trace in zip(rows, top_rows, traces, strict=True) if top == last}
            yield from tops[:-1]
            del tops[:-1]
    yield from tops


def _resolve(pending: _Pending, group: dict[int, Trace]) -> _Pending:
    """Attach each pending call's child from `group`; returns the calls whose child row is yet to come."""
    waiting: _Pending = []
    for call, child_row in pending:
        child = group.get(child_row)
        if child is None:
            waiting.append((call, child_row))
        else:
            call.__dict__["child"] = child
    return waiting
