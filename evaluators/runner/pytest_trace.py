"""The `evaltrace_recorder` fixture's objects: record a block's spans in memory and rebuild its Trace."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from types import TracebackType

from opentelemetry import trace
from opentelemetry.trace import Span

from evaltrace.collector.recorder.span_scope import record_error
from evaltrace.collector.traces.rebuild import convert_trace
from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.runner.spans import SpanCapture, sdk_provider

ROOT_SPAN_NAME = "evaltrace.test"
_lock = threading.Lock()
_capture: SpanCapture | None = None


def shared_capture() -> SpanCapture:
    """The process's one in-memory capture processor, added to the global provider on first use."""
    global _capture
    with _lock:
        if _capture is None:
            capture = SpanCapture()
            sdk_provider().add_span_processor(capture)
            _capture = capture
        return _capture


class Recording:
    """One recorded block: a context manager whose `trace` is the rebuilt agent run."""

    def __init__(self, capture: SpanCapture, case_id: str | None) -> None:
        self._capture = capture
        self._case_id = case_id
        self._span: Span | None = None
        self._scope = ExitStack()
        self._traces: list[Trace] | None = None

    def __enter__(self) -> Recording:
        attributes = {"evaltrace.case_id": self._case_id} if self._case_id is not None else {}
        self._span = trace.get_tracer("evaltrace.pytest").start_span(ROOT_SPAN_NAME, attributes=attributes)
        self._capture.watch(self._span.get_span_context().trace_id)
        self._scope.enter_context(trace.use_span(self._span, end_on_exit=False))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._span is not None
        self._scope.close()
        if exc is not None:
            record_error(self._span, exc)
        self._span.end()
        spans = self._capture.take([self._span.get_span_context().trace_id])
        self._traces = convert_trace(spans)

    @property
    def traces(self) -> list[Trace]:
        """Every trace rebuilt from the block (one per root span; normally one)."""
        if self._traces is None:
            raise RuntimeError("the recording is still open: read .trace after the `with` block")
        return self._traces

    @property
    def trace(self) -> Trace:
        """The agent run recorded in the block (the agent's trace when it made one agent span)."""
        found = self.traces
        if len(found) != 1:
            raise AssertionError(f"expected one trace from the recorded block, got {len(found)}")
        return found[0]


class TraceRecorder:
    """What the `evaltrace_recorder` fixture gives: call it to start a `Recording`."""

    def __call__(self, *, case_id: str | None = None) -> Recording:
        """A recording of the spans ended inside its `with` block.

        Args:
            case_id: stored as `evaltrace.case_id` on the block's root span.
        """
        return Recording(shared_capture(), case_id)
