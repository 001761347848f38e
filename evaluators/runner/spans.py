"""Span plumbing for running an agent under evaltrace: the global provider, sealing, capture.

A call that times out keeps running in the background (a thread cannot be killed), so its
spans would keep arriving after the runner has already recorded the call as timed out. The
`SealingSpanProcessor` drops every span of a sealed trace that ends after the seal (except the
runner's own root span), so a late agent span can neither turn a timed-out entry into a success
nor appear anywhere else: each call has its own trace id, and only that trace is sealed.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles.spans import Span as RecordedSpan
from evaltrace.collector.runfiles.spans import span_from_readable


def sdk_provider() -> Any:
    """The global SDK tracer provider, set when none is set yet (`record()`'s own rule).

    Raises:
        InputError: the application installed a provider that does not accept span processors.
    """
    from evaltrace.collector.recorder import recording  # on first use: tracing a test may never need it

    try:
        return recording.sdk_provider()
    except RuntimeError as exc:
        raise InputError(str(exc)) from None


class SealingSpanProcessor(SpanProcessor):
    """Forwards spans to `inner`, except spans of sealed traces that end after the seal.

    It also stamps attributes registered with `stamp` on every span of a trace as it starts
    (the conversation id of a turn), so the agent's own spans carry them too.
    """

    def __init__(self, inner: SpanProcessor) -> None:
        self._inner = inner
        self._lock = threading.Lock()
        self._sealed: dict[int, int] = {}  # trace id -> the one span id still let through
        self._stamps: dict[int, dict[str, str]] = {}
        self._closed = False

    def stamp(self, trace_id: int, attributes: dict[str, str]) -> None:
        """Set `attributes` on the spans of `trace_id` that start from now on (never overwriting)."""
        with self._lock:
            self._stamps[trace_id] = attributes

    def forget(self, trace_id: int) -> None:
        """Stop stamping the spans of `trace_id`."""
        with self._lock:
            self._stamps.pop(trace_id, None)

    def seal(self, trace_id: int, keep_span_id: int) -> None:
        """From now on drop the spans of `trace_id` that end, except `keep_span_id`."""
        with self._lock:
            self._sealed[trace_id] = keep_span_id

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Stamp the span's trace attributes on it, then forward the start."""
        ctx = span.context
        with self._lock:
            stamps = self._stamps.get(ctx.trace_id) if ctx is not None else None
        for key, value in (stamps or {}).items():
            if span.attributes is None or key not in span.attributes:
                span.set_attribute(key, value)
        if not self._closed:
            self._inner.on_start(span, parent_context=parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        """Forward an ended span unless its trace is sealed or recording is over."""
        ctx = span.context
        if self._closed or ctx is None:
            return
        with self._lock:
            keep = self._sealed.get(ctx.trace_id)
        if keep is None or keep == ctx.span_id:
            self._inner.on_end(span)

    def shutdown(self) -> None:
        """Stop forwarding and shut the inner processor down (writing what it holds)."""
        self._closed = True
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the inner processor."""
        return self._inner.force_flush(timeout_millis)


class SpanCapture(SpanProcessor):
    """Keeps, in memory, the ended spans of the traces it is told to watch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: dict[int, list[RecordedSpan]] = {}

    def watch(self, trace_id: int) -> None:
        """Start keeping the spans of `trace_id`."""
        with self._lock:
            self._spans.setdefault(trace_id, [])

    def take(self, trace_ids: Iterable[int]) -> list[RecordedSpan]:
        """The spans kept for `trace_ids`, which are no longer watched."""
        with self._lock:
            return [span for trace_id in trace_ids for span in self._spans.pop(trace_id, [])]

    def on_end(self, span: ReadableSpan) -> None:
        """Keep the span when its trace is watched."""
        ctx = span.context
        if ctx is None:
            return
        with self._lock:
            kept = self._spans.get(ctx.trace_id)
            if kept is not None:
                kept.append(span_from_readable(span))
