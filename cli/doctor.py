"""`evaltrace doctor [PATH...]`: check that recording will work here, and what a recording lacks.

Recording fails silently in several ways: no configurator for `opentelemetry-instrument`, a
misspelt or uninstalled exporter name, metrics or logs exporters whose failure disables tracing,
another distro winning the entry-point race, an unwritable folder, an instrumentation that does
not load, content capture switched off. Given recorded runs, the doctor also reads them
(`evaltrace.collector.traces.diagnose`): content left in unrecorded log records, traces without content,
model calls that became traces of their own. Each check prints one line: `ok`, `warn` (works,
but worth knowing) or `problem` (recording or scoring will not work as intended) with the fix.
Exit 0 when there is no problem, 2 otherwise (1 is reserved for gate failures).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.cli._doctor_genai import _env, genai_checks
from evaltrace.collector.errors import EvaltraceError
from evaltrace.collector.terminal import inline
from evaltrace.collector.traces.diagnose import Check

_PIN = "OTEL_PYTHON_DISTRO=evaltrace OTEL_PYTHON_CONFIGURATOR=evaltrace"
_OTLP_NAMES = {"otlp", "otlp_proto_grpc", "otlp_proto_http"}
_OTLP_BY_PROTOCOL = {"grpc": "otlp_proto_grpc", "http/protobuf": "otlp_proto_http"}


def _group(name: str) -> list[EntryPoint]:
    return list(entry_points(group=name))


def check_exporter_entry_point() -> Check:
    """The `evaltrace` traces-exporter entry point exists and loads a SpanExporter."""
    from opentelemetry.sdk.trace.export import SpanExporter

    found = [ep for ep in _group("opentelemetry_traces_exporter") if ep.name == "evaltrace"]
    fix = "reinstall evaltrace (pip install --force-reinstall evaltrace) in this environment"
    if not found:
        return Check("exporter", "problem", "no 'evaltrace' entry point in opentelemetry_traces_exporter", fix)
    try:
        cls = found[0].load()
    except Exception as exc:
        return Check("exporter", "problem", f"the 'evaltrace' exporter does not load: {exc}", fix)
    if not (isinstance(cls, type) and issubclass(cls, SpanExporter)):
        return Check("exporter", "problem", f"'evaltrace' names {cls!r}, not a SpanExporter", fix)
    return Check("exporter", "ok", f"'evaltrace' loads {cls.__module__}.{cls.__qualname__}")


def _chosen(group: str, pin_var: str) -> tuple[str | None, list[str]]:
    names = [ep.name for ep in _group(group)]
    pinned = _env(pin_var)
    if pinned:
        return (pinned if pinned in names else None), names
    return (names[0] if names else None), names


def check_distro_and_configurator() -> list[Check]:
    """Which distro and configurator `opentelemetry-instrument` would use, and why it matters."""
    checks: list[Check] = []
    for kind, group, var in (
        ("distro", "opentelemetry_distro", "OTEL_PYTHON_DISTRO"),
        ("configurator", "opentelemetry_configurator", "OTEL_PYTHON_CONFIGURATOR"),
    ):
        chosen, names = _chosen(group, var)
        if _env(var) and chosen is None:
            fix = f"set {var} to one of {names} or unset it"
            checks.append(Check(kind, "problem", f"{var}={_env(var)} names no installed {kind}", fix))
        elif chosen is None:
            fix = "reinstall evaltrace, which ships one"
            msg = "none installed: opentelemetry-instrument would ignore OTEL_TRACES_EXPORTER"
            checks.append(Check(kind, "problem" if kind == "configurator" else "warn", msg, fix))
        elif len(names) > 1 and chosen != "evaltrace":
            msg = f"'{chosen}' would be used (installed: {', '.join(names)}); it may default metrics/logs to OTLP"
            checks.append(Check(kind, "warn", msg, f"pin evaltrace's: {_PIN}"))
        elif len(names) > 1 and not _env(var):
            msg = f"'{chosen}' comes first now, but several are installed ({', '.join(names)}) and discovery order"
            msg += " can change"
            checks.append(Check(kind, "warn", msg, f"pin it: {_PIN}"))
        else:
            checks.append(Check(kind, "ok", f"opentelemetry-instrument would use '{chosen}'"))
    return checks


def _resolve(name: str, signal: str) -> str:
    if name != "otlp":
        return name
    protocol = _env(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or _env("OTEL_EXPORTER_OTLP_PROTOCOL")
    if not protocol:
        return "otlp_proto_grpc"
    return _OTLP_BY_PROTOCOL.get(protocol, f"<unsupported OTLP protocol {protocol!r}>")


def check_traces_exporters() -> list[Check]:
    """OTEL_TRACES_EXPORTER lists evaltrace (first) and only installed exporters."""
    raw = _env("OTEL_TRACES_EXPORTER")
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if not names or raw.lower() == "none":
        fix = "set OTEL_TRACES_EXPORTER=evaltrace, or call evaltrace.collector.record() in the app"
        return [
            Check("traces", "warn", "OTEL_TRACES_EXPORTER is not set: opentelemetry-instrument records nothing", fix)
        ]
    installed = {ep.name for ep in _group("opentelemetry_traces_exporter")}
    checks = [_installed_check("traces", name, _resolve(name, "traces"), installed) for name in names]
    if "evaltrace" not in names:
        fix = f"OTEL_TRACES_EXPORTER=evaltrace,{raw}"
        checks.append(Check("traces", "warn", "evaltrace is not listed: spans are not recorded locally", fix))
    elif names[0] != "evaltrace":
        fix = f"OTEL_TRACES_EXPORTER=evaltrace,{','.join(n for n in names if n != 'evaltrace')}"
        msg = "evaltrace is not first: at exit its file waits for the exporters before it (up to 30 s each)"
        checks.append(Check("traces", "warn", msg, fix))
    return checks


def _installed_check(signal: str, name: str, entry: str, installed: set[str]) -> Check:
    if entry in installed:
        return Check(signal, "ok", f"exporter '{name}' is installed" + (f" (as {entry})" if entry != name else ""))
    known = ", ".join(sorted(installed)) or "none"
    fix = f"remove '{name}' from OTEL_{signal.upper()}_EXPORTER or install the package that provides it"
    if name == "otlp" or name in _OTLP_NAMES:
        fix = "pip install opentelemetry-exporter-otlp, or set OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"
    msg = f"exporter '{name}' is not installed (no '{entry}' entry point; installed: {known});"
    msg += " OpenTelemetry initialisation would fail and disable ALL tracing"
    return Check(signal, "problem", msg, fix)


def signal_default(var: str) -> str:
    """What an unset `OTEL_<SIGNAL>_EXPORTER` becomes under the distro `opentelemetry-instrument` would use."""
    distro, _ = _chosen("opentelemetry_distro", "OTEL_PYTHON_DISTRO")
    if distro == "evaltrace":
        from evaltrace.collector.recorder.autoconf import apply_env_defaults

        # Asked of the distro itself, on a copy of the environment, so the two never disagree.
        return apply_env_defaults(dict(os.environ)).get(var, "none")
    return "otlp" if distro else "none"


def check_other_signals() -> list[Check]:
    """Metrics and logs exporters that would make initialisation fail."""
    distro, _ = _chosen("opentelemetry_distro", "OTEL_PYTHON_DISTRO")
    checks: list[Check] = []
    for signal in ("metrics", "logs"):
        var = f"OTEL_{signal.upper()}_EXPORTER"
        value = _env(var)
        if not value:
            value = signal_default(var)
            if distro not in (None, "evaltrace") and value == "otlp":
                msg = f"{var} is unset; distro '{distro}' defaults it to otlp (sent to localhost:4317)"
                checks.append(Check(signal, "warn", msg, f"set {var}=none, or pin evaltrace: {_PIN}"))
            else:
                checks.append(Check(signal, "ok", f"{var} is unset (defaults to {value})"))
                continue
        if value.lower() == "none":
            checks.append(Check(signal, "ok", f"{var}=none"))
            continue
        installed = {ep.name for ep in _group(f"opentelemetry_{signal}_exporter")}
        names = [n.strip() for n in value.split(",") if n.strip()]
        checks.extend(_installed_check(signal, n, _resolve(n, signal), installed) for n in names)
    return checks


def check_directory() -> Check:
    """EVALTRACE_DIR exists and is writable, or can be created."""
    raw = _env("EVALTRACE_DIR") or "runs"
    path = Path(raw).expanduser().absolute()
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    fix = "set EVALTRACE_DIR to a writable folder"
    if not probe.is_dir():
        return Check("directory", "problem", f"{path} cannot be created: {probe} is not a folder", fix)
    if not os.access(probe, os.W_OK | os.X_OK):
        return Check("directory", "problem", f"{probe} is not writable, so {path} cannot be written", fix)
    state = "exists and is writable" if probe == path else "will be created when the first file is written"
    return Check("directory", "ok", f"EVALTRACE_DIR {path} {state}")


def check_otlp() -> list[Check]:
    """When OTLP forwarding is listed: endpoint and timeout advice."""
    names = {n.strip() for n in _env("OTEL_TRACES_EXPORTER").split(",")}
    if not names & _OTLP_NAMES:
        return []
    endpoint = _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_ENDPOINT") or "the default"
    checks = [Check("otlp", "ok", f"forwarding traces to {endpoint} endpoint")]
    if not (_env("OTEL_EXPORTER_OTLP_TIMEOUT") or _env("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")):
        msg = "OTEL_EXPORTER_OTLP_TIMEOUT is unset: an unreachable endpoint retries for 10 s per batch and can delay"
        msg += " exit by up to 30 s"
        checks.append(Check("otlp", "warn", msg, "set OTEL_EXPORTER_OTLP_TIMEOUT=5 (seconds)"))
    return checks


def check_sdk_enabled() -> Check:
    """OTEL_SDK_DISABLED turns the whole SDK (and so recording) off."""
    if _env("OTEL_SDK_DISABLED").lower() == "true":
        return Check("sdk", "problem", "OTEL_SDK_DISABLED=true: no span is recorded", "unset OTEL_SDK_DISABLED")
    return Check("sdk", "ok", "the OpenTelemetry SDK is enabled")


def check_redaction() -> Check:
    """Redaction patterns compile (bad ones are skipped at run time, with a logged error)."""
    from evaltrace.collector.recorder.redact import parse_env_patterns

    kept, errors = parse_env_patterns(os.environ.get("EVALTRACE_REDACT_PATTERNS", ""))
    if errors:
        msg = "EVALTRACE_REDACT_PATTERNS: " + "; ".join(errors) + "; recording would skip it"
        return Check("redaction", "problem", msg, "fix the pattern (one regex per line, or a JSON array)")
    return Check("redaction", "ok", f"{len(kept)} custom redaction pattern(s)" if kept else "no custom patterns")


def run_checks() -> list[Check]:
    """All doctor checks, in report order."""
    return [
        check_exporter_entry_point(),
        *check_distro_and_configurator(),
        *check_traces_exporters(),
        *check_other_signals(),
        check_directory(),
        *check_otlp(),
        check_sdk_enabled(),
        check_redaction(),
        *genai_checks(_env("OTEL_LOGS_EXPORTER") or signal_default("OTEL_LOGS_EXPORTER")),
    ]


def doctor(
    paths: Annotated[
        list[str] | None,
        typer.Argument(metavar="[PATH]...", help="Recorded runs to inspect too. " + opt.PATHS_HELP, show_default=False),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print the checks as one JSON object.")] = False,
) -> None:
    """Check that recording spans will work here and, given recorded runs, what they lack for scoring."""
    import logging

    logging.getLogger("evaltrace").disabled = True  # the checks report bad values themselves
    checks = run_checks()
    if paths:
        from evaltrace.collector.traces.diagnose import recording_checks

        checks += recording_checks(paths)
    problems = sum(c.status == "problem" for c in checks)
    if as_json:
        typer.echo(json.dumps({"problems": problems, "checks": [asdict(c) for c in checks]}))
    else:
        for check in checks:
            typer.echo(inline(check.line()))
    if problems:
        # Said here rather than with collector's private plural(): the CLI imports no new private module.
        raise EvaltraceError(f"{problems} problem{'' if problems == 1 else 's'} found")
