"""The Arrow/Parquet layout of log-record files (logs schema version 1) and their encoding.

OTel log records (GenAI events such as `gen_ai.user.message` or `gen_ai.choice`) are written to
their own files beside the span files, one row per record. A record keeps its trace and span ids
(hex, null when it was emitted outside a span), times, severity, event name (the SDK's
`event_name`, else the `event.name` attribute), body and attributes (JSON text, after redaction),
run id, service and resource. `log_id` (writer id + a per-writer sequence number) names each
record, so readers drop copies of a record found in two files.

Redaction applies to the body and the attributes as it does to span attributes: a body that is
a map is redacted key by key (so `content` goes with `EVALTRACE_CAPTURE_CONTENT=0` and a
`message` or `tool_calls` value keeps its structure without its content); any other body is
treated as content. Nested values are handed to the `Redactor` as JSON text, the form it strips
and masks, and decoded again after.
"""

from __future__ import annotations

import pyarrow as pa

from evaltrace.collector.runfiles.schema import (
    LOG_COLUMNS,
)

_TS = pa.timestamp("ns", tz="UTC")
# Every column is a string but these.
_TYPES: dict[str, pa.DataType] = {
    "trace_flags": pa.int32(),
    "time": _TS,
    "observed_time": _TS,
    "severity_number": pa.int32(),
    "dropped_attributes_count": pa.int32(),
}
_NOT_NULL = {"observed_time", "attributes", "log_id"}
LOGS_SCHEMA = pa.schema([pa.field(c, _TYPES.get(c, pa.string()), nullable=c not in _NOT_NULL) for c in LOG_COLUMNS])
