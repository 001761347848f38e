"""`record()`: attach the Parquet recorder to the application's tracer provider in one call.

`record()` adds the span exporter's processor to the tracer provider and, by default, the log
exporter's to the logger provider, creating SDK providers only where none is set. It turns GenAI
content capture on unless the user set it (`_genai_env.py`): instrumentations read that when they
instrument, so `record()` comes before instrumenting the application's clients.

It also installs the process hooks the SDK lacks (so does `autoconf.py` for `opentelemetry-instrument`):

- **multiprocessing.** Fork workers exit through `os._exit`, so `atexit` never shuts the provider
  down: an after-fork hook registers a `Finalize` in each worker that flushes evaltrace, then
  shuts the provider down, when the worker exits normally.
- **SIGTERM.** The default action kills the process without `atexit`. When the application has no
  handler (`SIG_DFL`, main thread), evaltrace's handler writes every span already ended (within a
  bounded time), restores `SIG_DFL` and re-sends SIGTERM, so the process still dies by SIGTERM.
"""

from __future__ import annotations

import logging
import multiprocessing.util
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from evaltrace.collector.recorder._genai_env import apply_capture_default
from evaltrace.collector.recorder.redact import RedactionSettings

if TYPE_CHECKING:
    from evaltrace.collector.recorder.exporter import ParquetSpanExporter
    from evaltrace.collector.recorder.log_exporter import EvaltraceLogRecordProcessor, ParquetLogExporter

logger = logging.getLogger("evaltrace")

__all__ = ["EvaltraceSpanProcessor", "Recorder", "adopt", "current", "record", "record_logs"]

_SIGTERM_FLUSH_SECONDS = 10.0
_MP_EXIT_PRIORITY = 100  # run before multiprocessing's own low-priority finalizers

_state_lock = threading.Lock()
_active: Recorder | None = None
_hooked_providers: set[int] = set()
_sigterm_processors: list[Any] = []  # evaltrace's span and log-record processors
_sigterm_provider: Any = None


class _DropCounter:
    """Wraps a batch processor's internal metrics to count the items it drops on a full queue."""

    def __init__(self, inner: Any, note: Callable[[int], None]) -> None:
        self._inner = inner
        self._note = note

    def drop_items(self, count: int, error_type: str = "queue_full") -> None:
        if error_type == "queue_full":
            self._note(count)
        self._inner.drop_items(count, error_type)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def count_queue_drops(processor: Any, note: Callable[[int], None], noun: str) -> None:
    """Make an SDK batch processor (span or log) report the items its full queue drops to `note`.

    The SDK counts drops only through internal metrics that are off by default, so the count
    is taken where the SDK records it. On SDK versions without that hook it is said once.
    """
    inner = getattr(processor, "_batch_processor", None)
    metrics = getattr(inner, "_metrics", None)
    if inner is not None and callable(getattr(metrics, "drop_items", None)):
        inner._metrics = _DropCounter(metrics, note)
    else:  # said, so that `evaltrace runs` showing no drops is not taken for a count of zero
        logger.warning(
            "evaltrace: this opentelemetry-sdk's batch processor offers no hook to count %s it "
            "drops on a full queue; such drops will not be counted",
            noun,
        )


class WritesOnFlush:
    """What evaltrace's span and log-record processors add to the SDK's batch processors (mixed in first).

    Queue drops reach the exporter (`count_queue_drops`), and `force_flush` writes the exporter's
    buffer: the SDK's batch processors never call the exporter's `force_flush`, so without this a
    `provider.force_flush()` would leave items buffered until the next timed roll.
    """

    exporter: ParquetSpanExporter | ParquetLogExporter

    def _watch(self, exporter: ParquetSpanExporter | ParquetLogExporter, noun: str) -> None:
        self.exporter = exporter
        count_queue_drops(self, exporter.note_dropped, noun)

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        """Export the queue (within the SDK processor's own default time, unless given), then write a file."""
        flush = super().force_flush  # type: ignore[misc]  # the SDK batch processor's, after this class
        flushed: bool = flush() if timeout_millis is None else flush(timeout_millis)
        return flushed and self.exporter.force_flush()


class EvaltraceSpanProcessor(WritesOnFlush, BatchSpanProcessor):
    """A `BatchSpanProcessor` for a `ParquetSpanExporter` (see `WritesOnFlush`)."""

    exporter: ParquetSpanExporter

    def __init__(self, exporter: ParquetSpanExporter, **kwargs: Any) -> None:
        super().__init__(exporter, **kwargs)
        self._watch(exporter, "spans")


class Recorder:
    """Handle returned by `record()`: flush or stop the recording; usable as a context manager."""

    def __init__(
        self, processor: EvaltraceSpanProcessor, log_processor: EvaltraceLogRecordProcessor | None = None
    ) -> None:
        self._processor = processor
        self._log_processor = log_processor
        self._stopped = False

    @property
    def directory(self) -> Path:
        """Folder the files are written to."""
        return self._processor.exporter.directory

    @property
    def run_id(self) -> str:
        """Label stored with every recorded span."""
        return self._processor.exporter.run_id

    @property
    def exporter(self) -> ParquetSpanExporter:
        """The underlying exporter."""
        return self._processor.exporter

    def flush(self) -> bool:
        """Write every span ended (and log record emitted) so far to a file now; False if a write failed."""
        if self._stopped:
            return True
        # Spans first: a reader that sees a log record's file should find its span's file too.
        spans = self._processor.force_flush()
        logs = self._log_processor.force_flush() if self._log_processor is not None else True
        return spans and logs

    def stop(self) -> None:
        """Write what is pending and stop recording (later spans are not recorded)."""
        global _active
        if self._stopped:
            return
        self._stopped = True
        processors: list[Any] = [self._processor]
        if self._log_processor is not None:
            processors.append(self._log_processor)
        for processor in processors:
            shutdown: Callable[[], object] = processor.shutdown  # the SDK method is unannotated
            shutdown()
        with _state_lock:
            if _active is self:
                _active = None
            for processor in processors:
                if processor in _sigterm_processors:
                    _sigterm_processors.remove(processor)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def record(
    directory: str | os.PathLike[str] | None = None,
    *,
    run_id: str | None = None,
    redaction: RedactionSettings | None = None,
    flush_interval: float | None = None,
    max_rows: int | None = None,
    handle_sigterm: bool = True,
    logs: bool = True,
) -> Recorder:
    """Record every span the application ends (and every log record it emits) to Parquet files.

    Attaches a batch processor with a `ParquetSpanExporter` to the global tracer provider,
    creating and setting an SDK `TracerProvider` only if none is set (OTel refuses to replace
    one); with `logs`, likewise a `ParquetLogExporter` to the global logger provider. Turns GenAI
    content capture on when the user has not set it and `EVALTRACE_CAPTURE_CONTENT` is not 0:
    call `record()` before instrumenting clients (instrumentations read it when they
    instrument). Arguments left out come from the environment (`EVALTRACE_DIR`, ...).

    Args:
        directory: folder for the files (default `EVALTRACE_DIR`, else `runs`).
        run_id: label stored with every span (default `EVALTRACE_RUN_ID`, else one per process).
        redaction: what to drop or mask before writing (default: from the environment).
        flush_interval: seconds before buffered spans are written (default 10).
        max_rows: buffered spans that trigger a file (default 50000).
        handle_sigterm: install a SIGTERM handler that writes pending spans, only if the
            application has none.
        logs: also record OTel log records (GenAI events) to `*.logs.parquet` files. A global
            logger provider that accepts no processors is left alone, with a warning.

    Returns:
        The `Recorder` handle. Calling `record()` again while it is active returns the same
        handle; asking for a different folder or run id raises `RuntimeError`.
    """
    from evaltrace.collector.recorder.exporter import ParquetSpanExporter  # here: it imports pyarrow

    global _active
    with _state_lock:
        if _active is not None:
            return _existing(_active, directory, run_id)
        apply_capture_default()
        provider = sdk_provider()
        exporter = ParquetSpanExporter(
            directory, run_id=run_id, redaction=redaction, flush_interval=flush_interval, max_rows=max_rows
        )
        processor = EvaltraceSpanProcessor(exporter)
        provider.add_span_processor(processor)
        log_processor = record_logs(exporter) if logs else None
        _active = Recorder(processor, log_processor)
    install_process_hooks(provider, processor, handle_sigterm=handle_sigterm)
    if log_processor is not None:
        install_process_hooks(provider, log_processor, handle_sigterm=handle_sigterm)
    return _active


def record_logs(spans: ParquetSpanExporter) -> EvaltraceLogRecordProcessor | None:
    """Attach a log exporter with the span exporter's settings to the global logger provider.

    Sets an SDK logger provider globally when none is set; `None` when the global one accepts no
    processors (said with a warning).
    """
    from evaltrace.collector.recorder.log_exporter import EvaltraceLogRecordProcessor, ParquetLogExporter

    provider = _sdk_logger_provider()
    if provider is None:
        return None
    processor = EvaltraceLogRecordProcessor(ParquetLogExporter(settings=spans.settings))
    provider.add_log_record_processor(processor)
    return processor


def _sdk_logger_provider() -> Any:
    """The global logger provider if it accepts processors, else a new SDK one set globally (or None)."""
    from opentelemetry import _logs
    from opentelemetry._logs._internal import ProxyLoggerProvider
    from opentelemetry.sdk._logs import LoggerProvider

    provider = _logs.get_logger_provider()
    if hasattr(provider, "add_log_record_processor"):
        return provider
    if isinstance(provider, ProxyLoggerProvider):
        _logs.set_logger_provider(LoggerProvider())
        provider = _logs.get_logger_provider()
        if hasattr(provider, "add_log_record_processor"):
            return provider
    logger.warning(
        "evaltrace: the global logger provider (%s) accepts no log record processors; log records "
        "(GenAI events) are not recorded. Add evaltrace.collector.ParquetLogExporter to it yourself",
        type(provider).__name__,
    )
    return None


def current() -> Recorder | None:
    """The active recording (`record()`'s or the one `opentelemetry-instrument` built), if any."""
    with _state_lock:
        return _active


def adopt(processor: EvaltraceSpanProcessor, log_processor: EvaltraceLogRecordProcessor | None = None) -> Recorder:
    """Register processors built by auto-configuration, so `record()` returns them, not second ones."""
    global _active
    with _state_lock:
        if _active is None:
            _active = Recorder(processor, log_processor)
        return _active


def _existing(active: Recorder, directory: str | os.PathLike[str] | None, run_id: str | None) -> Recorder:
    if directory is not None and Path(directory).resolve() != active.directory.resolve():
        raise RuntimeError(
            f"evaltrace is already recording to {active.directory}; call stop() on the handle "
            f"returned by record() before recording to {directory}"
        )
    if run_id is not None and run_id != active.run_id:
        raise RuntimeError(
            f"evaltrace is already recording run {active.run_id!r}; "
            f"call stop() on its handle before starting {run_id!r}"
        )
    return active


def sdk_provider() -> Any:
    """The global provider if it accepts processors, else a new SDK `TracerProvider` set globally.

    Raises:
        RuntimeError: the global provider is not the SDK's and accepts no span processors.
    """
    provider = trace.get_tracer_provider()
    if hasattr(provider, "add_span_processor"):
        return provider
    if not isinstance(provider, trace.ProxyTracerProvider):
        raise RuntimeError(
            f"the global tracer provider ({type(provider).__name__}) does not accept span processors; use "
            "the OpenTelemetry SDK's TracerProvider, or add evaltrace.collector.ParquetSpanExporter to it yourself"
        )
    trace.set_tracer_provider(TracerProvider())
    # Another thread may have won the race; OTel then kept its provider, which is what we use.
    provider = trace.get_tracer_provider()
    if not hasattr(provider, "add_span_processor"):
        raise RuntimeError("could not set an OpenTelemetry SDK tracer provider")
    return provider


def install_process_hooks(provider: Any, processor: Any, *, handle_sigterm: bool = True) -> None:
    """Install the multiprocessing exit hook and (optionally) the SIGTERM handler, once each.

    `processor` is one of evaltrace's span or log-record processors: it is flushed on SIGTERM and
    shut down when a multiprocessing worker exits.
    """
    global _sigterm_provider
    with _state_lock:
        if id(provider) not in _hooked_providers:
            _hooked_providers.add(id(provider))
            multiprocessing.util.register_after_fork(provider, _finalize_in_worker)
        _sigterm_processors.append(processor)
        _sigterm_provider = provider
    if handle_sigterm:
        _install_sigterm_handler()


def _finalize_in_worker(provider: Any) -> None:
    multiprocessing.util.Finalize(None, _flush_and_shutdown, args=(provider,), exitpriority=_MP_EXIT_PRIORITY)


def _flush_and_shutdown(provider: Any) -> None:
    for processor in list(_sigterm_processors):
        _quietly(processor.shutdown)
    _quietly(provider.shutdown)


def _install_sigterm_handler() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # the application (or a framework) handles SIGTERM itself; leave it alone
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # no signals here (embedded interpreter)
        return


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # Flush on a helper thread with a bounded join: if the interrupted main thread holds a
    # lock the flush needs, the process still dies in bounded time instead of hanging.
    worker = threading.Thread(target=_flush_all, name="evaltrace-sigterm", daemon=True)
    worker.start()
    worker.join(_SIGTERM_FLUSH_SECONDS)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _flush_all() -> None:
    for processor in list(_sigterm_processors):
        _quietly(processor.force_flush)
    if _sigterm_provider is not None:
        _quietly(_sigterm_provider.force_flush)


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception:
        logger.exception("evaltrace: error while flushing spans")
