"""The Arrow/Parquet layout of schema version 1 (the only module that defines pyarrow types).

See `_schema.py` for the column names and why promoted columns and a large-payload map exist.
This module also holds the write side: `encode_spans` turns one batch of SDK spans straight into
an Arrow record batch (no span objects or per-span dicts are kept), and `write_parquet` writes
buffered batches as one complete, sorted Parquet file. It is the only writer-side module that
imports pyarrow, so pyarrow's untyped API stays confined here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from evaltrace.collector._jsonvalue import dumps_attributes
from evaltrace.collector._schema import (
    BASE_COLUMNS,
    LARGE_ATTRIBUTE_KEYS,
    LARGE_ATTRIBUTE_PREFIXES,
    LARGE_VALUE_BYTES,
    PROMOTED_INT_KEYS,
    PROMOTED_STRING_KEYS,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from evaltrace.collector._redact import Redactor

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

ROW_GROUP_SIZE = 64 * 1024
ZSTD_LEVEL = 3
_SORT_KEYS = [("trace_id", "ascending"), ("start_time", "ascending")]
# A str of fewer than LARGE_VALUE_BYTES / 4 characters cannot reach the threshold in UTF-8.
_MIN_CHARS_FOR_LARGE = LARGE_VALUE_BYTES // 4


def is_large(key: str, value: object) -> bool:
    """Whether a string attribute goes to `large_attributes` (non-strings always stay in JSON)."""
    if not isinstance(value, str):
        return False
    if key in LARGE_ATTRIBUTE_KEYS or key.startswith(LARGE_ATTRIBUTE_PREFIXES):
        return True
    n = len(value)
    if n >= LARGE_VALUE_BYTES:
        return True
    return n >= _MIN_CHARS_FOR_LARGE and len(value.encode("utf-8", "surrogatepass")) >= LARGE_VALUE_BYTES


def _promoted_index() -> dict[str, tuple[str, int, bool]]:
    """Attribute key -> (column, priority, is_int): one dict lookup per attribute, not per candidate."""
    index: dict[str, tuple[str, int, bool]] = {}
    for columns, is_int in ((PROMOTED_STRING_KEYS, False), (PROMOTED_INT_KEYS, True)):
        for column, keys in columns.items():
            for priority, key in enumerate(keys):
                index.setdefault(key, (column, priority, is_int))
    return index


_PROMOTED_INDEX = _promoted_index()
_PROMOTED_COLUMNS = tuple(PROMOTED_STRING_KEYS) + tuple(PROMOTED_INT_KEYS)


def _as_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    return None  # a sequence has no single string form; the JSON keeps it


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _promoted(attributes: dict[str, Any]) -> dict[str, Any]:
    """Promoted column values: for each column, the first present key in its priority order."""
    best: dict[str, tuple[int, Any]] = {}
    for key, value in attributes.items():
        hit = _PROMOTED_INDEX.get(key)
        if hit is None:
            continue
        column, priority, is_int = hit
        if column not in best or priority < best[column][0]:
            best[column] = (priority, _as_int(value) if is_int else _as_str(value))
    return {column: found[1] for column, found in best.items()}


def _dumps(attributes: dict[str, Any]) -> str:
    # Fast path: plain json.dumps gives the same text as `dumps_attributes` unless a value is a
    # non-finite float (ValueError) or not JSON-native (TypeError); those take the full encoder.
    try:
        return json.dumps(attributes, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError):
        return dumps_attributes(attributes)


def _split_attributes(attributes: dict[str, Any]) -> tuple[str, list[tuple[str, str]] | None]:
    small: dict[str, Any] = {}
    large: list[tuple[str, str]] = []
    for key, value in attributes.items():
        if is_large(key, value):
            large.append((key, value))
        else:
            small[key] = value
    return _dumps(small), (large or None)


def _attrs(raw: Mapping[str, Any] | None, redactor: Redactor | None) -> dict[str, Any]:
    if not raw:
        return {}
    return redactor.apply(raw) if redactor is not None else dict(raw)


def _events(span: ReadableSpan, redactor: Redactor | None) -> list[dict[str, Any]]:
    return [
        {"time": e.timestamp, "name": e.name, "attributes": _dumps(_attrs(e.attributes, redactor))} for e in span.events
    ]


def _links(span: ReadableSpan, redactor: Redactor | None) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": f"{lk.context.trace_id:032x}",
            "span_id": f"{lk.context.span_id:016x}",
            "attributes": _dumps(_attrs(lk.attributes, redactor)),
        }
        for lk in span.links
    ]


class _ResourceCache:
    """JSON and service name per resource object: a process has one resource, so encode it once."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[str | None, str | None]] = {}

    def get(self, resource: Any) -> tuple[str | None, str | None]:
        if resource is None:
            return None, None
        found = self._by_id.get(id(resource))
        if found is None:
            attributes = resource.attributes
            service = attributes.get("service.name")
            found = (dumps_attributes(attributes), service if isinstance(service, str) else None)
            self._by_id[id(resource)] = found
        return found


def _add_span(cols: dict[str, list[Any]], span: ReadableSpan, run_id: str, redactor: Redactor | None, res: Any) -> None:
    ctx = span.context
    assert ctx is not None  # spans reaching an exporter always carry a context
    start = span.start_time or 0
    end = span.end_time or start
    scope = span.instrumentation_scope
    attributes = _attrs(span.attributes, redactor)
    small, large = _split_attributes(attributes)
    status = span.status
    cols["trace_id"].append(f"{ctx.trace_id:032x}")
    cols["span_id"].append(f"{ctx.span_id:016x}")
    cols["parent_span_id"].append(f"{span.parent.span_id:016x}" if span.parent is not None else None)
    cols["name"].append(span.name)
    cols["kind"].append(span.kind.name)
    cols["status_code"].append(status.status_code.name)
    cols["status_message"].append(status.description or None)
    cols["start_time"].append(start)
    cols["end_time"].append(end)
    cols["duration_ns"].append(end - start)
    cols["run_id"].append(run_id)
    cols["service_name"].append(res[1])
    cols["scope_name"].append(scope.name if scope is not None else None)
    cols["scope_version"].append((scope.version or None) if scope is not None else None)
    cols["resource"].append(res[0])
    cols["attributes"].append(small)
    cols["large_attributes"].append(large)
    cols["events"].append(_events(span, redactor) if span.events else [])
    cols["links"].append(_links(span, redactor) if span.links else [])
    cols["dropped_attributes_count"].append(span.dropped_attributes)
    cols["dropped_events_count"].append(span.dropped_events)
    cols["dropped_links_count"].append(span.dropped_links)
    promoted = _promoted(attributes)
    for column in _PROMOTED_COLUMNS:
        cols[column].append(promoted.get(column))


class _Columns:
    """Column lists for one batch; filled span by span, then turned into Arrow arrays once."""

    def __init__(self) -> None:
        self.data: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}

    def to_batch(self) -> Any:
        arrays = [pa.array(self.data[f.name], type=f.type) for f in SCHEMA]
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


def encode_spans(spans: Sequence[ReadableSpan], run_id: str, redaction: Redactor | None = None) -> Any:
    """Encode one batch of ended SDK spans as an Arrow `RecordBatch` in the v1 `SCHEMA`.

    Args:
        spans: the spans handed to `SpanExporter.export`.
        run_id: the label stored in every row's `run_id`.
        redaction: applied to span, event and link attributes before anything is encoded.

    Returns:
        A `pyarrow.RecordBatch` with one row per span, columns in `SCHEMA` order.
    """
    columns = _Columns()
    resources = _ResourceCache()
    for span in spans:
        _add_span(columns.data, span, run_id, redaction, resources.get(span.resource))
    return columns.to_batch()


def batch_rows(batch: Any) -> int:
    """Number of rows of a batch returned by `encode_spans`."""
    return int(batch.num_rows)


def write_parquet(batches: Sequence[Any], path: str, metadata: Mapping[str, str]) -> int:
    """Write `batches` as one Parquet file at `path`, sorted by (trace_id, start_time).

    zstd level 3 and 64 Ki-row groups: the best size/speed balance measured for this layout.

    Returns:
        The number of rows written.
    """
    table = pa.Table.from_batches(list(batches), schema=SCHEMA).sort_by(_SORT_KEYS)
    table = table.replace_schema_metadata({k.encode(): v.encode() for k, v in metadata.items()})
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=ZSTD_LEVEL,
        row_group_size=ROW_GROUP_SIZE,
        use_dictionary=True,
        write_statistics=True,
    )
    return int(table.num_rows)


def promoted_keys_json() -> str:
    """The promoted-column mapping of this schema version, for the file metadata."""
    return json.dumps({**PROMOTED_STRING_KEYS, **PROMOTED_INT_KEYS}, separators=(",", ":"))
