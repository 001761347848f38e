"""OTLP/JSON requests -> the OTel SDK spans and log records, straight from the parsed JSON.

The same objects `decode.py` makes of a protobuf request (built by its `new_*` functions), with
no protobuf message in between: reading OTLP/JSON through protobuf's own JSON parser cost ~10x
the protobuf path (`benchmarks/RESULTS.md`, "OTLP/JSON straight to SDK objects"). The values
follow protobuf's JSON mapping (`jsonvalues.py`); lowerCamelCase keys and the proto field names
are both read, unknown fields are ignored (as the OTLP specification asks of receivers, so a newer
sender's request still reads). `tests/collector/otlp/test_otlp_json_direct.py` holds that both ways give
the same objects.

A receiver passes its `SpanLimits`: lists past them are cut before any SDK object is made of
them and counted as dropped, as `limits.py` does to a protobuf request.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.wire import decode
from evaltrace.collector.otlp.wire.jsonvalues import (
    UINT32,
    UINT64,
    Bad,
    any_value,
    array,
    attributes,
    enum,
    get,
    hex_id,
    integer,
    obj,
    text,
)
from evaltrace.collector.otlp.wire.limits import excess
from evaltrace.collector.otlp.wire.values import SPAN_ID_BYTES, TRACE_ID_BYTES, InvalidItem, optional_id, required_id
from evaltrace.collector.terminal import printable

T = TypeVar("T")
_Build = Callable[[dict[str, Any]], T]

_KIND_NAMES: Final = dict(trace_pb2.Span.SpanKind.items())
_STATUS_NAMES: Final = dict(trace_pb2.Status.StatusCode.items())
_SEVERITY_NAMES: Final = dict(logs_pb2.SeverityNumber.items())
# Each level of a request: its OTLP/JSON key, its proto field name (also valid JSON), and the
# place a rejected item is named by (the proto names, as `decode.py` names them).
_TRACE_LEVELS: Final = (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans", "spans"))
_LOGS_LEVELS: Final = (("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records"))


class NotJson(InputError):
    """Bytes that are not JSON text (a line cut short is one): `msg`, `line` and `column` say where."""

    def __init__(self, msg: str, line: int, column: int) -> None:
        super().__init__(f"not valid JSON ({msg} at line {line} column {column})")
        self.msg, self.line, self.column = msg, line, column


def loads(data: bytes) -> Any:
    """`data` parsed as UTF-8 JSON: the one JSON reader of OTLP/JSON requests and file lines.

    Raises:
        NotJson: not JSON syntax.
        InputError: not UTF-8, nested too deeply, or a number too long for Python to read.
    """
    try:
        # Decoded here: `json.loads` would guess UTF-16 or -32 from the bytes; OTLP/JSON is UTF-8.
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise NotJson(exc.msg, exc.lineno, exc.colno) from None
    except RecursionError:
        raise InputError("JSON nested too deeply") from None
    except ValueError:  # int() refuses more digits than sys.get_int_max_str_digits() (4300)
        raise InputError(f"a JSON number has more than {sys.get_int_max_str_digits()} digits") from None


def document(data: bytes) -> dict[str, Any]:
    """A request body parsed as JSON (one JSON object).

    Raises:
        InputError: not UTF-8, not JSON, or not a JSON object.
    """
    parsed = loads(data)
    if not isinstance(parsed, dict):
        raise InputError("not an OTLP/JSON request (expected a JSON object)")
    return parsed


def decode_spans(request: dict[str, Any], limits: SpanLimits | None = None) -> decode.Decoded[ReadableSpan]:
    """The spans of a parsed OTLP/JSON traces request; invalid ones counted in `rejected`.

    Raises:
        InputError: the request is not valid OTLP/JSON (naming the field).
    """
    return _decode(request, limits, _TRACE_LEVELS, _span)


def decode_log_records(request: dict[str, Any], limits: SpanLimits | None = None) -> decode.Decoded[ReadableLogRecord]:
    """The log records of a parsed OTLP/JSON logs request; invalid ones counted in `rejected` (raises as above)."""
    return _decode(request, limits, _LOGS_LEVELS, _log_record)


def _decode(
    request: dict[str, Any], limits: SpanLimits | None, levels: tuple[tuple[str, str], ...], build: Callable[..., T]
) -> decode.Decoded[T]:
    out: decode.Decoded[T] = decode.Decoded()
    hold = _Hold(limits, out)
    for places, resource, scope, items in _groups(request, levels):
        _collect(items, partial(build, resource=resource, scope=scope, hold=hold), places, out)
    return out


@dataclass
class _Hold:
    """The SDK's limits held while decoding (none when `limits` is None); what was cut goes to `out`."""

    limits: SpanLimits | None
    out: decode.Decoded[Any]

    def cut(self, items: list[Any], limit_name: str, counter: str) -> tuple[list[Any], int]:
        """`items` within the limit `limit_name` (a `SpanLimits` field), and how many were cut (added to `counter`)."""
        limit: int | None = getattr(self.limits, limit_name) if self.limits is not None else None
        extra = excess(len(items), limit)
        if not extra:
            return items, 0
        dropped = self.out.dropped
        setattr(dropped, counter, getattr(dropped, counter) + extra)
        return items[:limit], extra


def _groups(
    request: dict[str, Any], levels: tuple[tuple[str, str], ...]
) -> Iterator[tuple[tuple[str, str], Resource, InstrumentationScope, list[Any]]]:
    """Per scope: its items' place (JSON keys; proto names for rejections), resource, scope and items."""
    outer, middle, inner = levels
    place = f"{outer[0]}[0]"
    try:
        for r, resource_group in enumerate(array(get(request, *outer), outer[0])):
            place = f"{outer[0]}[{r}]"
            group = obj(resource_group, "")
            resource = _resource(group)
            for s, scope_group in enumerate(array(get(group, *middle), middle[0])):
                place = f"{outer[0]}[{r}].{middle[0]}[{s}]"
                scoped = obj(scope_group, "")
                items = array(get(scoped, *inner), inner[0])
                places = (f"{place}.{inner[0]}", f"{outer[1]}[{r}].{middle[1]}[{s}].{inner[1]}")
                yield places, resource, _scope(scoped), items
    except Bad as exc:
        raise _invalid(place, exc) from None
    except RecursionError:
        raise InputError(f"not a valid OTLP/JSON request: {place}: values nested too deeply") from None


def _collect(items: list[Any], build: _Build[T], places: tuple[str, str], out: decode.Decoded[T]) -> None:
    i = 0
    try:
        for i, item in enumerate(items):
            try:
                out.items.append(build(obj(item, "")))
            except InvalidItem as exc:
                out.reject(f"{places[1]}[{i}]", exc)
    except Bad as exc:
        raise _invalid(f"{places[0]}[{i}]", exc) from None
    except RecursionError:
        raise InputError("not a valid OTLP/JSON request: values nested too deeply") from None


def _invalid(place: str, exc: Bad) -> InputError:
    return InputError(f"not a valid OTLP/JSON request: {printable(exc.within(place))}")


def _resource(group: dict[str, Any]) -> Resource:
    message = obj(get(group, "resource", "resource"), "resource")
    return decode.ReceivedResource(
        attributes(get(message, "attributes", "attributes"), "resource.attributes"),
        text(get(group, "schemaUrl", "schema_url"), "schemaUrl"),
        integer(
            get(message, "droppedAttributesCount", "dropped_attributes_count"),
            "resource.droppedAttributesCount",
            UINT32,
        ),
    )


def _scope(scoped: dict[str, Any]) -> InstrumentationScope:
    message = obj(get(scoped, "scope", "scope"), "scope")
    return decode.new_scope(
        text(get(message, "name", "name"), "scope.name"),
        text(get(message, "version", "version"), "scope.version"),
        text(get(scoped, "schemaUrl", "schema_url"), "schemaUrl"),
        attributes(get(message, "attributes", "attributes"), "scope.attributes"),
    )


def _dropped(item: dict[str, Any], camel: str, snake: str, extra: int) -> int:
    """A dropped count with what the limits cut added (capped, as the uint32 field is)."""
    return min(integer(get(item, camel, snake), camel, UINT32) + extra, UINT32[1])


def _span(span: dict[str, Any], resource: Resource, scope: InstrumentationScope, hold: _Hold) -> ReadableSpan:
    attrs, cut_attrs = hold.cut(array(span.get("attributes"), "attributes"), "max_span_attributes", "attributes")
    events, cut_events = hold.cut(array(span.get("events"), "events"), "max_events", "events")
    links, cut_links = hold.cut(array(span.get("links"), "links"), "max_links", "links")
    status = obj(span.get("status"), "status")
    raw = (hex_id(get(span, "traceId", "trace_id"), "traceId"), hex_id(get(span, "spanId", "span_id"), "spanId"))
    parent = hex_id(get(span, "parentSpanId", "parent_span_id"), "parentSpanId")
    flags = integer(span.get("flags"), "flags", UINT32)
    state = text(get(span, "traceState", "trace_state"), "traceState")
    counts = (
        _dropped(span, "droppedAttributesCount", "dropped_attributes_count", cut_attrs),
        _dropped(span, "droppedEventsCount", "dropped_events_count", cut_events),
        _dropped(span, "droppedLinksCount", "dropped_links_count", cut_links),
    )
    fields: dict[str, Any] = {
        "name": text(span.get("name"), "name"),
        "attributes": attributes(attrs, "attributes"),
        "events": _each(events, "events", partial(_event, hold=hold)),
        "start_time": integer(get(span, "startTimeUnixNano", "start_time_unix_nano"), "startTimeUnixNano", UINT64),
        "end_time": integer(get(span, "endTimeUnixNano", "end_time_unix_nano"), "endTimeUnixNano", UINT64),
    }
    link_fields = _each(links, "links", partial(_link_fields, hold=hold))
    kind = enum(span.get("kind"), "kind", _KIND_NAMES)
    code = (enum(status.get("code"), "status.code", _STATUS_NAMES), text(status.get("message"), "status.message"))
    # Ids are checked last: a request the JSON mapping refuses is refused whole, before any item is.
    ids = decode.SpanIds(
        required_id(raw[0], TRACE_ID_BYTES, "trace_id"),
        required_id(raw[1], SPAN_ID_BYTES, "span_id"),
        optional_id(parent, SPAN_ID_BYTES, "parent_span_id"),
        flags,
        state,
    )
    fields["links"] = [_link(link, i) for i, link in enumerate(link_fields)]
    return decode.new_span(ids, kind, code, counts, resource=resource, instrumentation_scope=scope, **fields)


def _each(items: list[Any], field: str, build: Callable[[dict[str, Any]], T]) -> list[T]:
    built: list[T] = []
    try:
        for item in items:
            built.append(build(obj(item, "")))
    except Bad as exc:
        raise Bad(exc.within(f"{field}[{len(built)}]")) from None
    return built


def _event(event: dict[str, Any], hold: _Hold) -> Event:
    limit = "max_event_attributes"
    attrs, _ = hold.cut(array(event.get("attributes"), "attributes"), limit, "attributes")
    return decode.new_event(
        text(event.get("name"), "name"),
        attributes(attrs, "attributes"),
        integer(get(event, "timeUnixNano", "time_unix_nano"), "timeUnixNano", UINT64),
    )


@dataclass(frozen=True)
class _LinkFields:
    trace_id: bytes
    span_id: bytes
    flags: int
    trace_state: str
    attributes: dict[str, Any]


def _link_fields(link: dict[str, Any], hold: _Hold) -> _LinkFields:
    limit = "max_link_attributes"
    attrs, _ = hold.cut(array(link.get("attributes"), "attributes"), limit, "attributes")
    return _LinkFields(
        hex_id(get(link, "traceId", "trace_id"), "traceId"),
        hex_id(get(link, "spanId", "span_id"), "spanId"),
        integer(link.get("flags"), "flags", UINT32),
        text(get(link, "traceState", "trace_state"), "traceState"),
        attributes(attrs, "attributes"),
    )


def _link(link: _LinkFields, index: int) -> Link:
    trace_id = required_id(link.trace_id, TRACE_ID_BYTES, f"links[{index}].trace_id")
    span_id = required_id(link.span_id, SPAN_ID_BYTES, f"links[{index}].span_id")
    return decode.new_link((trace_id, span_id), link.flags, link.trace_state, link.attributes)


def _log_record(
    record: dict[str, Any], resource: Resource, scope: InstrumentationScope, hold: _Hold
) -> ReadableLogRecord:
    limit = "max_attributes"
    attrs, cut = hold.cut(array(record.get("attributes"), "attributes"), limit, "attributes")
    body = record.get("body")
    raw = (hex_id(get(record, "traceId", "trace_id"), "traceId"), hex_id(get(record, "spanId", "span_id"), "spanId"))
    fields = decode.LogFields(
        time=integer(get(record, "timeUnixNano", "time_unix_nano"), "timeUnixNano", UINT64),
        observed_time=integer(
            get(record, "observedTimeUnixNano", "observed_time_unix_nano"), "observedTimeUnixNano", UINT64
        ),
        severity_number=enum(get(record, "severityNumber", "severity_number"), "severityNumber", _SEVERITY_NAMES),
        severity_text=text(get(record, "severityText", "severity_text"), "severityText"),
        body=None if body is None else any_value(body, "body"),
        attributes=attributes(attrs, "attributes"),
        event_name=text(get(record, "eventName", "event_name"), "eventName"),
        ids=(optional_id(raw[0], TRACE_ID_BYTES, "trace_id"), optional_id(raw[1], SPAN_ID_BYTES, "span_id")),
        flags=integer(record.get("flags"), "flags", UINT32),
        dropped_attributes=_dropped(record, "droppedAttributesCount", "dropped_attributes_count", cut),
    )
    return decode.new_log_record(fields, resource, scope)
