"""The Arrow/Parquet layout of schema version 1 (the only module that defines pyarrow types).

See `_schema.py` for the column names and why promoted columns and a large-payload map exist.
"""

from __future__ import annotations

import pyarrow as pa

from evaltrace.collector._schema import BASE_COLUMNS, PROMOTED_INT_KEYS, PROMOTED_STRING_KEYS

_TS = pa.timestamp("ns", tz="UTC")
_BASE_TYPES: dict[str, pa.DataType] = {
    "trace_id": pa.string(),
    "span_id": pa.string(),
    "parent_span_id": pa.string(),
    "name": pa.string(),
    "kind": pa.string(),
    "status_code": pa.string(),
    "status_message": pa.string(),
    "start_time": _TS,
    "end_time": _TS,
    "duration_ns": pa.int64(),
    "run_id": pa.string(),
    "service_name": pa.string(),
    "scope_name": pa.string(),
    "scope_version": pa.string(),
    "resource": pa.string(),
}
EVENT_TYPE = pa.struct([("time", _TS), ("name", pa.string()), ("attributes", pa.string())])
LINK_TYPE = pa.struct([("trace_id", pa.string()), ("span_id", pa.string()), ("attributes", pa.string())])
_NOT_NULL = {"trace_id", "span_id", "name", "kind", "status_code", "start_time", "end_time"}

SCHEMA = pa.schema(
    [pa.field(c, _BASE_TYPES[c], nullable=c not in _NOT_NULL) for c in BASE_COLUMNS]
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
