"""OTLP export requests -> the OTel SDK spans and log records the in-process exporters receive.

Every field the protocol carries is kept: ids, parent (and whether it was remote), trace state
and flags, kind, status (a message with any code), times, the resource's attributes and schema
URL, the scope's name, version, schema URL and attributes, attributes of every `AnyValue` type,
events, links with their attributes, flags and trace state, and the dropped counts. Objects of
one resource (or scope) share one SDK `Resource` (`InstrumentationScope`), as in the sending
process, so the store encodes each resource once.

An item that cannot be stored (an id of the wrong length, an all-zero trace or span id) is not
returned: `decode_spans` / `decode_log_records` count it and describe the first one, so a
receiver can answer with a partial success; `all_or_error` of what they return raises
`InputError` instead, for readers that must not silently store a shorter trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from google.protobuf.message import DecodeError
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.wire.limits import Dropped
from evaltrace.collector.otlp.wire.values import (
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    InvalidItem,
    any_value,
    attributes,
    optional_id,
    required_id,
)
from evaltrace.collector.otlp.wire.values import trace_state as parse_trace_state

T = TypeVar("T")
_Request = TypeVar("_Request", ExportTraceServiceRequest, ExportLogsServiceRequest)
M = TypeVar("M")

# OTLP numbers span kinds from 1 (0 is unspecified, read as internal); the SDK from 0.
_KINDS: dict[int, SpanKind] = {
    trace_pb2.Span.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    trace_pb2.Span.SPAN_KIND_SERVER: SpanKind.SERVER,
    trace_pb2.Span.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    trace_pb2.Span.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    trace_pb2.Span.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}
_STATUS: dict[int, StatusCode] = {
    trace_pb2.Status.STATUS_CODE_OK: StatusCode.OK,
    trace_pb2.Status.STATUS_CODE_ERROR: StatusCode.ERROR,
}
_TRACE_FLAGS_MASK = trace_pb2.SPAN_FLAGS_TRACE_FLAGS_MASK
_HAS_IS_REMOTE = trace_pb2.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = trace_pb2.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


@dataclass
class Decoded(Generic[T]):
    """The storable items of one request, and what was rejected."""

    items: list[T] = field(default_factory=list)
    rejected: int = 0
    first_error: str = ""
    """Where the first rejected item sits in the request and why ('' when none was)."""
    dropped: Dropped = field(default_factory=Dropped)
    """What was past the SDK's limits, cut while decoding (OTLP/JSON with limits; see `jsonformat.py`)."""

    def reject(self, where: str, error: InvalidItem) -> None:
        """Count one rejected item (the first one's reason is kept)."""
        self.rejected += 1
        if not self.first_error:
            self.first_error = f"{where}: {error}"

    def rejection(self, noun: str) -> str:
        """What was rejected (`noun`: what an item is), '' when nothing was."""
        if not self.rejected:
            return ""
        plural = "" if self.rejected == 1 else "s"
        return f"{self.rejected} invalid {noun}{plural}; the first at {self.first_error}"


class ReceivedSpan(ReadableSpan):
    """A `ReadableSpan` built from OTLP, with the dropped counts the sender reported."""

    def __init__(self, counts: tuple[int, int, int], **fields: object) -> None:
        super().__init__(**fields)  # type: ignore[arg-type]
        self._received_counts = counts

    @property
    def dropped_attributes(self) -> int:
        """Attributes the sending SDK dropped."""
        return self._received_counts[0]

    @property
    def dropped_events(self) -> int:
        """Events the sending SDK dropped."""
        return self._received_counts[1]

    @property
    def dropped_links(self) -> int:
        """Links the sending SDK dropped."""
        return self._received_counts[2]


@dataclass(frozen=True)
class ReceivedLogRecord(ReadableLogRecord):
    """A `ReadableLogRecord` built from OTLP, with the dropped-attribute count the sender reported."""

    received_dropped: int = 0

    @property
    def dropped_attributes(self) -> int:
        """Attributes the sending SDK dropped."""
        return self.received_dropped


class _ReceivedStatus(Status):
    """A status keeping its message whatever its code (OTLP allows one; the SDK warns and drops it)."""

    def __init__(self, code: StatusCode, message: str) -> None:
        super().__init__(code)
        self._description = message or None


def decode_spans(request: ExportTraceServiceRequest) -> Decoded[ReadableSpan]:
    """The spans of `request` as SDK spans; invalid ones counted in `rejected`."""
    return _decode(request, ("resource_spans", "scope_spans", "spans"), _span)


def decode_log_records(request: ExportLogsServiceRequest) -> Decoded[ReadableLogRecord]:
    """The log records of `request` as SDK log records; invalid ones counted in `rejected`."""
    return _decode(request, ("resource_logs", "scope_logs", "log_records"), _log_record)


def _decode(request: Any, levels: tuple[str, str, str], build: Callable[..., T]) -> Decoded[T]:
    """The items of a request whose `levels` (resources, scopes, items) are named as the fields."""
    out: Decoded[T] = Decoded()
    outer, middle, inner = levels
    for r, group in enumerate(getattr(request, outer)):
        found = group.resource
        resource = ReceivedResource(attributes(found.attributes), group.schema_url, found.dropped_attributes_count)
        for s, scoped in enumerate(getattr(group, middle)):
            named = scoped.scope
            scope = new_scope(named.name, named.version, scoped.schema_url, attributes(named.attributes))
            where = f"{outer}[{r}].{middle}[{s}].{inner}"
            collect(getattr(scoped, inner), partial(build, resource=resource, scope=scope), where, out)
    return out


def parse_request(request: _Request, data: bytes, what: str) -> _Request:
    """`data` read into `request` (an empty export request of the kind expected), which is returned.

    Raises:
        InputError: `data` is not such a request (`what` names it: "not {what} (...)").
    """
    try:
        request.ParseFromString(data)
    except (DecodeError, RecursionError) as exc:
        raise InputError(f"not {what} ({exc or 'malformed'})") from None
    return request


def all_or_error(decoded: Decoded[T], noun: str) -> list[T]:
    """The items, or an `InputError` naming the first rejected one (`noun`: what an item is)."""
    if decoded.rejected:
        raise InputError(decoded.rejection(noun))
    return decoded.items


def collect(messages: Iterable[M], build: Callable[[M], T], where: str, out: Decoded[T]) -> None:
    """Build each of `messages` into `out`, an invalid one (`InvalidItem`) counted at `where[i]`."""
    for i, message in enumerate(messages):
        try:
            out.items.append(build(message))
        except InvalidItem as exc:
            out.reject(f"{where}[{i}]", exc)


class ReceivedResource(Resource):
    """The SDK resource of received items (shared by one resource's items), with its sender's dropped count."""

    def __init__(self, attrs: dict[str, object], schema_url: str, dropped: int) -> None:
        super().__init__(attrs, schema_url)  # type: ignore[arg-type]
        self.dropped_attributes = dropped


def new_scope(name: str, version: str, schema_url: str, attrs: dict[str, Any]) -> InstrumentationScope:
    """The SDK instrumentation scope of received items ("" read as absent)."""
    return InstrumentationScope(name, version or None, schema_url or None, attrs or None)


def span_context(trace_id: int, span_id: int, flags: int, trace_state: str, *, own: bool = True) -> SpanContext:
    """A span context; `own` is the span's own (never remote), else a parent's or link's."""
    remote = not own and flags & _HAS_IS_REMOTE != 0 and flags & _IS_REMOTE != 0
    state = parse_trace_state(trace_state) if trace_state else TraceState()
    return SpanContext(trace_id, span_id, remote, TraceFlags(flags & _TRACE_FLAGS_MASK), state)


@dataclass(frozen=True)
class SpanIds:
    """A span's place in its trace, as the wire carries it (ids already checked)."""

    trace_id: int
    span_id: int
    parent_id: int
    flags: int
    trace_state: str


def new_span(
    ids: SpanIds, kind: int, status: tuple[int, str], counts: tuple[int, int, int], **fields: object
) -> ReadableSpan:
    """The SDK span of a received one: `kind` and the status code are OTLP's numbers.

    `fields` are the `ReadableSpan` fields taken as they are (name, resource, attributes, events,
    links, start_time, end_time, instrumentation_scope); `counts` the dropped attributes, events, links.
    """
    context = span_context(ids.trace_id, ids.span_id, ids.flags, ids.trace_state)
    # A parent carries the span's trace flags and state (OTLP keeps only its id and remoteness).
    parent = span_context(ids.trace_id, ids.parent_id, ids.flags, ids.trace_state, own=False) if ids.parent_id else None
    return ReceivedSpan(
        counts,
        context=context,
        parent=parent,
        kind=_KINDS.get(kind, SpanKind.INTERNAL),
        status=_ReceivedStatus(_STATUS.get(status[0], StatusCode.UNSET), status[1]),
        **fields,
    )


def _span(span: trace_pb2.Span, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    ids = SpanIds(
        required_id(span.trace_id, TRACE_ID_BYTES, "trace_id"),
        required_id(span.span_id, SPAN_ID_BYTES, "span_id"),
        optional_id(span.parent_span_id, SPAN_ID_BYTES, "parent_span_id"),
        span.flags,
        span.trace_state,
    )
    return new_span(
        ids,
        span.kind,
        (span.status.code, span.status.message),
        (span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count),
        name=span.name,
        resource=resource,
        attributes=attributes(span.attributes),
        events=[_event(e) for e in span.events],
        links=[_link(link, i) for i, link in enumerate(span.links)],
        start_time=span.start_time_unix_nano,
        end_time=span.end_time_unix_nano,
        instrumentation_scope=scope,
    )


def new_event(name: str, attrs: dict[str, Any], time: int) -> Event:
    """An SDK event of a received span."""
    # `limit=None`: the SDK's default attribute limit would drop received attributes.
    return Event(name, attrs, time, limit=None)


def new_link(ids: tuple[int, int], flags: int, trace_state: str, attrs: dict[str, Any]) -> Link:
    """An SDK link of a received span (`ids`: trace id and span id, already checked)."""
    return Link(span_context(ids[0], ids[1], flags, trace_state, own=False), attrs)


def _event(event: trace_pb2.Span.Event) -> Event:
    return new_event(event.name, attributes(event.attributes), event.time_unix_nano)


def _link(link: trace_pb2.Span.Link, index: int) -> Link:
    trace_id = required_id(link.trace_id, TRACE_ID_BYTES, f"links[{index}].trace_id")
    span_id = required_id(link.span_id, SPAN_ID_BYTES, f"links[{index}].span_id")
    return new_link((trace_id, span_id), link.flags, link.trace_state, attributes(link.attributes))


@dataclass(frozen=True)
class LogFields:
    """A received log record's fields as the wire carries them (0 is "unset" for times, severity, flags)."""

    time: int
    observed_time: int
    severity_number: int
    severity_text: str
    body: Any
    attributes: dict[str, Any]
    event_name: str
    ids: tuple[int, int]
    """Trace id and span id (0 when absent), already checked."""
    flags: int
    dropped_attributes: int


def new_log_record(fields: LogFields, resource: Resource, scope: InstrumentationScope) -> ReadableLogRecord:
    """The SDK log record of a received one."""
    # 0 is "unknown" on the wire for a time, the severity and flags: read back as the SDK's None.
    log_record = LogRecord(
        timestamp=fields.time or None,
        observed_timestamp=fields.observed_time or fields.time,
        severity_text=fields.severity_text or None,
        severity_number=_severity(fields.severity_number),
        body=fields.body,
        attributes=fields.attributes,
        event_name=fields.event_name or None,
    )
    # Set after construction: the constructor takes ids only from a context.
    log_record.trace_id, log_record.span_id = fields.ids
    log_record.trace_flags = TraceFlags(fields.flags & _TRACE_FLAGS_MASK)
    return ReceivedLogRecord(log_record, resource, scope, received_dropped=fields.dropped_attributes)


def _log_record(record: logs_pb2.LogRecord, resource: Resource, scope: InstrumentationScope) -> ReadableLogRecord:
    fields = LogFields(
        time=record.time_unix_nano,
        observed_time=record.observed_time_unix_nano,
        severity_number=record.severity_number,
        severity_text=record.severity_text,
        body=any_value(record.body) if record.HasField("body") else None,
        attributes=attributes(record.attributes),
        event_name=record.event_name,
        ids=(
            optional_id(record.trace_id, TRACE_ID_BYTES, "trace_id"),
            optional_id(record.span_id, SPAN_ID_BYTES, "span_id"),
        ),
        flags=record.flags,
        dropped_attributes=record.dropped_attributes_count,
    )
    return new_log_record(fields, resource, scope)


def _severity(number: int) -> SeverityNumber | None:
    if number == 0:
        return None
    try:
        return SeverityNumber(number)
    except ValueError:  # outside the enumeration (1-24): kept as unspecified
        return SeverityNumber.UNSPECIFIED
