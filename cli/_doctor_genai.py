"""The doctor's checks of the GenAI instrumentation: does it load, and will its content be recorded?

These fail without a word at run time: an instrumentor that does not import is skipped by
`opentelemetry-instrument` with a log line nobody reads; two packages that instrument the same
client under one name record every call twice; content capture switched off, or content sent as
log records while logs are not recorded, leaves traces that no spec check can pass.
"""

from __future__ import annotations

import os
from collections import defaultdict
from importlib.metadata import PackageNotFoundError, entry_points, version

from evaltrace.collector.diagnose import Check

_EVENTS_PACKAGE = "opentelemetry-instrumentation-openai-v2"
"""Sends message content as log records (GenAI events) unless told to put it on spans."""

_CONTENT_OFF: dict[str, tuple[str, ...]] = {
    "EVALTRACE_CAPTURE_CONTENT": ("0", "false", "no", "off"),
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": ("false", "0", "no_content"),
    "OPENINFERENCE_HIDE_INPUTS": ("true", "1"),
    "OPENINFERENCE_HIDE_OUTPUTS": ("true", "1"),
    "OPENINFERENCE_HIDE_INPUT_MESSAGES": ("true", "1"),
    "OPENINFERENCE_HIDE_OUTPUT_MESSAGES": ("true", "1"),
    "TRACELOOP_TRACE_CONTENT": ("false", "0"),
}
"""Variables that switch message content off, and the values that do it."""


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def genai_checks(logs_exporters: str) -> list[Check]:
    """Every GenAI instrumentation check; `logs_exporters` is what OTEL_LOGS_EXPORTER will be."""
    return [*check_instrumentors(), check_content_capture(), check_events_recorded(logs_exporters)]


def check_instrumentors() -> list[Check]:
    """Each installed instrumentor loads, and no two share a name (both would patch the same client)."""
    found: dict[str, list[str]] = defaultdict(list)
    checks: list[Check] = []
    disabled = {n.strip() for n in _env("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS").split(",") if n.strip()}
    for ep in entry_points(group="opentelemetry_instrumentor"):
        if ep.name in disabled or "*" in disabled:
            continue
        found[ep.name].append(ep.value)
        try:
            ep.load()
        except Exception as exc:
            owner = ep.dist.name if ep.dist is not None else ep.value
            msg = f"'{ep.name}' ({owner}) does not load, so opentelemetry-instrument skips it: {exc}"
            checks.append(Check("instrumentation", "problem", msg, _load_fix(owner)))
    for name, values in sorted(found.items()):
        if len(values) > 1:
            msg = f"{len(values)} instrumentors are named '{name}' ({', '.join(values)}): each model call is"
            msg += " recorded twice"
            fix = "uninstall one of them, or OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=" + name + " and instrument in code"
            checks.append(Check("instrumentation", "warn", msg, fix))
    if not checks:
        names = ", ".join(sorted(found)) or "none"
        checks.append(Check("instrumentation", "ok", f"instrumentors that load: {names}"))
    return checks


def _load_fix(owner: str) -> str:
    if owner == _EVENTS_PACKAGE:
        return "pip install 'evaltrace[openai]', which pins versions of it and opentelemetry-util-genai that work"
    return f"reinstall {owner} with versions of its dependencies it supports"


def check_content_capture() -> Check:
    """No variable switches message content off."""
    off = [f"{name}={_env(name)}" for name, values in _CONTENT_OFF.items() if _env(name).lower() in values]
    if off:
        msg = f"message content is switched off ({', '.join(off)}): spec checks on inputs, answers and"
        msg += " arguments will fail for want of evidence"
        return Check("content", "warn", msg, "unset " + ", ".join(o.split("=")[0] for o in off))
    return Check("content", "ok", "message content capture is on")


def check_events_recorded(logs_exporters: str) -> Check:
    """Content that an instrumentation sends as log records is recorded with the spans."""
    try:
        events_version = version(_EVENTS_PACKAGE)
    except PackageNotFoundError:
        return Check("events", "ok", "no installed instrumentation sends content as log records only")
    names = {n.strip() for n in logs_exporters.split(",") if n.strip()}
    on_spans = _env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").upper() in ("SPAN_ONLY", "SPAN_AND_EVENT")
    if "evaltrace" in names or on_spans:
        return Check("events", "ok", f"{_EVENTS_PACKAGE} {events_version}: its message content will be recorded")
    msg = f"{_EVENTS_PACKAGE} sends message content as log records (GenAI events), and OTEL_LOGS_EXPORTER"
    msg += f"={logs_exporters or 'none'} does not record them: traces will have no input, answer or arguments"
    return Check("events", "problem", msg, "OTEL_LOGS_EXPORTER=evaltrace (with any other exporters after it)")
