"""SDK spans -> plain Python column lists of schema v1 (the pyarrow-free half of the write path).

`span_columns` fills one list per column for a batch; `batches.encode_spans` turns the lists
into Arrow arrays. The batch, not the span, is the unit of work wherever that measured cheaper
(`benchmarks/bench_recorder.py`; the numbers are in `benchmarks/RESULTS.md`):

- each column is one list comprehension over the batch instead of thirty appends per span;
- a span's attributes are read once; the small ones are not copied at all when the span has no
  large payload (the common case for tool and agent spans), and attribute keys are classified
  once per process through a cached table;
- promoted columns are one `dict.get` comprehension per candidate key over the whole batch;
- the small attributes of the whole batch are JSON-encoded in ONE encoder call and the text is
  cut back into per-span objects (see `dumps_many`);
- events and links (absent on most spans) cost no Python object per span when a batch has none.

Every attribute still lands exactly once in either the `attributes` JSON or `large_attributes`,
and promoted columns are copies taken from all attributes, as `schema.py` specifies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from opentelemetry.trace import SpanKind, StatusCode

from evaltrace.collector.runfiles import jsonvalue
from evaltrace.collector.runfiles.schema import (
    LARGE_ATTRIBUTE_KEYS,
    LARGE_ATTRIBUTE_PREFIXES,
    LARGE_VALUE_BYTES,
    PROMOTED_INT_KEYS,
    PROMOTED_STRING_KEYS,
)

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


class Redactor(Protocol):
    """What the encoders need of a redactor (capture's `redact.Redactor` is the one in use).

    Declared here so the store's encoders depend on no writer: capture builds the redactor from
    its settings and hands it in.
    """

    def apply(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """The attributes as they may be written (content stripped or masked)."""

    def mask_text(self, text: str) -> str:
        """A name with the configured patterns masked."""

    def status_message(self, text: str | None) -> str | None:
        """A status message as it may be written."""


# A str of fewer than LARGE_VALUE_BYTES / 4 characters cannot reach the threshold in UTF-8.
_MIN_CHARS_FOR_LARGE = LARGE_VALUE_BYTES // 4
_KIND_NAMES = {kind: kind.name for kind in SpanKind}
_STATUS_NAMES = {code: code.name for code in StatusCode}
# check_circular off: attribute values are flat primitives or sequences of them, never cyclic.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)
_BOUNDARY = '}, {"'  # between two non-empty objects in the JSON text of a list of objects
_MISSING: Any = object()


class _LargeKeys(dict[str, bool]):
    """Attribute key -> is a payload key (`LARGE_ATTRIBUTE_KEYS` or a payload prefix).

    A dict subclass so a known key costs one C-level lookup; `__missing__` classifies new keys.
    The cache is bounded: keys with indexes in them (`gen_ai.prompt.17.content`) are unbounded.
    """

    limit = 10_000

    def __missing__(self, key: str) -> bool:
        large = key in LARGE_ATTRIBUTE_KEYS or key.startswith(LARGE_ATTRIBUTE_PREFIXES)
        if len(self) < self.limit:
            self[key] = large
        return large


_LARGE_KEYS = _LargeKeys()


def _long_text(value: str) -> bool:
    """Whether a string value reaches the large-payload size (in UTF-8 bytes)."""
    n = len(value)
    if n >= LARGE_VALUE_BYTES:
        return True
    return n >= _MIN_CHARS_FOR_LARGE and len(value.encode("utf-8", "surrogatepass")) >= LARGE_VALUE_BYTES


def _as_str(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float)):
        return str(value)
    return None  # a sequence has no single string form; the JSON keeps it


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _as_int(value: Any) -> int | None:
    """An int64 column value, or None: a value the column cannot hold must not fail the batch."""
    number: int | None = None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and len(text := value.strip()) <= 20:
        digits = text.removeprefix("-")
        number = int(text) if digits.isascii() and digits.isdigit() else None
    return number if number is not None and _INT64_MIN <= number <= _INT64_MAX else None


def dumps_one(attributes: Mapping[str, Any]) -> str:
    """JSON object text of attributes; non-finite floats and non-JSON values via `jsonvalue.dumps`."""
    try:
        return _ENCODER.encode(attributes)
    except (ValueError, TypeError):
        return jsonvalue.dumps(attributes)


def dumps_many(objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """`dumps_one` of each mapping, with one encoder call for the whole batch when possible.

    The list is encoded once and cut at each `}, {"`. Outside strings that sequence only occurs
    between two top-level objects (attribute values are never objects); inside a string a `"` is
    always escaped, except the closing quote of a value such as `"a}, {"`. Such a value makes
    the cut count too high, which is detected, and the batch is then encoded object by object.
    """
    out = ["{}"] * len(objects)
    filled = [i for i, obj in enumerate(objects) if obj]
    if not filled:
        return out
    try:
        text = _ENCODER.encode([objects[i] for i in filled])
    except (ValueError, TypeError):  # a non-finite float or a non-JSON value somewhere
        return [dumps_one(obj) for obj in objects]
    pieces = text[3:-2].split(_BOUNDARY)  # text is '[{"' + pieces joined by the boundary + '}]'
    if len(pieces) != len(filled):
        return [dumps_one(obj) for obj in objects]
    for i, piece in zip(filled, pieces, strict=True):
        out[i] = '{"' + piece + "}"
    return out


def _raw_attributes(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes without copying them.

    The public `span.attributes` is a read-only proxy over the SDK's `BoundedAttributes`, whose
    item access runs in Python with a lock per call (~4 us per span measured). An ended span's
    `BoundedAttributes` is immutable, so its inner dict is read directly when the SDK has that
    layout; any other span object or SDK version copies the public mapping.
    """
    inner = getattr(getattr(span, "_attributes", None), "_dict", None)
    if inner.__class__ is dict:
        return inner
    attributes = span.attributes
    return dict(attributes) if attributes else {}


def _split(attributes: Mapping[str, Any]) -> tuple[Mapping[str, Any], list[tuple[str, str]] | None]:
    """(small attributes, large payloads or None); the input is returned as-is without payloads."""
    keys = _LARGE_KEYS
    large = [
        (k, v)
        for k, v in attributes.items()
        if isinstance(v, str) and (keys[k] or (len(v) >= _MIN_CHARS_FOR_LARGE and _long_text(v)))
    ]
    if not large:
        return attributes, None
    moved = {k for k, _ in large}
    return {k: v for k, v in attributes.items() if k not in moved}, large


def _promoted_column(raws: list[Mapping[str, Any]], keys: tuple[str, ...], is_int: bool) -> list[Any]:
    """Values of one promoted column: the first present key in priority order, converted."""
    values = [a.get(keys[0], _MISSING) for a in raws]
    for key in keys[1:]:
        values = [a.get(key, _MISSING) if v is _MISSING else v for v, a in zip(values, raws, strict=True)]
    if is_int:
        return [
            v if v.__class__ is int and _INT64_MIN <= v <= _INT64_MAX else (None if v is _MISSING else _as_int(v))
            for v in values
        ]
    return [v if v.__class__ is str else (None if v is _MISSING else _as_str(v)) for v in values]


def _attribute_columns(spans: Sequence[ReadableSpan], redactor: Redactor | None) -> dict[str, list[Any]]:
    """`attributes`, `large_attributes` and the promoted columns of a batch."""
    if redactor is None:
        raws = [_raw_attributes(s) for s in spans]
    else:
        raws = [redactor.apply(a) if (a := s.attributes) else {} for s in spans]
    split = [_split(a) for a in raws]
    columns = {column: _promoted_column(raws, keys, False) for column, keys in PROMOTED_STRING_KEYS.items()}
    columns.update({column: _promoted_column(raws, keys, True) for column, keys in PROMOTED_INT_KEYS.items()})
    columns["attributes"] = dumps_many([small for small, _ in split])
    columns["large_attributes"] = [large for _, large in split]
    return columns


class _Resources:
    """JSON and service name per resource object: a process has one resource, so encode it once.

    The resource's attributes are redacted like a span's (its `service.name` too, before it
    becomes the `service_name` column).
    """

    def __init__(self, redactor: Redactor | None) -> None:
        self._redactor = redactor
        self._last: Any = _MISSING
        self._value: tuple[str | None, str | None] = (None, None)

    def get(self, resource: Any) -> tuple[str | None, str | None]:
        if resource is self._last:
            return self._value
        value: tuple[str | None, str | None] = (None, None)
        if resource is not None:
            attributes = resource.attributes
            if self._redactor is not None:
                attributes = self._redactor.apply(attributes)
            service = attributes.get("service.name")
            value = (jsonvalue.dumps(attributes), service if isinstance(service, str) else None)
        self._last, self._value = resource, value
        return value


def _base_columns(spans: Sequence[ReadableSpan], run_id: str, redactor: Redactor | None) -> dict[str, list[Any]]:
    ctxs = [s.context for s in spans]
    parents = [s.parent for s in spans]
    statuses = [s.status for s in spans]
    scopes = [s.instrumentation_scope for s in spans]
    start = [s.start_time or 0 for s in spans]
    end = [e or s for s, e in zip(start, [s.end_time for s in spans], strict=True)]
    resources = _Resources(redactor)
    res = [resources.get(s.resource) for s in spans]
    columns: dict[str, list[Any]] = {
        "trace_id": [f"{c.trace_id:032x}" for c in ctxs],
        "span_id": [f"{c.span_id:016x}" for c in ctxs],
        "parent_span_id": [f"{p.span_id:016x}" if p is not None else None for p in parents],
        "name": [s.name for s in spans],
        "kind": [_KIND_NAMES[s.kind] for s in spans],
        "status_code": [_STATUS_NAMES[st.status_code] for st in statuses],
        "status_message": [st.description or None for st in statuses],
        "start_time": start,
        "end_time": end,
        "duration_ns": [e - s for s, e in zip(start, end, strict=True)],
        "run_id": [run_id] * len(spans),
        "service_name": [r[1] for r in res],
        "scope_name": [sc.name if sc is not None else None for sc in scopes],
        "scope_version": [(sc.version or None) if sc is not None else None for sc in scopes],
        "resource": [r[0] for r in res],
        "dropped_attributes_count": [s.dropped_attributes for s in spans],
        "dropped_events_count": [s.dropped_events for s in spans],
        "dropped_links_count": [s.dropped_links for s in spans],
    }
    if redactor is not None:
        _redact_texts(columns, redactor)
    return columns


def _redact_texts(columns: dict[str, list[Any]], redactor: Redactor) -> None:
    """Mask span and scope names and redact status messages, in place (names keep unmatched text)."""
    for column in ("name", "scope_name", "scope_version"):
        columns[column] = [redactor.mask_text(v) if v else v for v in columns[column]]
    columns["status_message"] = [redactor.status_message(v) for v in columns["status_message"]]


def _attributes_json(attributes: Any, redactor: Redactor | None) -> str:
    if not attributes:
        return "{}"
    return dumps_one(redactor.apply(attributes) if redactor is not None else dict(attributes))


def _events(span: ReadableSpan, redactor: Redactor | None) -> list[dict[str, Any]]:
    return [
        {
            "time": e.timestamp,
            "name": redactor.mask_text(e.name) if redactor is not None else e.name,
            "attributes": _attributes_json(e.attributes, redactor),
        }
        for e in span.events
    ]


def _links(span: ReadableSpan, redactor: Redactor | None) -> list[dict[str, Any]]:
    return [
        {
            "trace_id": f"{lk.context.trace_id:032x}",
            "span_id": f"{lk.context.span_id:016x}",
            "attributes": _attributes_json(lk.attributes, redactor),
        }
        for lk in span.links
    ]


class Columns(NamedTuple):
    """Column lists of one batch, by schema column name, plus the nested columns.

    `events` / `links` are None when no span of the batch has any (the common case), so the
    Arrow side can build n empty lists without a Python object per span.
    """

    flat: dict[str, list[Any]]
    events: list[list[dict[str, Any]]] | None
    links: list[list[dict[str, Any]]] | None


def _any_nested(spans: Sequence[ReadableSpan], private: str, public: str) -> bool:
    """Whether any span has events (or links).

    The public `span.events` / `span.links` copy the SDK's locked `BoundedList` into a new tuple
    on every access (~1 us per span each, measured); its length is enough here. A span object
    without the SDK's `_events` / `_links` storage falls back to the public property.
    """
    for span in spans:
        stored = getattr(span, private, _MISSING)
        if stored is _MISSING:
            stored = getattr(span, public)
        if stored:
            return True
    return False


def span_columns(spans: Sequence[ReadableSpan], run_id: str, redactor: Redactor | None) -> Columns:
    """Read a batch of ended SDK spans into schema-v1 column lists (redaction applied first).

    With a redactor, everything the file holds about a span passes through it: attributes of the
    span, its events, links and resource; span, event and scope names; status messages.
    """
    flat = _base_columns(spans, run_id, redactor)
    flat.update(_attribute_columns(spans, redactor))
    has_events = _any_nested(spans, "_events", "events")
    has_links = _any_nested(spans, "_links", "links")
    return Columns(
        flat,
        [_events(s, redactor) for s in spans] if has_events else None,
        [_links(s, redactor) for s in spans] if has_links else None,
    )
