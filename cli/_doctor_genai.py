"""The doctor's checks of the GenAI instrumentation: does it load, and will its content be recorded?

These fail without a word at run time: an instrumentor that does not import is skipped by
`opentelemetry-instrument` with a log line nobody reads; two packages that instrument the same
client under one name record every call twice; content capture switched off, or content sent as
log records while logs are not recorded, leaves traces that no spec check can pass.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from importlib.metadata import Distribution, EntryPoint, PackageNotFoundError, entry_points, version

from evaltrace.collector.traces.diagnose import Check

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
    "ENABLE_SENSITIVE_DATA": ("false", "0", "no", "off"),  # Microsoft Agent Framework's content switch
    # The anthropic SDK's own spans: content only in mode `content` (evaltrace's distro sets it when unset).
    "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE": ("metadata_only", "metadata", "none", "off", "false", "0"),
}
"""Variables that switch message content off, and the values that do it."""


def _env(name: str) -> str:
    """A variable as set, stripped: read raw, not through collector/settings.py, to report a bad value."""
    # `doctor` diagnoses the recorder's and OTel's variables: a malformed one is a problem it lists, not a stop.
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
            continue
        conflict = _dependency_conflict(ep)
        if conflict is not None:
            owner = ep.dist.name if ep.dist is not None else ep.value
            msg = f"'{ep.name}' ({owner}) is skipped by opentelemetry-instrument although its library is installed:"
            fix = f"install what it names, or switch {owner} on in the app (its instrumentor's .instrument())"
            # A warning: the app may switch it on in code, as OpenInference documents for LlamaIndex.
            checks.append(Check("instrumentation", "warn", f"{msg} {conflict}", fix))
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


_INSTRUMENTS_EXTRA = re.compile(r"""extra\s*==\s*["']instruments["']""")
_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _dependency_conflict(ep: EntryPoint) -> str | None:
    """Why `opentelemetry-instrument` skips an instrumentor whose library is installed, or `None`.

    It skips an instrumentor when any package of its `instruments` extra is missing, even one for
    another library (openinference-instrumentation-llama-index 4.6 lists
    llama-index-multi-modal-llms-openai beside llama-index-core): the app then records nothing.
    An instrumentor none of whose libraries is installed is skipped too, rightly: not reported.
    """
    from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts

    dist = ep.dist
    if dist is None or not any(_installed(name) for name in _instrumented(dist)):
        return None
    conflict = get_dist_dependency_conflicts(dist)
    return None if conflict is None else str(conflict)


def _instrumented(dist: Distribution) -> list[str]:
    """The package names of a distribution's `instruments` extra (the libraries it instruments)."""
    names = []
    for requirement in dist.requires or []:
        match = _REQUIREMENT_NAME.match(requirement)
        if match is not None and _INSTRUMENTS_EXTRA.search(requirement):
            names.append(match.group(0))
    return names


def _installed(name: str) -> bool:
    try:
        version(name)
    except PackageNotFoundError:
        return False
    return True


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
    on_spans = _env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT").upper() in (
        "SPAN_ONLY",
        "SPAN_AND_EVENT",
    )
    if "evaltrace" in names or on_spans:
        return Check("events", "ok", f"{_EVENTS_PACKAGE} {events_version}: its message content will be recorded")
    msg = f"{_EVENTS_PACKAGE} sends message content as log records (GenAI events), and OTEL_LOGS_EXPORTER"
    msg += f"={logs_exporters or 'none'} does not record them: traces will have no input, answer or arguments"
    return Check("events", "problem", msg, "OTEL_LOGS_EXPORTER=evaltrace (with any other exporters after it)")
