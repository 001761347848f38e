"""Spans as the reader returns them and the converter consumes them.

Plain slotted dataclasses rather than pydantic models: a run can hold millions of spans, and
these are built once per row and only read afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SpanEvent:
    """A span event (exceptions, old-convention GenAI messages)."""

    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class SpanLink:
    """A link to another span."""

    trace_id: str
    span_id: str
    attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Span:
    """One recorded span with every attribute (small and large) merged back into `attributes`."""

    trace_id: str
    """32 lowercase hex digits."""
    span_id: str
    """16 lowercase hex digits."""
    parent_span_id: str | None
    name: str
    kind: str
    """`INTERNAL`, `CLIENT`, `SERVER`, `PRODUCER` or `CONSUMER`."""
    status_code: str
    """`UNSET`, `OK` or `ERROR`."""
    status_message: str | None
    start_time_ns: int
    end_time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    links: list[SpanLink] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    service_name: str | None = None
    run_id: str | None = None
    scope_name: str | None = None
    scope_version: str | None = None
    dropped_attributes_count: int = 0
    dropped_events_count: int = 0
    dropped_links_count: int = 0


def span_from_readable(span: Any, run_id: str | None = None) -> Span:
    """Build a `Span` from an OTel SDK `ReadableSpan` (used by in-process helpers and tests)."""
    ctx = span.context
    resource = dict(span.resource.attributes) if span.resource is not None else {}
    scope = span.instrumentation_scope
    return Span(
        trace_id=f"{ctx.trace_id:032x}",
        span_id=f"{ctx.span_id:016x}",
        parent_span_id=f"{span.parent.span_id:016x}" if span.parent is not None else None,
        name=span.name,
        kind=span.kind.name,
        status_code=span.status.status_code.name,
        status_message=span.status.description,
        start_time_ns=span.start_time or 0,
        end_time_ns=span.end_time or 0,
        attributes=_plain(span.attributes),
        events=[SpanEvent(e.name, e.timestamp, _plain(e.attributes)) for e in span.events],
        links=[
            SpanLink(f"{lk.context.trace_id:032x}", f"{lk.context.span_id:016x}", _plain(lk.attributes))
            for lk in span.links
        ],
        resource=resource,
        service_name=resource.get("service.name"),
        run_id=run_id,
        scope_name=scope.name if scope is not None else None,
        scope_version=scope.version if scope is not None else None,
        dropped_attributes_count=span.dropped_attributes,
        dropped_events_count=span.dropped_events,
        dropped_links_count=span.dropped_links,
    )


def _plain(attributes: Any) -> dict[str, Any]:
    # SDK attribute sequences are tuples; the files give lists, so normalise to lists here too.
    return {k: list(v) if isinstance(v, tuple) else v for k, v in (attributes or {}).items()}
