"""evaltrace's own distro and configurator for `opentelemetry-instrument`.

Without a configurator, `opentelemetry-instrument` ignores `OTEL_TRACES_EXPORTER` silently, and
`opentelemetry-distro` defaults metrics and logs to OTLP over gRPC, which can make initialisation
fail and disable tracing altogether. So evaltrace ships:

- `EvaltraceDistro` (entry point `opentelemetry_distro: evaltrace`): defaults only where the user
  set nothing. When the traces exporters name `evaltrace`: logs to `evaltrace`, metrics to `none`,
  GenAI content capture on (`_genai_env.py`). The traces exporter itself is never defaulted:
  installing evaltrace must not start recording in applications that did not ask for it.
- `EvaltraceConfigurator` (entry point `opentelemetry_configurator: evaltrace`): the SDK's, plus
  evaltrace's processors (queue drops counted, the file written on `force_flush`) and `record()`'s
  process hooks. A failed initialisation logs whether recording is disabled, pointing to
  `evaltrace doctor`, then propagates as OTel does.

`instrument_installed()` does in-process what `opentelemetry-instrument` does (for `evaltrace run`).
With `opentelemetry-distro` installed too, whichever entry point is found first wins;
`OTEL_PYTHON_DISTRO=evaltrace OTEL_PYTHON_CONFIGURATOR=evaltrace` pins evaltrace's.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Callable, MutableMapping
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.distro import BaseDistro  # type: ignore[attr-defined]  # module is untyped
from opentelemetry.sdk._configuration import _initialize_components, _OTelSDKConfigurator
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from evaltrace.collector.recorder._genai_env import apply_capture_default
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.log_exporter import EvaltraceLogRecordProcessor, ParquetLogExporter

logger = logging.getLogger("evaltrace")

EXPORTER_NAME = "evaltrace"
_TRACES = "OTEL_TRACES_EXPORTER"
# What the other signals default to when evaltrace records traces and the user set nothing.
_SIGNAL_DEFAULTS = {"OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": EXPORTER_NAME}


def traces_exporter_names(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """The names listed in `OTEL_TRACES_EXPORTER` (stripped, empty ones removed)."""
    env = os.environ if environ is None else environ
    return [name.strip() for name in env.get(_TRACES, "").split(",") if name.strip()]


def apply_env_defaults(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """When evaltrace records traces, fill in what the user left unset; return what was set.

    Logs default to `evaltrace`, metrics to `none`, and GenAI content capture is turned on
    (see `_genai_env.apply_capture_default`). A value the user set, even empty-looking ones
    such as `none`, is never changed.
    """
    env = os.environ if environ is None else environ
    if EXPORTER_NAME not in traces_exporter_names(env):
        return {}
    applied: dict[str, str] = {}
    for name, value in _SIGNAL_DEFAULTS.items():
        if not env.get(name, "").strip():
            env[name] = value
            applied[name] = value
    applied.update(apply_capture_default(env))
    return applied


class EvaltraceDistro(BaseDistro):  # type: ignore[misc]  # BaseDistro is untyped
    """Distro for `opentelemetry-instrument` that does not require `opentelemetry-distro`."""

    def _configure(self, **kwargs: Any) -> None:
        apply_env_defaults()


def _processor_for(exporter: SpanExporter, *args: Any, **kwargs: Any) -> BatchSpanProcessor:
    """Processor factory for auto-configuration: evaltrace's processor for evaltrace's exporter."""
    from evaltrace.collector.recorder.recording import EvaltraceSpanProcessor

    if isinstance(exporter, ParquetSpanExporter):
        processor = EvaltraceSpanProcessor(exporter, *args, **kwargs)
        _built.append(processor)
        return processor
    return BatchSpanProcessor(exporter, *args, **kwargs)


def _log_processor_for(exporter: Any, *args: Any, **kwargs: Any) -> BatchLogRecordProcessor:
    """Log-record processor factory: evaltrace's processor for evaltrace's log exporter."""
    if isinstance(exporter, ParquetLogExporter):
        processor = EvaltraceLogRecordProcessor(exporter, *args, **kwargs)
        _built_logs.append(processor)
        return processor
    return BatchLogRecordProcessor(exporter, *args, **kwargs)


_built: list[Any] = []
_built_logs: list[EvaltraceLogRecordProcessor] = []


def _accepts_processor_factory(name: str = "export_span_processor") -> bool:
    # The processor factories are recent SDK additions, and a declarative config file makes the
    # SDK ignore configurator kwargs (with a warning), so only pass them where they are used.
    if os.environ.get("OTEL_CONFIG_FILE"):
        return False
    return name in inspect.signature(_initialize_components).parameters


class EvaltraceConfigurator(_OTelSDKConfigurator):
    """The SDK configurator plus evaltrace's processor and process hooks."""

    def _configure(self, **kwargs: Any) -> None:
        apply_env_defaults()
        if _accepts_processor_factory():
            kwargs.setdefault("export_span_processor", _processor_for)
        if _accepts_processor_factory("export_log_record_processor"):
            kwargs.setdefault("export_log_record_processor", _log_processor_for)
        configure: Callable[..., object] = super()._configure  # the SDK method is unannotated
        try:
            configure(**kwargs)
        except Exception as exc:
            recording = _warn_failed(exc)
            if recording:  # tracing came up before the failure (e.g. in metrics): keep it safe
                _hook_built_processors()
            raise
        _hook_built_processors()


def _hook_built_processors() -> None:
    from evaltrace.collector.recorder.recording import adopt, install_process_hooks

    provider = trace.get_tracer_provider()
    logs = _built_logs[0] if _built_logs else None
    for processor in _built:
        install_process_hooks(provider, processor, handle_sigterm=True)
        adopt(processor, logs)
    for log_processor in _built_logs:
        install_process_hooks(provider, log_processor, handle_sigterm=True)
    _built.clear()
    _built_logs.clear()


def instrument_installed() -> bool:
    """Load the installed instrumentations unless OpenTelemetry is configured; True if loaded here.

    What `opentelemetry-instrument` does before the app runs: GenAI content capture on unless the
    user chose (or `EVALTRACE_CAPTURE_CONTENT=0`), then every `opentelemetry_instrumentor` entry
    point through OpenTelemetry's own loader with this distro (`OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`
    honoured; instrumentors whose library is missing or of a conflicting version skipped). When a
    tracer provider is already set, `opentelemetry-instrument` (or the app) did this, and loading
    them again would only warn. A failing instrumentor is logged and the rest of the app goes on
    uninstrumented by it, as under `opentelemetry-instrument`.
    """
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return False
    apply_capture_default()  # instrumentations read it when they instrument: set it first
    try:
        from opentelemetry.instrumentation.auto_instrumentation._load import _load_instrumentors

        _load_instrumentors(EvaltraceDistro())  # type: ignore[no-untyped-call]  # OTel's loader is unannotated
    except Exception as exc:  # the instrumentor's own failure: never the app's
        logger.warning(
            "evaltrace: loading the installed instrumentations failed (%s: %s); the agent's calls may "
            "not be recorded. Run `evaltrace doctor` to find the cause.",
            type(exc).__name__,
            exc,
        )
    return True


def _warn_failed(exc: BaseException) -> bool:
    recording = any(isinstance(getattr(p, "exporter", None), ParquetSpanExporter) for p in _built) and hasattr(
        trace.get_tracer_provider(), "add_span_processor"
    )
    state = "evaltrace is still recording traces" if recording else "evaltrace recording is DISABLED"
    logger.warning(
        "evaltrace: OpenTelemetry auto-configuration failed (%s: %s); %s. Run `evaltrace doctor` to find the cause.",
        type(exc).__name__,
        exc,
        state,
    )
    return recording
