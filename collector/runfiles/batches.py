"""SDK spans and log records -> Arrow record batches in the store's layouts (the writers' encoders).

`encode_spans` turns one batch of ended SDK spans straight into an Arrow record batch (the span
reading is in `encode.py`; no span objects or per-span dicts are kept); `LogEncoder` does the same
for log records. Both apply redaction before anything is encoded. The layouts themselves (types,
file metadata, the Parquet writer) are `layout.py` and `logs_layout.py`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from evaltrace.collector.runfiles.encode import Redactor, span_columns
from evaltrace.collector.runfiles.jsonvalue import dumps
from evaltrace.collector.runfiles.layout import MEMORY_POOL, SCHEMA
from evaltrace.collector.runfiles.logs_layout import LOGS_SCHEMA
from evaltrace.collector.runfiles.schema import LOG_COLUMNS

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.trace import ReadableSpan


_EVENTS_TYPE = SCHEMA.field("events").type
_LINKS_TYPE = SCHEMA.field("links").type
_FLAT_FIELDS = [f for f in SCHEMA if f.name not in ("events", "links")]


def _empty_lists(n: int, list_type: pa.DataType) -> Any:
    """Build n empty (non-null) lists without a Python object per row."""
    offsets = pa.array([0] * (n + 1), type=pa.int32(), memory_pool=MEMORY_POOL)
    values = pa.array([], type=list_type.value_type, memory_pool=MEMORY_POOL)
    return pa.ListArray.from_arrays(offsets, values, type=list_type, pool=MEMORY_POOL)


def encode_spans(spans: Sequence[ReadableSpan], run_id: str, redaction: Redactor | None = None) -> Any:
    """Encode one batch of ended SDK spans as an Arrow `RecordBatch` in the v1 `SCHEMA`.

    Args:
        spans: the spans handed to `SpanExporter.export`.
        run_id: the label stored in every row's `run_id`.
        redaction: applied to span, event and link attributes before anything is encoded.

    Returns:
        A `pyarrow.RecordBatch` with one row per span, columns in `SCHEMA` order.
    """
    columns = span_columns(spans, run_id, redaction)
    arrays = {f.name: pa.array(columns.flat[f.name], type=f.type, memory_pool=MEMORY_POOL) for f in _FLAT_FIELDS}
    n = len(spans)
    for name, values, list_type in (("events", columns.events, _EVENTS_TYPE), ("links", columns.links, _LINKS_TYPE)):
        if values is None:
            arrays[name] = _empty_lists(n, list_type)
        else:
            arrays[name] = pa.array(values, type=list_type, memory_pool=MEMORY_POOL)
    return pa.RecordBatch.from_arrays([arrays[name] for name in SCHEMA.names], schema=SCHEMA)


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
        columns["severity_text"].append(self._mask(lr.severity_text))
        columns["event_name"].append(self._mask(str(event_name)) if event_name is not None else None)
        columns["body"].append(self._body(lr.body))
        columns["attributes"].append(dumps(self._redact(attributes)))
        columns["log_id"].append(f"{writer_id}-{next(self._ids)}")
        columns["run_id"].append(self.run_id)
        resource_text, service = _resource(record, resources, self.redactor)
        columns["service_name"].append(service)
        columns["resource"].append(resource_text)
        scope = record.instrumentation_scope
        columns["scope_name"].append(self._mask(scope.name) if scope is not None else None)
        columns["scope_version"].append(self._mask(scope.version) if scope is not None else None)
        columns["dropped_attributes_count"].append(record.dropped_attributes)

    def _body(self, body: Any) -> str | None:
        if body is None:
            return None
        if isinstance(body, Mapping):
            return dumps(self._redact(dict(body)))
        kept = self._redact({_BODY_KEY: body})
        return dumps(kept[_BODY_KEY]) if _BODY_KEY in kept else None

    def _mask(self, text: str | None) -> str | None:
        """A name or label masked like a span's name (severity text, event name, scope)."""
        return self.redactor.mask_text(text) if self.redactor is not None and text else text

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


def _resource(
    record: ReadableLogRecord, cache: dict[int, tuple[str, str | None]], redactor: Redactor | None
) -> tuple[str, str | None]:
    """The resource's JSON and service name, redacted like a span's resource (the service name too)."""
    resource = record.resource
    key = id(resource)
    found = cache.get(key)
    if found is None:
        attributes = dict(resource.attributes) if resource is not None else {}
        if redactor is not None and attributes:
            attributes = redactor.apply(attributes)
        service = attributes.get("service.name")
        found = cache[key] = (dumps(attributes), str(service) if service is not None else None)
    return found
