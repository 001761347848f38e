"""The SDK's limits, held by every received request (and OTLP file import) before it is decoded, and a request's weight.

An instrumented process's SDK keeps at most 128 events, links and attributes per span (and 128
attributes per event, link and log record; `OTEL_SPAN_EVENT_COUNT_LIMIT`, `OTEL_ATTRIBUTE_COUNT_LIMIT`
and the others change them) and counts the rest as dropped. A received request is cut to the same
limits in its protobuf form, before any SDK object is made from it: a 2 MB request of a million
empty events then costs what 128 events cost (decoding them all grew the receiver by 330 MB). The
cut items are added to the item's dropped counts, so the files say so, and reported to the client
as a partial-success warning (nothing is rejected: the spans are taken).

`weight` is what a decoded request counts for in the queue: its spans with their events and links,
or its log records, so the queue's bound is a bound on decoded objects, not on requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import SpanLimits

_UINT32 = 2**32 - 1


@dataclass
class Dropped:
    """What a request held beyond the limits."""

    events: int = 0
    links: int = 0
    attributes: int = 0

    def message(self) -> str:
        """The partial-success warning, or "" when nothing was dropped."""
        parts = [f"{getattr(self, f.name)} {f.name}" for f in fields(self) if getattr(self, f.name)]
        return f"over the SDK limits, dropped: {', '.join(parts)}" if parts else ""


def hold_span_limits(request: ExportTraceServiceRequest, limits: SpanLimits) -> Dropped:
    """Cut every span of `request` (in place) to `limits`; what was cut."""
    dropped = Dropped()
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                dropped.events += _hold(span, "events", "dropped_events_count", limits.max_events)
                dropped.links += _hold(span, "links", "dropped_links_count", limits.max_links)
                dropped.attributes += _hold_attributes(span, limits.max_span_attributes)
                for event in span.events:
                    dropped.attributes += _hold_attributes(event, limits.max_event_attributes)
                for link in span.links:
                    dropped.attributes += _hold_attributes(link, limits.max_link_attributes)
    return dropped


def hold_log_limits(request: ExportLogsServiceRequest, limits: SpanLimits) -> Dropped:
    """Cut every log record's attributes (in place) to the general attribute limit; what was cut."""
    dropped = Dropped()
    for resource_logs in request.resource_logs:
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                dropped.attributes += _hold_attributes(record, limits.max_attributes)
    return dropped


def weight(items: Sequence[Any]) -> int:
    """Decoded spans with their events and links, or log records: what a request holds in the queue."""
    return sum(1 + len(getattr(item, "events", ())) + len(getattr(item, "links", ())) for item in items)


def _hold_attributes(message: Any, limit: int | None) -> int:
    return _hold(message, "attributes", "dropped_attributes_count", limit)


def excess(count: int, limit: int | None) -> int:
    """How many of `count` items are past `limit` (None: no limit): the one rule of both encodings."""
    return 0 if limit is None else max(0, count - limit)


def _hold(message: Any, field: str, counter: str, limit: int | None) -> int:
    """Remove what is past `limit` from a repeated field, counted in `counter`."""
    repeated = getattr(message, field)
    extra = excess(len(repeated), limit)
    if extra:
        del repeated[limit:]
        setattr(message, counter, min(getattr(message, counter) + extra, _UINT32))
    return extra
