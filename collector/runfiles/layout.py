"""The Arrow/Parquet layout of schema version 1 (the only module that defines pyarrow types).

See `schema.py` for the column names and why promoted columns and a large-payload map exist.
This module also holds the write side's settings: `write_parquet` writes buffered batches as one
complete Parquet file, `PARQUET_OPTIONS` are the settings every run file is written with, and
`file_metadata` is what a span file's footer says. (`batches.py` encodes SDK spans to batches.)
"""

from __future__ import annotations

import functools
import json
import os
import socket
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from evaltrace.collector.runfiles.schema import (
    BASE_COLUMNS,
    LOGS_SCHEMA_VERSION,
    METADATA_SCHEMA_VERSION,
    METADATA_SIGNAL,
    PROMOTED_INT_KEYS,
    PROMOTED_STRING_KEYS,
    SCHEMA_VERSION,
    SIGNAL_LOGS,
)

__all__ = [
    "EVENT_TYPE",
    "LINK_TYPE",
    "SCHEMA",
    "file_metadata",
    "promoted_keys_json",
    "write_parquet",
    "writer_version",
]

_TS = pa.timestamp("ns", tz="UTC")
# Every base column is a string but these.
_BASE_TYPES: dict[str, pa.DataType] = {"start_time": _TS, "end_time": _TS, "duration_ns": pa.int64()}
EVENT_TYPE = pa.struct([("time", _TS), ("name", pa.string()), ("attributes", pa.string())])
LINK_TYPE = pa.struct([("trace_id", pa.string()), ("span_id", pa.string()), ("attributes", pa.string())])
_NOT_NULL = {"trace_id", "span_id", "name", "kind", "status_code", "start_time", "end_time"}

SCHEMA = pa.schema(
    [pa.field(c, _BASE_TYPES.get(c, pa.string()), nullable=c not in _NOT_NULL) for c in BASE_COLUMNS]
    + [pa.field(c, pa.string()) for c in PROMOTED_STRING_KEYS]
    + [pa.field(c, pa.int64()) for c in PROMOTED_INT_KEYS]
    + [
        pa.field("attributes", pa.string(), nullable=False),
        pa.field("large_attributes", pa.map_(pa.string(), pa.string())),
        pa.field("events", pa.list_(EVENT_TYPE)),
        pa.field("links", pa.list_(LINK_TYPE)),
        pa.field("dropped_attributes_count", pa.int32()),
        pa.field("dropped_events_count", pa.int32()),
        pa.field("dropped_links_count", pa.int32()),
    ]
)

# The recorder's Arrow buffers come from the C library's malloc, not pyarrow's default pool
# (mimalloc in the wheels): batches are kept until the roll, so nearly every conversion takes
# fresh memory, and fresh memory from mimalloc cost the exporter ~19 us more per span on the
# recorder benchmark (benchmarks/RESULTS.md). Passed explicitly, so the app's own pyarrow use
# keeps its default pool. (The CLI makes the same choice for its reads, see `cli/main.py`.)
MEMORY_POOL = pa.system_memory_pool()

ROW_GROUP_SIZE = 64 * 1024
ZSTD_LEVEL = 3
PARQUET_OPTIONS: Final[dict[str, Any]] = {
    "compression": "zstd",
    "compression_level": ZSTD_LEVEL,
    "use_dictionary": True,
    "write_statistics": True,
    "memory_pool": MEMORY_POOL,
}
"""How every run file is written, whole (`write_parquet`) or batch by batch (`filesink.py`)."""


def write_parquet(
    batches: Sequence[Any], path: str, metadata: Mapping[str, str], schema: pa.Schema | None = None
) -> int:
    """Write `batches` as one Parquet file at `path`, rows in export order.

    zstd level 3 and 64 Ki-row groups: the best size/speed balance measured for this layout.
    The rows are not sorted by (trace_id, start_time): on the benchmark's agent workload export
    order compresses 25% smaller (a session's turns, which repeat each other's histories, stay
    adjacent instead of being scattered by random trace ids) and saves the sort's copy of every
    column, while a file rarely has more than one row group for a sort to help lookups.

    Returns:
        The number of rows written.
    """
    table = pa.Table.from_batches(list(batches), schema=SCHEMA if schema is None else schema)
    table = table.replace_schema_metadata({k.encode(): v.encode() for k, v in metadata.items()})
    pq.write_table(table, path, row_group_size=ROW_GROUP_SIZE, **PARQUET_OPTIONS)
    return int(table.num_rows)


def promoted_keys_json() -> str:
    """The promoted-column mapping of this schema version, for the file metadata."""
    return json.dumps({**PROMOTED_STRING_KEYS, **PROMOTED_INT_KEYS}, separators=(",", ":"))


@functools.cache
def writer_version() -> str:
    """The evaltrace version that writes files, for their metadata."""
    try:
        from importlib.metadata import version

        return version("evaltrace")
    except Exception:  # a source checkout without metadata still records
        return "unknown"


def file_metadata(run_id: str, dropped: int, unwritten: int, *, logs: bool = False, **extra: str) -> dict[str, str]:
    """The key-value metadata every span file (with `logs`: log-record file) carries; `extra` adds `evaltrace.<key>`s.

    `dropped` and `unwritten` are the writer's loss counts so far (see `_parquet_read.LossTally`).
    """
    if logs:
        head = {METADATA_SIGNAL.decode(): SIGNAL_LOGS, METADATA_SCHEMA_VERSION.decode(): str(LOGS_SCHEMA_VERSION)}
    else:
        head = {METADATA_SCHEMA_VERSION.decode(): str(SCHEMA_VERSION)}
    lost = "log_records" if logs else "spans"
    return {
        **head,
        "evaltrace.writer_version": writer_version(),
        "evaltrace.host": socket.gethostname(),
        "evaltrace.pid": str(os.getpid()),
        "evaltrace.run_id": run_id,
        **({} if logs else {"evaltrace.promoted_keys": promoted_keys_json()}),
        f"evaltrace.dropped_{lost}": str(dropped),
        f"evaltrace.unwritten_{lost}": str(unwritten),
        **{f"evaltrace.{key}": value for key, value in extra.items()},
    }
