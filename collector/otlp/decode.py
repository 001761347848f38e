"""OTLP export requests -> the OTel SDK spans and log records the in-process exporters receive.

Every field the protocol carries is kept: ids, parent (and whether it was remote), trace state
and flags, kind, status (a message with any code), times, the resource's attributes and schema
URL, the scope's name, version, schema URL and attributes, attributes of every `AnyValue` type,
events, links with their attributes, flags and trace state, and the dropped counts. Objects of
one resource (or scope) share one SDK `Resource` (`InstrumentationScope`), as in the sending
process, so the store encodes each resource once.

An item that cannot be stored (an id of the wrong length, an all-zero trace or span id) is not
returned: `decode_spans` / `decode_log_records` count it and describe the first one, so a
receiver can answer with a partial success; `spans_from_request` / `log_records_from_request`
raise `InputError` instead, for readers that must not silently store a shorter trace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import Generic, TypeVar

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope as ScopeMessage
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ResourceMessage
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.values import (
    SPAN_ID_BYTES,
    TRACE_ID_BYTES,
    InvalidItem,
    any_value,
    attributes,
    optional_id,
    required_id,
)
from evaltrace.collector.otlp.values import trace_state as parse_trace_state

T = TypeVar("T")
M = TypeVar("M")

# OTLP numbers span kinds from 1 (0 is unspecified, read as internal); the SDK from 0.
_KINDS = {
    trace_pb2.Span.SPAN_KIND_INTERNAL: SpanKind.INTERNAL,
    trace_pb2.Span.SPAN_KIND_SERVER: SpanKind.SERVER,
    trace_pb2.Span.SPAN_KIND_CLIENT: SpanKind.CLIENT,
    trace_pb2.Span.SPAN_KIND_PRODUCER: SpanKind.PRODUCER,
    trace_pb2.Span.SPAN_KIND_CONSUMER: SpanKind.CONSUMER,
}
_STATUS = {
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

    def reject(self, where: str, error: InvalidItem) -> None:
        """Count one rejected item (the first one's reason is kept)."""
        self.rejected += 1
        if not self.first_error:
            self.first_error = f"{where}: {error}"


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
    out: Decoded[ReadableSpan] = Decoded()
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _resource(resource_spans.resource, resource_spans.schema_url)
        for s, scope_spans in enumerate(resource_spans.scope_spans):
            scope = _scope(scope_spans.scope, scope_spans.schema_url)
            where = f"resource_spans[{r}].scope_spans[{s}].spans"
            _collect(scope_spans.spans, partial(_span, resource=resource, scope=scope), where, out)
    return out


def decode_log_records(request: ExportLogsServiceRequest) -> Decoded[ReadableLogRecord]:
    """The log records of `request` as SDK log records; invalid ones counted in `rejected`."""
    out: Decoded[ReadableLogRecord] = Decoded()
    for r, resource_logs in enumerate(request.resource_logs):
        resource = _resource(resource_logs.resource, resource_logs.schema_url)
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            scope = _scope(scope_logs.scope, scope_logs.schema_url)
            where = f"resource_logs[{r}].scope_logs[{s}].log_records"
            _collect(scope_logs.log_records, partial(_log_record, resource=resource, scope=scope), where, out)
    return out


def spans_from_request(request: ExportTraceServiceRequest) -> list[ReadableSpan]:
    """The spans of `request` as SDK spans.

    Raises:
        InputError: a span cannot be stored (naming its place in the request and the field).
    """
    return _all_or_error(decode_spans(request), "span")


def log_records_from_request(request: ExportLogsServiceRequest) -> list[ReadableLogRecord]:
    """The log records of `request` as SDK log records.

    Raises:
        InputError: a record cannot be stored (naming its place in the request and the field).
    """
    return _all_or_error(decode_log_records(request), "log record")


def _all_or_error(decoded: Decoded[T], noun: str) -> list[T]:
    if decoded.rejected:
        plural = "" if decoded.rejected == 1 else "s"
        raise InputError(f"{decoded.rejected} invalid {noun}{plural}; the first at {decoded.first_error}")
    return decoded.items


def _collect(messages: Iterable[M], build: Callable[[M], T], where: str, out: Decoded[T]) -> None:
    for i, message in enumerate(messages):
        try:
            out.items.append(build(message))
        except InvalidItem as exc:
            out.reject(f"{where}[{i}]", exc)


def _resource(message: ResourceMessage, schema_url: str) -> Resource:
    return _ReceivedResource(attributes(message.attributes), schema_url, message.dropped_attributes_count)


class _ReceivedResource(Resource):
    """A resource with the dropped-attribute count its sender reported (kept for replay)."""

    def __init__(self, attrs: dict[str, object], schema_url: str, dropped: int) -> None:
        super().__init__(attrs, schema_url)  # type: ignore[arg-type]
        self.dropped_attributes = dropped


def _scope(message: ScopeMessage, schema_url: str) -> InstrumentationScope:
    return InstrumentationScope(
        message.name,
        message.version or None,
        schema_url or None,
        attributes(message.attributes) or None,
    )


def _context(trace_id: int, span_id: int, flags: int, trace_state: str, *, own: bool = True) -> SpanContext:
    """A span context; `own` is the span's own (never remote), else a parent's or link's."""
    remote = not own and flags & _HAS_IS_REMOTE != 0 and flags & _IS_REMOTE != 0
    state = parse_trace_state(trace_state) if trace_state else TraceState()
    return SpanContext(trace_id, span_id, remote, TraceFlags(flags & _TRACE_FLAGS_MASK), state)


def _span(span: trace_pb2.Span, resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    trace_id = required_id(span.trace_id, TRACE_ID_BYTES, "trace_id")
    span_id = required_id(span.span_id, SPAN_ID_BYTES, "span_id")
    parent_id = optional_id(span.parent_span_id, SPAN_ID_BYTES, "parent_span_id")
    context = _context(trace_id, span_id, span.flags, span.trace_state)
    # A parent carries the span's trace flags and state (OTLP keeps only its id and remoteness).
    parent = _context(trace_id, parent_id, span.flags, span.trace_state, own=False) if parent_id else None
    return ReceivedSpan(
        (span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count),
        name=span.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=attributes(span.attributes),
        events=[_event(e) for e in span.events],
        links=[_link(link, i) for i, link in enumerate(span.links)],
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
        status=_ReceivedStatus(_STATUS.get(span.status.code, StatusCode.UNSET), span.status.message),
        start_time=span.start_time_unix_nano,
        end_time=span.end_time_unix_nano,
        instrumentation_scope=scope,
    )


def _event(event: trace_pb2.Span.Event) -> Event:
    # `limit=None`: the SDK's default attribute limit would drop received attributes.
    return Event(event.name, attributes(event.attributes), event.time_unix_nano, limit=None)


def _link(link: trace_pb2.Span.Link, index: int) -> Link:
    trace_id = required_id(link.trace_id, TRACE_ID_BYTES, f"links[{index}].trace_id")
    span_id = required_id(link.span_id, SPAN_ID_BYTES, f"links[{index}].span_id")
    context = _context(trace_id, span_id, link.flags, link.trace_state, own=False)
    return Link(context, attributes(link.attributes))


def _log_record(record: logs_pb2.LogRecord, resource: Resource, scope: InstrumentationScope) -> ReadableLogRecord:
    trace_id = optional_id(record.trace_id, TRACE_ID_BYTES, "trace_id")
    span_id = optional_id(record.span_id, SPAN_ID_BYTES, "span_id")
    body = any_value(record.body) if record.HasField("body") else None
    # 0 is "unknown" on the wire for a time, the severity and flags: read back as the SDK's None.
    log_record = LogRecord(
        timestamp=record.time_unix_nano or None,
        observed_timestamp=record.observed_time_unix_nano or record.time_unix_nano,
        severity_text=record.severity_text or None,
        severity_number=_severity(record.severity_number),
        body=body,
        attributes=attributes(record.attributes),
        event_name=record.event_name or None,
    )
    # Set after construction: the constructor takes ids only from a context.
    log_record.trace_id, log_record.span_id = trace_id, span_id
    log_record.trace_flags = TraceFlags(record.flags & _TRACE_FLAGS_MASK)
    return ReceivedLogRecord(log_record, resource, scope, received_dropped=record.dropped_attributes_count)


def _severity(number: int) -> SeverityNumber | None:
    if number == 0:
        return None
    try:
        return SeverityNumber(number)
    except ValueError:  # outside the enumeration (1-24): kept as unspecified
        return SeverityNumber.UNSPECIFIED
