"""The tool calls of a traces-table batch, read column by column.

One record batch of the traces table (`evaltrace.collector.convert.table`) becomes a handful of
flat Python lists, each made by one Arrow call (`to_pylist` on a flat array), plus the list
offsets that cut them per row. No `Trace` or `ToolCall` record is built: a row's calls are slices
of those lists, looked up by trace id.

Only top-level rows (`parent_row` null) are indexed: they are the traces the engine scores (a
nested agent's row usually shares its parent's trace id). A trace id held by two top-level rows is
left out (`RunCalls` tracks ids across batches), so a lookup never answers for the wrong trace.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class RowCalls:
    """One top-level row's tool calls (`Trace.tool_calls`), as column slices."""

    names: list[str]
    """Tool names, in call order."""
    arguments: list[str | None]
    """Each call's arguments as the table's JSON text (`None`: not recorded)."""
    truncated: bool
    """Whether any call's arguments were cut when recorded."""
    nested: bool
    """Whether any call started a nested agent run (`child_row` set)."""
    _flags: Callable[[], tuple[bool, bool]] = field(repr=False, compare=False)
    model_calls: int
    """How many model calls (iterations) the row has."""
    usage: dict[str, int | None]
    """The run's token usage (`Trace.usage`) by field name."""
    run_micros: int | None
    """The run's wall time in microseconds (`None`: start or end not recorded)."""
    call_micros: list[int | None]
    """Each call's wall time in microseconds, in call order."""
    _batch: BatchCalls = field(repr=False, compare=False)
    _index: int = field(repr=False, compare=False)
    """The row's position in its batch."""

    def value(self, column: str) -> object:
        """The row's value of a top-level column of the traces table (`output`, `tool_schemas`, ...).

        A column is converted for the whole batch the first time any row asks for it.
        """
        return self._batch.column(column)[self._index]

    def call_values(self, field_name: str) -> list[object]:
        """One field of the row's tool calls (`result_json`, `error`, ...), in call order."""
        start, end = self._batch.bounds(self._index)
        return self._batch.call_field(field_name)[start:end]

    @property
    def failed(self) -> bool:
        """Whether any call has an error recorded (a non-empty `error`)."""
        return self._flags()[0]

    @property
    def error_text(self) -> bool:
        """Whether any call's result text holds `"error"` (so may be an object with an `error` field)."""
        return self._flags()[1]


class BatchCalls:
    """The tool calls of one traces-table batch, by top-level trace id."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        calls = batch.column("tool_calls")
        values = calls.values  # `offsets` index into the unsliced child array
        self._offsets: list[int] = calls.offsets.to_pylist()
        self._names: list[str] = pc.struct_field(values, "name").to_pylist()
        self._arguments: list[str | None] = pc.struct_field(values, "arguments_json").to_pylist()
        self._truncated: list[bool | None] = pc.struct_field(values, "arguments_truncated").to_pylist()
        self._children: list[int | None] = pc.struct_field(values, "child_row").to_pylist()
        self._values = values
        self._model_calls: list[int] = pc.list_value_length(batch.column("iterations")).to_pylist()
        usage = batch.column("usage")
        self._usage = {field.name: pc.struct_field(usage, field.name).to_pylist() for field in usage.type}
        self._run_micros = _micros(batch.column("start_time"), batch.column("end_time"))
        self._call_micros = _micros(pc.struct_field(values, "start_time"), pc.struct_field(values, "end_time"))
        self._rows = _top_rows(batch)
        self._batch = batch
        self._columns: dict[str, list[object]] = {}
        self._call_fields: dict[str, list[object]] = {}

    @property
    def trace_ids(self) -> list[str]:
        """The trace ids this batch answers for."""
        return list(self._rows)

    def forget(self, trace_id: str) -> None:
        """Stop answering for `trace_id` (another batch holds it too)."""
        self._rows.pop(trace_id, None)

    def row(self, trace_id: str) -> RowCalls | None:
        """The calls of the top-level row of `trace_id`, or `None` when this batch has no such single row."""
        index = self._rows.get(trace_id)
        if index is None:
            return None
        start, end = self._offsets[index], self._offsets[index + 1]
        return RowCalls(
            names=self._names[start:end],
            arguments=self._arguments[start:end],
            truncated=any(self._truncated[start:end]),
            nested=any(child is not None for child in self._children[start:end]),
            _flags=lambda: (any(self._failed[start:end]), any(self._error_text[start:end])),
            model_calls=self._model_calls[index],
            usage={name: values[index] for name, values in self._usage.items()},
            run_micros=self._run_micros[index],
            call_micros=self._call_micros[start:end],
            _batch=self,
            _index=index,
        )

    def bounds(self, index: int) -> tuple[int, int]:
        """Where row `index`'s calls start and end in the flat call lists."""
        return self._offsets[index], self._offsets[index + 1]

    def column(self, name: str) -> list[object]:
        """A top-level column of the batch as Python values (converted once, on first use)."""
        found = self._columns.get(name)
        if found is None:
            found = self._columns[name] = self._batch.column(name).to_pylist()
        return found

    def call_field(self, name: str) -> list[object]:
        """One field of every call in the batch, flat, as Python values (converted once, on first use)."""
        found = self._call_fields.get(name)
        if found is None:
            found = self._call_fields[name] = pc.struct_field(self._values, name).to_pylist()
        return found

    # The error flags cost more than all the other columns together (string kernels over every
    # call's error and result): computed once per batch, and only if a form asks.
    @functools.cached_property
    def _failed(self) -> list[bool]:
        lengths = pc.utf8_length(pc.struct_field(self._values, "error"))
        failed: list[bool] = pc.fill_null(pc.greater(lengths, 0), False).to_pylist()
        return failed

    @functools.cached_property
    def _error_text(self) -> list[bool]:
        # Written by evaltrace's own encoder, which never escapes a letter: a result object with an
        # `error` key holds the text `"error"`. Its absence proves there is none; its presence proves nothing.
        results = pc.struct_field(self._values, "result_json")
        found: list[bool] = pc.fill_null(pc.match_substring(results, '"error"'), False).to_pylist()
        return found


def _micros(start: pa.Array, end: pa.Array) -> list[int | None]:
    """End minus start in whole microseconds (the table's unit), null where either is missing.

    `timedelta.total_seconds()` divides the same integer by 10**6, so `micros / 1_000_000` is the
    reference's float exactly.
    """
    micros: list[int | None] = pc.subtract(pc.cast(end, pa.int64()), pc.cast(start, pa.int64())).to_pylist()
    return micros


def _top_rows(batch: pa.RecordBatch) -> dict[str, int]:
    """Row position by trace id, for top-level rows whose trace id no other top-level row holds."""
    ids: list[str] = batch.column("trace_id").to_pylist()
    top: list[bool] = pc.is_null(batch.column("parent_row")).to_pylist()
    rows: dict[str, int] = {}
    twice: set[str] = set()
    for index, (trace_id, is_top) in enumerate(zip(ids, top, strict=True)):
        if not is_top:
            continue
        if trace_id in rows:
            twice.add(trace_id)
        rows[trace_id] = index
    for trace_id in twice:
        del rows[trace_id]
    return rows
