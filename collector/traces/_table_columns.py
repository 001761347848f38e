"""Columns of the traces table built as plain Python lists, one Arrow array made per column.

A struct column is a list per field, a list column is its items' columns plus offsets; each flat
list is then packed once (`arrow_arrays.column`: not `pa.array`, which imports pandas in every
process that builds a table, ~0.5-0.9 s CPU a worker). Making a dict per row and per nested item for
`pa.RecordBatch.from_pylist` took 60% longer (0.52 s against 0.32 s for 3,000 peer traces).

A nested agent's trace becomes a row of its own, numbered when first met (a call listed both in
`Trace.tool_calls` and in its iteration's `tool_calls` refers to one row). An iteration refers to
the calls its trace lists by their positions (see `table.py`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from evaltrace.collector.arrow_arrays import bitmap, column
from evaltrace.collector.traces._table_encode import _TRACE_SCALARS, ChildRow, _encode, _Shared
from evaltrace.collector.traces.records import Iteration, Message, ToolCall, Trace

Values = list[Any]
RowFill = Callable[["Structs", int, _Shared], None]
"""Appends one row's values, numbered by the int, to the table's columns."""


class Structs:
    """A column of structs of `type` (never null), a list of values per field."""

    def __init__(self, type: pa.StructType) -> None:
        self.type = type
        self.names = [field.name for field in type]
        self.fields: dict[str, Values] = {name: [] for name in self.names}
        self.lists: dict[str, Lists] = {}
        self.structs: dict[str, Structs] = {}
        for field in type:
            if pa.types.is_list(field.type):
                self.lists[field.name] = Lists(field.type.value_type)
            elif pa.types.is_struct(field.type):
                self.structs[field.name] = Structs(field.type)

    def arrays(self) -> list[pa.Array]:
        """One array per field, in the type's order."""
        arrays = []
        for field in self.type:
            name = field.name
            if name in self.lists:
                arrays.append(self.lists[name].array())
            elif name in self.structs:
                arrays.append(self.structs[name].array())
            else:
                arrays.append(column(self.fields[name], field.type))
        return arrays

    def array(self) -> pa.StructArray:
        return pa.StructArray.from_arrays(self.arrays(), fields=list(self.type))

    def add_dict(self, values: dict[str, Any]) -> None:
        """Append a struct of plain values (no list or struct fields), given by field name."""
        fields = self.fields
        for name in self.names:
            fields[name].append(values[name])


class Lists:
    """A column of lists (null when `None` is marked), their items' column beside their offsets."""

    def __init__(self, value_type: pa.DataType) -> None:
        self.value_type = value_type
        self.offsets: list[int] = [0]
        self.nulls: list[bool] = []
        self.items: Values | Structs = Structs(value_type) if pa.types.is_struct(value_type) else []

    def close(self, size: int | None) -> None:
        """End a list of `size` items appended (its items are in `items`); `None`: a null list."""
        self.offsets.append(self.offsets[-1] + (size or 0))
        self.nulls.append(size is None)

    def extend(self, values: Values | None) -> None:
        """Append a list of plain values (or a null list)."""
        items = self.items
        assert isinstance(items, list)
        if values is not None:
            items.extend(values)
        self.close(None if values is None else len(values))

    def array(self) -> pa.ListArray:
        items = self.items
        values = items.array() if isinstance(items, Structs) else column(items, self.value_type)
        nulls = self.nulls.count(True)
        validity = pa.py_buffer(bitmap([not null for null in self.nulls])) if nulls else None
        buffers = [validity, pa.py_buffer(array("i", self.offsets))]
        return pa.Array.from_buffers(
            pa.list_(self.value_type), len(self.nulls), buffers, null_count=nulls, children=[values]
        )


class ColumnBuilder:
    """The traces table's rows as columns, numbered from 0 across every `add`."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._fresh()
        self._next = 0

    def _fresh(self) -> None:
        self.rows = 0
        self.columns = Structs(pa.struct(list(self.schema)))
        self._shared = _Shared()

    def add(self, trace: Trace) -> None:
        """Append `trace`'s row, then one per nested agent run (breadth first)."""
        top = self._next
        numbered: dict[int, int] = {id(trace): top}
        queue: list[tuple[Trace, int | None]] = [(trace, None)]
        self._next += 1
        shared = self._shared
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

            _trace(self.columns, current, (row, top, parent), child_row, shared)
            self.rows += 1

    def add_row(self, fill: RowFill) -> None:
        """Append a top-level row without nested agents that `fill` appends (see `_flat_columns`)."""
        fill(self.columns, self._next, self._shared)
        self._next += 1
        self.rows += 1

    def take(self) -> pa.RecordBatch:
        """The rows added since the last `take`, as one record batch of the schema."""
        batch = pa.RecordBatch.from_arrays(self.columns.arrays(), schema=self.schema)
        self._fresh()
        return batch


def _trace(
    columns: Structs, trace: Trace, rows: tuple[int, int, int | None], child_row: ChildRow, shared: _Shared
) -> None:
    fields, lists = columns.fields, columns.lists
    values = trace.__dict__
    for name, value in zip(("row", "top_row", "parent_row"), rows, strict=True):
        fields[name].append(value)
    for name in _TRACE_SCALARS:
        fields[name].append(values[name])
    fields["attributes_json"].append(_encode(trace.attributes))
    columns.structs["usage"].add_dict(trace.usage.__dict__)
    for name in ("models", "handoffs", "warnings"):
        lists[name].extend(values[name])
    calls = lists["tool_calls"]
    for call in trace.tool_calls:
        _call(calls.items, call, child_row, shared)  # type: ignore[arg-type]
    calls.close(len(trace.tool_calls))
    positions = {id(call): position for position, call in reversed(list(enumerate(trace.tool_calls)))}
    iterations = lists["iterations"]
    for iteration in trace.iterations:
        _iteration(iterations.items, iteration, positions, len(trace.tool_calls), child_row, shared)  # type: ignore[arg-type]
    iterations.close(len(trace.iterations))
    schemas = lists["tool_schemas"]
    for schema in trace.tool_schemas:
        schemas.items.add_dict(  # type: ignore[union-attr]
            {"name": schema.name, "description": schema.description, "parameters_json": shared.json(schema.parameters)}
        )
    schemas.close(len(trace.tool_schemas))


def _call(calls: Structs, call: ToolCall, child_row: ChildRow, shared: _Shared) -> None:
    fields = calls.fields
    fields["call_id"].append(call.call_id)
    fields["name"].append(call.name)
    fields["arguments_json"].append(shared.json(call.arguments))
    fields["arguments_truncated"].append(call.arguments_truncated)
    fields["result_json"].append(shared.json(call.result))
    fields["error"].append(call.error)
    fields["iteration"].append(call.iteration)
    fields["span_id"].append(call.span_id)
    fields["start_time"].append(call.start_time)
    fields["end_time"].append(call.end_time)
    fields["handoff"].append(call.handoff)
    fields["child_row"].append(None if call.child is None else child_row(call.child))


def _iteration(
    columns: Structs,
    iteration: Iteration,
    positions: dict[int, int],
    listed_by_trace: int,
    child_row: ChildRow,
    shared: _Shared,
) -> None:
    """An iteration's struct; `positions` are those of its trace's `listed_by_trace` calls, by `id`."""
    fields, lists = columns.fields, columns.lists
    for name in ("index", "span_id", "model", "provider", "start_time", "end_time", "error", "stop_reason"):
        fields[name].append(getattr(iteration, name))
    columns.structs["usage"].add_dict(iteration.usage.__dict__)
    for name in ("finish_reasons", "merged_span_ids", "duplicate_call_ids"):
        lists[name].extend(getattr(iteration, name))
    _messages(lists["input_messages"], iteration.input_messages, shared)
    _messages(lists["output_messages"], iteration.output_messages, shared)
    listed: list[int] = []
    others = lists["other_tool_calls"]
    other_count = 0
    for call in iteration.tool_calls:
        position = positions.get(id(call))
        if position is None:  # a call its trace does not list: stored here, after the trace's
            position = listed_by_trace + other_count
            other_count += 1
            _call(others.items, call, child_row, shared)  # type: ignore[arg-type]
        listed.append(position)
    others.close(other_count)
    lists["tool_call_positions"].extend(listed)


def _messages(column: Lists, messages: list[Message] | None, shared: _Shared) -> None:
    if messages is None:
        column.close(None)
        return
    structs = column.items
    assert isinstance(structs, Structs)
    fields = structs.fields
    parts = structs.lists["parts"]
    part_fields = parts.items.fields  # type: ignore[union-attr]
    for message in messages:
        fields["role"].append(message.role)
        fields["name"].append(message.name)
        for part in message.parts:
            part_fields["type"].append(part.type)
            part_fields["text"].append(part.text)
            part_fields["call_id"].append(part.call_id)
            part_fields["name"].append(part.name)
            part_fields["arguments_json"].append(shared.json(part.arguments))
            part_fields["result_json"].append(shared.json(part.result))
            part_fields["error"].append(part.error)
        parts.close(len(message.parts))
    column.close(len(messages))
