"""Where a recording's spans came from, and the fix for each doctor finding that fits that source.

One finding has a different cause by source. A trace whose root span was never recorded means,
in a Python process recording itself, that the run's span never ended or the process exited
before it was exported; from another language's app sending to `evaltrace collect`, that the
sender stopped before it exported its root span; from an OTLP file, that the file was cut before
the run ended. Telling a Go or Node.js user to wrap their run in `agent_run` or to unset
`EVALTRACE_CAPTURE_CONTENT` names a fix they cannot apply, so each fix is chosen by source.

The source is read from what the recording holds: the span files written by `evaltrace import`
(or for an OTLP file given as a PATH) name that file in their footer (`evaltrace.imported_from`,
matched to spans by run id); otherwise the SDK's `telemetry.sdk.language` resource attribute
tells a Python app (or an SDK that set none) from another language's, whose spans can only have
come through `evaltrace collect`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # pyarrow is loaded only when a recording is read (`doctor` without a path needs none)
    from evaltrace.collector.runfiles.runfiles import RecordingLosses
    from evaltrace.collector.runfiles.spans import Span

OriginKind = Literal["python", "sender", "file"]

Problem = Literal["root", "content", "wrap", "second", "duplicates", "tool_stop"]
"""The findings whose fix depends on the source (see `fix_for`)."""


@dataclass(frozen=True, order=True)
class Origin:
    """Where the spans of a trace came from: `name` is the sender's language or the OTLP file's name."""

    kind: OriginKind
    name: str = ""


PYTHON = Origin("python")

_PY_CONTENT = (
    "turn content capture on: unset EVALTRACE_CAPTURE_CONTENT=0 and the instrumentation's own switch"
    " (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, OPENINFERENCE_HIDE_INPUTS/OUTPUTS,"
    " TRACELOOP_TRACE_CONTENT, ENABLE_SENSITIVE_DATA, ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content)"
)
_WRAP = (
    "wrap each run of the agent in `with evaltrace.collector.agent_run('my-agent', input=question) as run:`"
    " and set `run.output = answer`"
)

_FIXES: dict[Problem, dict[OriginKind, str]] = {
    "root": {
        "python": "end the run's root span before the process exits (a `with` block such as"
        " `evaltrace.collector.agent_run`) and let the process exit normally or call the tracer provider's"
        " shutdown(), which exports what is left; if the trace was continued from another service, record it too",
        "sender": "the {name} app's root span never reached `evaltrace collect`: shut its tracer provider down"
        " (which flushes) before the app exits, keep `collect` running until then, and check the app's"
        " exporter errors (a refused or timed-out export drops the batch)",
        "file": "{name} was cut before these runs ended (its root spans are not in it): export it again"
        " once the run has finished and its exporter was shut down",
    },
    "content": {
        "python": _PY_CONTENT,
        "sender": "turn message content capture on in the {name} app's GenAI instrumentation"
        " (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true for OpenTelemetry's, or the vendor's switch)",
        "file": "the app that wrote {name} did not capture message content: turn its instrumentation's content"
        " capture on and export the run again",
    },
    "wrap": {
        "python": _WRAP,
        "sender": "in the {name} app, start one span around each run of the agent (gen_ai.operation.name="
        "invoke_agent, with the question and answer) so its model calls share one trace",
        "file": "in the app that wrote {name}, start one span around each run of the agent so its model calls"
        " share one trace",
    },
    "second": {
        "python": "disable one of them, e.g. OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=openai",
        "sender": "disable one of the two instrumentations of the model client in the {name} app",
        "file": "disable one of the two instrumentations of the model client in the app that wrote {name}",
    },
    "duplicates": {
        "python": "if two instrumentations record the same client or tool, disable one"
        " (OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=<name>)",
        "sender": "if two instrumentations in the {name} app record the same client or tool, disable one",
        "file": "if two instrumentations in the app that wrote {name} record the same client or tool, disable one",
    },
    "tool_stop": {
        "python": "record the requested calls: turn content capture on (see recording/content), or record each"
        " tool run (`evaltrace.collector.tool_call` or the framework's instrumentation)",
        "sender": "record the requested calls in the {name} app: its instrumentation's content capture"
        " (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true) or one execute_tool span per tool run",
        "file": "the app that wrote {name} recorded neither the requested calls nor the tool runs: turn its"
        " content capture on or record its tool runs, and export again",
    },
}


def fix_for(problem: Problem, origins: Iterable[Origin]) -> str:
    """The fix of `problem` for each source among `origins` (the Python fix when none is known)."""
    chosen = sorted(set(origins)) or [PYTHON]
    fixes = [_FIXES[problem][origin.kind].format(name=origin.name) for origin in chosen]
    if len(fixes) == 1:
        return fixes[0]
    return "; ".join(f"for {_label(origin)}: {fix}" for origin, fix in zip(chosen, fixes, strict=True))


def _label(origin: Origin) -> str:
    if origin.kind == "python":
        return "the Python app's traces"
    if origin.kind == "sender":
        return f"the traces sent by the {origin.name} app"
    return f"the traces imported from {origin.name}"


def origin_of(spans: list[Span], imported: dict[str, str]) -> Origin:
    """Where the spans of one trace came from; `imported` maps run ids to OTLP file names."""
    for span in spans:
        if span.run_id is not None and span.run_id in imported:
            return Origin("file", imported[span.run_id])
    for span in spans:
        language = span.resource.get("telemetry.sdk.language")
        if isinstance(language, str) and language:
            return PYTHON if language.lower() == "python" else Origin("sender", language)
    return PYTHON


def read_footers(span_files: Iterable[Path]) -> tuple[RecordingLosses, dict[str, str]]:
    """The writers' losses and the run ids of imported OTLP files (run id -> file name), from the footers only.

    Raises:
        InputError: as `open_run_file`.
    """
    from evaltrace.collector.runfiles.runfiles import LossTally, open_run_file

    losses = LossTally()
    imported: dict[str, str] = {}
    for path in span_files:
        handle = open_run_file(path)
        try:
            losses.add(handle)
            meta = handle.metadata.metadata or {}
            source, run_id = meta.get(b"evaltrace.imported_from"), meta.get(b"evaltrace.run_id")
            if source is not None and run_id is not None:
                imported[run_id.decode("utf-8", "replace")] = source.decode("utf-8", "replace")
        finally:
            handle.close()
    return losses.total(), imported
