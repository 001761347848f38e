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

import base64
import itertools
import json
import math
import os
import socket
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from evaltrace.collector._parquet import MEMORY_POOL, write_parquet, writer_version
from evaltrace.collector._schema import (
    LOG_COLUMNS,
    LOGS_SCHEMA_VERSION,
    METADATA_SCHEMA_VERSION,
    METADATA_SIGNAL,
    SIGNAL_LOGS,
)

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord

    from evaltrace.collector._redact import Redactor

_TS = pa.timestamp("ns", tz="UTC")
_TYPES: dict[str, pa.DataType] = {
    "trace_id": pa.string(),
    "span_id": pa.string(),
    "trace_flags": pa.int32(),
    "time": _TS,
    "observed_time": _TS,
    "severity_number": pa.int32(),
    "severity_text": pa.string(),
    "event_name": pa.string(),
    "body": pa.string(),
    "attributes": pa.string(),
    "log_id": pa.string(),
    "run_id": pa.string(),
    "service_name": pa.string(),
    "scope_name": pa.string(),
    "scope_version": pa.string(),
    "resource": pa.string(),
    "dropped_attributes_count": pa.int32(),
}
_NOT_NULL = {"observed_time", "attributes", "log_id"}
LOGS_SCHEMA = pa.schema([pa.field(c, _TYPES[c], nullable=c not in _NOT_NULL) for c in LOG_COLUMNS])

# Where a body that is not a map goes for redaction: a key the Redactor treats as content.
_BODY_KEY = "content"


class LogEncoder:
    """Encodes batches of SDK log records for one writer (it numbers the records it encodes)."""

    def __init__(self, run_id: str, redactor: Redactor | None) -> None:
        self.run_id = run_id
        self.redactor = redactor
        self._ids = itertools.count(1)

    def encode(self, records: Sequence[ReadableLogRecord], writer_id: str) -> Any:
        """One `pyarrow.RecordBatch` in `LOGS_SCHEMA`, one row per record.

        `writer_id` prefixes each record's `log_id` (the writer's id changes in a forked child,
        so parent and child never number two records alike).
        """
        columns: dict[str, list[Any]] = {name: [] for name in LOG_COLUMNS}
        resources: dict[int, tuple[str, str | None]] = {}
        for record in records:
            self._row(record, columns, resources, writer_id)
        arrays = [pa.array(columns[f.name], type=f.type, memory_pool=MEMORY_POOL) for f in LOGS_SCHEMA]
        return pa.RecordBatch.from_arrays(arrays, schema=LOGS_SCHEMA)

    def _row(
        self,
        record: ReadableLogRecord,
        columns: dict[str, list[Any]],
        resources: dict[int, tuple[str, str | None]],
        writer_id: str,
    ) -> None:
        lr = record.log_record
        attributes = dict(lr.attributes or {})
        event_name = getattr(lr, "event_name", None) or attributes.get("event.name")
        trace_id, span_id = lr.trace_id, lr.span_id
        columns["trace_id"].append(f"{trace_id:032x}" if trace_id else None)
        columns["span_id"].append(f"{span_id:016x}" if span_id else None)
        columns["trace_flags"].append(int(lr.trace_flags) if lr.trace_flags is not None else None)
        columns["time"].append(lr.timestamp)
        columns["observed_time"].append(lr.observed_timestamp or lr.timestamp or 0)
        columns["severity_number"].append(lr.severity_number.value if lr.severity_number is not None else None)
        columns["severity_text"].append(lr.severity_text)
        columns["event_name"].append(str(event_name) if event_name is not None else None)
        columns["body"].append(self._body(lr.body))
        columns["attributes"].append(dumps(self._redact(attributes)))
        columns["log_id"].append(f"{writer_id}-{next(self._ids)}")
        columns["run_id"].append(self.run_id)
        resource_text, service = _resource(record, resources)
        columns["service_name"].append(service)
        columns["resource"].append(resource_text)
        scope = record.instrumentation_scope
        columns["scope_name"].append(scope.name if scope is not None else None)
        columns["scope_version"].append(scope.version if scope is not None else None)
        columns["dropped_attributes_count"].append(record.dropped_attributes)

    def _body(self, body: Any) -> str | None:
        if body is None:
            return None
        if isinstance(body, Mapping):
            return dumps(self._redact(dict(body)))
        kept = self._redact({_BODY_KEY: body})
        return dumps(kept[_BODY_KEY]) if _BODY_KEY in kept else None

    def _redact(self, mapping: dict[str, Any]) -> dict[str, Any]:
        if self.redactor is None or not mapping:
            return mapping
        # The Redactor strips and masks JSON text: nested values go to it as text, and come back.
        nested = {k for k, v in mapping.items() if isinstance(v, (Mapping, list, tuple)) and not _flat_strings(v)}
        flat = {k: (dumps(v) if k in nested else v) for k, v in mapping.items()}
        out = self.redactor.apply(flat)
        return {k: (_loads_or_text(v) if k in nested and isinstance(v, str) else v) for k, v in out.items()}


def _flat_strings(value: Any) -> bool:
    """A sequence of strings only, which the Redactor masks item by item (an attribute array)."""
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, str) for v in value)


def _loads_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # a mask pattern cut through the JSON syntax: keep the masked text
        return text


def _resource(record: ReadableLogRecord, cache: dict[int, tuple[str, str | None]]) -> tuple[str, str | None]:
    resource = record.resource
    key = id(resource)
    found = cache.get(key)
    if found is None:
        attributes = dict(resource.attributes) if resource is not None else {}
        service = attributes.get("service.name")
        found = cache[key] = (dumps(attributes), str(service) if service is not None else None)
    return found


def _plain(value: Any) -> Any:
    """`value` with bytes as text (base64 when not UTF-8) and non-finite floats as markers."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    return value


def dumps(value: Any) -> str:
    """JSON text of an OTel `AnyValue` (maps, arrays, scalars, bytes)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError):
        return json.dumps(_plain(value), ensure_ascii=False, allow_nan=False, default=str)


def batch_rows(batch: Any) -> int:
    """Rows of an encoded batch."""
    return int(batch.num_rows)


def write_logs_parquet(batches: Sequence[Any], path: str, metadata: Mapping[str, str]) -> int:
    """Write `batches` of log rows as one Parquet file at `path` (settings as for span files)."""
    return write_parquet(batches, path, metadata, LOGS_SCHEMA)


def logs_file_metadata(run_id: str, dropped: int, unwritten: int, **extra: str) -> dict[str, str]:
    """The key-value metadata of every log-record file (`extra` adds `evaltrace.<key>` entries)."""
    return {
        METADATA_SIGNAL.decode(): SIGNAL_LOGS,
        METADATA_SCHEMA_VERSION.decode(): str(LOGS_SCHEMA_VERSION),
        "evaltrace.writer_version": writer_version(),
        "evaltrace.host": socket.gethostname(),
        "evaltrace.pid": str(os.getpid()),
        "evaltrace.run_id": run_id,
        "evaltrace.dropped_log_records": str(dropped),
        "evaltrace.unwritten_log_records": str(unwritten),
        **{f"evaltrace.{key}": value for key, value in extra.items()},
    }
