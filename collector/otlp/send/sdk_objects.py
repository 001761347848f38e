"""Stored spans and log records rebuilt as the OTel SDK objects its OTLP exporters take.

A replayed span keeps what the store kept: its trace and span ids, parent, name, kind, status,
times, attributes, events, links (with their attributes), resource, scope and dropped counts.
The store does not keep trace flags or trace state for spans, so a replayed span is marked
sampled (it was exported, hence sampled) with an empty trace state.

The SDK counts dropped attributes, events and links inside its bounded containers while a span
is recorded; rebuilt objects hold plain containers, so the counts recorded at the time are given
back through small subclasses instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from evaltrace.collector.runfiles.spans import Span

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class StoredSpan(ReadableSpan):
    """A `ReadableSpan` rebuilt from the store, with the dropped counts recorded when it was made."""

    def __init__(self, counts: tuple[int, int, int], **fields: Any) -> None:
        super().__init__(**fields)
        self._stored_counts = counts

    @property
    def dropped_attributes(self) -> int:
        """Attributes the recording SDK dropped."""
        return self._stored_counts[0]

    @property
    def dropped_events(self) -> int:
        """Events the recording SDK dropped."""
        return self._stored_counts[1]

    @property
    def dropped_links(self) -> int:
        """Links the recording SDK dropped."""
        return self._stored_counts[2]


class ResourceCache:
    """One SDK `Resource` per distinct resource, shared by the spans that carry it (as in the recording process)."""

    def __init__(self) -> None:
        self._made: dict[str, Resource] = {}

    def get(self, attributes: dict[str, Any]) -> Resource:
        """The `Resource` of `attributes`."""
        key = repr(sorted(attributes.items()))
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = Resource(attributes)
        return found


def span_context(trace_id: str, span_id: str) -> SpanContext:
    """The context of a stored span (ids as hex text), sampled, as the recording process saw it."""
    return SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=False, trace_flags=_SAMPLED)


def readable_span(span: Span, resources: ResourceCache) -> ReadableSpan:
    """`span` as the SDK span its exporters encode, every stored field kept."""
    parent = span_context(span.trace_id, span.parent_span_id) if span.parent_span_id else None
    return StoredSpan(
        (span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count),
        name=span.name,
        context=span_context(span.trace_id, span.span_id),
        parent=parent,
        resource=resources.get(span.resource),
        attributes=span.attributes,
        # `limit=None`: the SDK's default of 128 attributes per event would drop recorded ones.
        events=[Event(e.name, e.attributes, e.time_ns, limit=None) for e in span.events],
        links=[Link(span_context(lk.trace_id, lk.span_id), lk.attributes) for lk in span.links],
        kind=SpanKind[span.kind] if span.kind in SpanKind.__members__ else SpanKind.INTERNAL,
        status=_status(span),
        start_time=span.start_time_ns,
        end_time=span.end_time_ns,
        instrumentation_scope=InstrumentationScope(span.scope_name or "", span.scope_version),
    )


def _status(span: Span) -> Status:
    if span.status_code not in StatusCode.__members__:
        return Status()
    code = StatusCode[span.status_code]
    # The SDK keeps a description only with ERROR (and warns otherwise).
    return Status(code, span.status_message if code is StatusCode.ERROR else None)


@dataclass(frozen=True)
class StoredLogRecord(ReadableLogRecord):
    """A `ReadableLogRecord` rebuilt from the store, with the dropped-attribute count recorded at the time."""

    stored_dropped: int = 0

    @property
    def dropped_attributes(self) -> int:
        """Attributes the recording SDK dropped."""
        return self.stored_dropped


@dataclass(frozen=True)
class LogFields:
    """One stored log record's fields, decoded (ids as hex text, times in ns)."""

    trace_id: str | None
    span_id: str | None
    trace_flags: int | None
    time_ns: int | None
    observed_time_ns: int
    severity_number: int | None
    severity_text: str | None
    event_name: str | None
    body: Any
    attributes: dict[str, Any]
    resource: dict[str, Any]
    scope_name: str | None
    scope_version: str | None
    dropped_attributes: int = 0


def readable_log_record(fields: LogFields, resources: ResourceCache) -> ReadableLogRecord:
    """A stored log record as the SDK record its OTLP log exporters encode."""
    record = LogRecord(
        timestamp=fields.time_ns,
        observed_timestamp=fields.observed_time_ns,
        severity_text=fields.severity_text,
        severity_number=_severity(fields.severity_number),
        body=fields.body,
        attributes=fields.attributes,
        event_name=fields.event_name,
    )
    # Set after construction: the constructor takes ids only from a context (or a deprecated form
    # without `event_name`). 0 is "no id" to the encoder (a record emitted outside any span).
    record.trace_id = int(fields.trace_id, 16) if fields.trace_id else 0
    record.span_id = int(fields.span_id, 16) if fields.span_id else 0
    record.trace_flags = TraceFlags(fields.trace_flags or 0)
    scope = InstrumentationScope(fields.scope_name or "", fields.scope_version)
    return StoredLogRecord(record, resources.get(fields.resource), scope, stored_dropped=fields.dropped_attributes)


def _severity(number: int | None) -> SeverityNumber | None:
    if number is None:
        return None
    try:
        return SeverityNumber(number)
    except ValueError:  # a number outside the enumeration (1-24): sent as unspecified
        return SeverityNumber.UNSPECIFIED
