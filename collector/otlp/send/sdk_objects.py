"""Stored spans rebuilt as the OTel SDK objects its OTLP exporters take.

The objects are made by `wire/decode.py`'s `new_*` builders, the ones that make received spans
and log records (and give back the dropped counts recorded at the time, which the SDK's own
objects count only inside their bounded containers). A replayed span keeps what the store kept:
its trace and span ids, parent, name, kind, status, times, attributes, events, links (with their
attributes), resource, scope and dropped counts. The store does not keep trace flags or trace
state for spans, so a replayed span is marked sampled (it was exported, hence sampled) with an
empty trace state.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode, TraceFlags

from evaltrace.collector.otlp.wire import decode
from evaltrace.collector.runfiles.spans import Span

SAMPLED = int(TraceFlags.SAMPLED)
_KINDS = {kind.name: kind.value + 1 for kind in SpanKind}  # OTLP numbers kinds from 1, the SDK from 0
_STATUS = {code.name: code.value for code in StatusCode}  # the same numbers in both


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


def hex_id(text: str | None) -> int:
    """A stored id (hex text) as the SDK's number; 0 when there is none."""
    return int(text, 16) if text else 0


def readable_span(span: Span, resources: ResourceCache) -> ReadableSpan:
    """`span` as the SDK span its exporters encode, every stored field kept."""
    ids = decode.SpanIds(hex_id(span.trace_id), hex_id(span.span_id), hex_id(span.parent_span_id), SAMPLED, "")
    return decode.new_span(
        ids,
        _KINDS.get(span.kind, 0),
        (_STATUS.get(span.status_code, 0), span.status_message or ""),
        (span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count),
        name=span.name,
        resource=resources.get(span.resource),
        attributes=span.attributes,
        events=[decode.new_event(e.name, e.attributes, e.time_ns) for e in span.events],
        links=[
            decode.new_link((hex_id(lk.trace_id), hex_id(lk.span_id)), SAMPLED, "", lk.attributes) for lk in span.links
        ],
        start_time=span.start_time_ns,
        end_time=span.end_time_ns,
        instrumentation_scope=decode.new_scope(span.scope_name or "", span.scope_version or "", "", {}),
    )
