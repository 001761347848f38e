"""The traces table: the converter's output (`Trace` records) as a versioned Arrow table.

One row per `Trace`, nested agents included. Scalar fields are columns of their own; usage is a
struct; tool calls, iterations (with their messages and their own tool calls) and tool schemas are
nested `list<struct>` columns. Values the records type as `Any` (tool arguments and results,
message-part arguments and results, tool-schema parameters, `attributes`) are stored as JSON text
in `*_json` columns, so the table is queryable (DuckDB's `json_extract`, `->>`) and converts back
exactly. Times are UTC timestamps with microsecond precision, as the converter makes them.

Nested agents. Arrow types cannot nest a trace inside its own tool calls, so a nested agent run
(`ToolCall.child`) is a row of its own, referenced by row number: every row has `row` (its
position in the table, from 0), `top_row` (the row of the top-level trace it belongs to; its own
for a top-level trace) and `parent_row` (null for a top-level trace, else the row of the trace
whose tool call started it); each tool-call struct has `child_row`. A top-level trace's rows are
contiguous and come first: `WHERE parent_row IS NULL` lists the runs `read_traces` yields, in order.

An iteration's tool calls. The converter lists each call twice, in `Trace.tool_calls` and in its
iteration's `tool_calls`, as the same object: a table row stores it once, in the trace's
`tool_calls`. An iteration has `tool_call_positions`, its calls in order as positions (from 0) in
the trace's `tool_calls` followed by the iteration's `other_tool_calls` (calls its trace does not
list, such as the call that gave the run's answer); a call is decoded once and listed in both
places again, as the converter listed it.

Version. `TABLE_VERSION` is stored in the schema's metadata under `evaltrace.traces_table_version`
and bumped whenever a column is added, removed or changes meaning; a reader refuses other versions
(the cache then rebuilds).

`from_table(to_table(traces)) == traces` for any records whose `Any` values are JSON values and
whose integers fit in 64 bits; `TableEncoder.add` raises otherwise (the cache then goes without).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

import pyarrow as pa

from evaltrace.collector.traces._table_columns import ColumnBuilder, RowFill
from evaltrace.collector.traces._table_decode import bare_calls
from evaltrace.collector.traces._table_decode import iter_traces as _decode
from evaltrace.collector.traces._table_encode import comparable_text
from evaltrace.collector.traces.records import Trace

__all__ = [
    "METADATA_VERSION_KEY",
    "SCHEMA",
    "TABLE_VERSION",
    "TableEncoder",
    "bare_calls",
    "comparable_text",
    "from_table",
    "iter_table_traces",
    "to_table",
]

TABLE_VERSION: Final = "3"
"""The traces table's schema version (see the module docstring)."""
METADATA_VERSION_KEY: Final = b"evaltrace.traces_table_version"

_TS = pa.timestamp("us", tz="UTC")
_STR = pa.string()
_INT = pa.int64()

USAGE_TYPE = pa.struct(
    [
        ("input_tokens", _INT),
        ("output_tokens", _INT),
        ("cache_read_tokens", _INT),
        ("reasoning_tokens", _INT),
    ]
)
PART_TYPE = pa.struct(
    [
        ("type", _STR),
        ("text", _STR),
        ("call_id", _STR),
        ("name", _STR),
        ("arguments_json", _STR),
        ("result_json", _STR),
        ("error", _STR),
    ]
)
MESSAGE_TYPE = pa.struct([("role", _STR), ("name", _STR), ("parts", pa.list_(PART_TYPE))])
CALL_TYPE = pa.struct(
    [
        ("call_id", _STR),
        ("name", _STR),
        ("arguments_json", _STR),
        ("arguments_truncated", pa.bool_()),
        ("result_json", _STR),
        ("error", _STR),
        ("iteration", _INT),
        ("span_id", _STR),
        ("start_time", _TS),
        ("end_time", _TS),
        ("handoff", pa.bool_()),
        ("child_row", _INT),
    ]
)
ITERATION_TYPE = pa.struct(
    [
        ("index", _INT),
        ("span_id", _STR),
        ("model", _STR),
        ("provider", _STR),
        ("input_messages", pa.list_(MESSAGE_TYPE)),
        ("output_messages", pa.list_(MESSAGE_TYPE)),
        ("tool_call_positions", pa.list_(_INT)),
        ("other_tool_calls", pa.list_(CALL_TYPE)),
        ("finish_reasons", pa.list_(_STR)),
        ("usage", USAGE_TYPE),
        ("start_time", _TS),
        ("end_time", _TS),
        ("error", _STR),
        ("stop_reason", _STR),
        ("merged_span_ids", pa.list_(_STR)),
        ("duplicate_call_ids", pa.list_(_STR)),
    ]
)
TOOL_SCHEMA_TYPE = pa.struct([("name", _STR), ("description", _STR), ("parameters_json", _STR)])

SCHEMA: Final = pa.schema(
    [
        pa.field("row", _INT, nullable=False),
        pa.field("top_row", _INT, nullable=False),
        pa.field("parent_row", _INT),
        pa.field("trace_id", _STR, nullable=False),
        pa.field("root_span_id", _STR),
        pa.field("name", _STR),
        pa.field("agent_name", _STR),
        pa.field("case_id", _STR),
        pa.field("conversation_id", _STR),
        pa.field("run_id", _STR),
        pa.field("service_name", _STR),
        pa.field("convention", _STR),
        pa.field("status", _STR, nullable=False),
        pa.field("input", _STR),
        pa.field("output", _STR),
        pa.field("error", _STR),
        pa.field("start_time", _TS),
        pa.field("end_time", _TS),
        pa.field("usage", USAGE_TYPE, nullable=False),
        pa.field("models", pa.list_(_STR), nullable=False),
        pa.field("span_count", _INT, nullable=False),
        pa.field("tool_calls", pa.list_(CALL_TYPE), nullable=False),
        pa.field("iterations", pa.list_(ITERATION_TYPE), nullable=False),
        pa.field("tool_schemas", pa.list_(TOOL_SCHEMA_TYPE), nullable=False),
        pa.field("handoffs", pa.list_(_STR), nullable=False),
        pa.field("warnings", pa.list_(_STR), nullable=False),
        pa.field("attributes_json", _STR, nullable=False),
    ],
    metadata={METADATA_VERSION_KEY: TABLE_VERSION.encode()},
)
"""The traces table's columns (see the module docstring for the row references)."""


class TableEncoder:
    """Turns `Trace` records into record batches of the traces table, numbering rows across calls.

    Feed it the traces in order (`add`), and take the batches when convenient (`take`): a
    writer streaming a large run takes a batch every few hundred traces, so memory holds one batch.
    """

    def __init__(self) -> None:
        self._rows = ColumnBuilder(SCHEMA)

    def add(self, trace: Trace) -> None:
        """Add one top-level trace and its nested agents' traces as rows.

        Raises:
            TypeError, ValueError: a value the table cannot hold (`Any` content that is not JSON).
        """
        self._rows.add(trace)

    def add_row(self, fill: RowFill) -> None:
        """Add one top-level row (no nested agents) that `fill` appends to the columns (`_flat_columns.py`)."""
        self._rows.add_row(fill)

    @property
    def pending(self) -> int:
        """Rows added since the last `take`."""
        return self._rows.rows

    def take(self) -> pa.RecordBatch:
        """The rows added since the last call, as one record batch of `SCHEMA`.

        Raises:
            pa.ArrowException, OverflowError: a value that does not fit its column (a 65-bit
                integer, a string with a lone surrogate).
        """
        return self._rows.take()


def to_table(traces: Iterable[Trace]) -> pa.Table:
    """The traces table of `traces` (top-level traces in the order given)."""
    encoder = TableEncoder()
    for trace in traces:
        encoder.add(trace)
    return pa.Table.from_batches([encoder.take()], schema=SCHEMA)


def iter_table_traces(batches: Iterable[pa.RecordBatch]) -> Iterator[Trace]:
    """The top-level traces of traces-table batches, in row order, their nested agents attached.

    Records are built without validation (`_table_decode.py`): the table is trusted, since
    evaltrace wrote it and the reader checked its version.
    """
    return _decode(batches)


def from_table(table: pa.Table) -> list[Trace]:
    """The top-level traces of a traces table (see `iter_table_traces`)."""
    return list(iter_table_traces(table.to_batches()))
