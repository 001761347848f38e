"""What a recording says about how it was recorded: the findings behind `evaltrace doctor PATH`.

A recording can be complete as files and still useless for scoring, and nothing fails when that
happens: the instrumentation sent message content somewhere evaltrace did not record (GenAI
events as log records), content capture was off, or no span wrapped the agent's run, so each
model call became a trace of its own. Scoring such a run gives noise, so the doctor reads the
rebuilt traces and names each of these with its fix.

Each check is one function from the tally of a recording to a `Check`; the tally is built in a
single pass over the traces (`tally_recording`), so a large run is read once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from evaltrace.collector.terminal import plural

if TYPE_CHECKING:  # the reader and converter load pyarrow and pydantic: `doctor` without a path needs neither
    from evaltrace.collector.convert.records import Trace
    from evaltrace.collector.store.spans import Span

PathArg = str | os.PathLike[str]

Status = Literal["ok", "warn", "problem"]

_EVENTS_SCOPES = ("opentelemetry.instrumentation.openai_v2", "opentelemetry.util.genai")
"""Instrumentations whose default mode sends message content as log records (GenAI events)."""

_WRAP_FIX = (
    "wrap each run of the agent in `with evaltrace.collector.agent_run('my-agent', input=question) as run:` "
    "and set `run.output = answer`"
)


@dataclass(frozen=True)
class Check:
    """One finding: `ok`, `warn` (works, worth knowing) or `problem` (scores would mislead), with its fix."""

    name: str
    status: Status
    message: str
    fix: str | None = None

    def line(self) -> str:
        """The finding as one report line."""
        text = f"{self.status:<8}{self.name}: {self.message}"
        return f"{text} Fix: {self.fix}" if self.fix else text


@dataclass
class RecordingTally:
    """What one pass over a recording counted (see `tally_recording`)."""

    traces: int = 0
    """Rebuilt traces."""
    with_model_calls: int = 0
    """Traces with at least one model call."""
    without_content: int = 0
    """Traces with model calls but no input, no output and no message content anywhere."""
    arguments_missing: int = 0
    """Tool calls whose arguments were not recorded."""
    fragments: int = 0
    """Traces that are one model call and nothing else: no agent, workflow or tool span."""
    events_not_recorded: int = 0
    """Model calls by an events-mode instrumentation with no message content and no events."""
    events_scopes: set[str] = field(default_factory=set)
    """The instrumentation scopes behind `events_not_recorded`."""


def tally_recording(paths: Iterable[PathArg]) -> RecordingTally:
    """Read a recording once and count what the checks need.

    Raises:
        InputError: a path names nothing, or a file is unreadable or not an evaltrace span file.
    """
    from evaltrace.collector.convert.rebuild import convert_trace
    from evaltrace.collector.store.reader import iter_traces

    tally = RecordingTally()
    for spans in iter_traces(paths):
        traces = convert_trace(spans, histories=True)
        for trace in traces:
            _count_trace(tally, trace)
        if len(traces) == 1 and _is_fragment(spans):
            tally.fragments += 1
        for span in spans:
            if _content_went_to_events(span):
                tally.events_not_recorded += 1
                tally.events_scopes.add(span.scope_name or "")
    return tally


def _count_trace(tally: RecordingTally, trace: Trace) -> None:
    tally.traces += 1
    tally.arguments_missing += sum(1 for call in trace.all_tool_calls() if call.arguments is None)
    if not trace.iterations:
        return
    tally.with_model_calls += 1
    has_messages = any(it.input_messages or it.output_messages for it in trace.iterations)
    if trace.input is None and trace.output is None and not has_messages:
        tally.without_content += 1


def _is_fragment(spans: list[Span]) -> bool:
    from evaltrace.collector.convert.rebuild import classify

    roles = [classify(span).role for span in spans]
    return roles.count("llm") >= 1 and not any(role in ("agent", "tool", "chain") for role in roles)


def _content_went_to_events(span: Span) -> bool:
    # The events-mode instrumentations put content only in log records; a model span from one of
    # them with neither content attributes nor events means those records were not recorded.
    from evaltrace.collector.convert.rebuild import classify

    if not (span.scope_name or "").startswith(_EVENTS_SCOPES) or span.events:
        return False
    normalized = classify(span)
    if normalized.role != "llm" or normalized.llm is None:
        return False
    return normalized.llm.inputs() is None and normalized.llm.output_messages is None


def recording_checks(paths: Iterable[PathArg]) -> list[Check]:
    """Every check of a recording, in report order.

    Raises:
        InputError: a path names nothing, or a file is unreadable or not an evaltrace span file.
    """
    paths = list(paths)
    tally = tally_recording(paths)
    return [
        check_has_traces(tally),
        check_events_recorded(tally),
        check_content(tally),
        check_arguments(tally),
        check_fragments(tally),
        check_losses(paths),
    ]


def _of(count: int, total: int, noun: str) -> str:
    return f"{count} of {plural(total, noun)}"


_PREFIX = "recording/"
"""Names the findings about recorded runs apart from the setup checks of the same subject."""


def check_has_traces(tally: RecordingTally) -> Check:
    """The recording holds traces with model calls: an agent's run, not only other spans."""
    if tally.traces == 0:
        return Check(f"{_PREFIX}traces", "problem", "no traces in these files", "record a run of the agent first")
    if tally.with_model_calls == 0:
        msg = f"no model call in the {plural(tally.traces, 'trace')}: the LLM client was not instrumented"
        fix = "install the instrumentation for your client or framework (see README, Record your own agent)"
        return Check(f"{_PREFIX}traces", "problem", msg, fix)
    return Check(f"{_PREFIX}traces", "ok", f"model calls in {_of(tally.with_model_calls, tally.traces, 'trace')}")


def check_events_recorded(tally: RecordingTally) -> Check:
    """Model calls whose content was sent as log records that were not recorded."""
    if not tally.events_not_recorded:
        return Check(f"{_PREFIX}events", "ok", "no model call's content was left in unrecorded log records")
    scopes = ", ".join(sorted(tally.events_scopes))
    msg = f"{plural(tally.events_not_recorded, 'model call')} by {scopes} sent their messages as log records (GenAI"
    msg += " events), which were not recorded, so inputs, answers and tool arguments are missing"
    fix = "record logs too: OTEL_LOGS_EXPORTER=evaltrace (the default with evaltrace's distro), or record()"
    return Check(f"{_PREFIX}events", "problem", msg, fix)


def check_content(tally: RecordingTally) -> Check:
    """Traces whose messages were not captured at all."""
    if not tally.without_content:
        return Check(f"{_PREFIX}content", "ok", "message content was recorded")
    msg = f"{_of(tally.without_content, tally.with_model_calls, 'trace')} with model calls have no input,"
    msg += " no answer and no message content: checks on them cannot pass"
    if tally.events_not_recorded:
        return Check(f"{_PREFIX}content", "problem", msg, "record the log records (see recording/events)")
    fix = "turn content capture on: unset EVALTRACE_CAPTURE_CONTENT=0 and the instrumentation's own switch"
    fix += " (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, OPENINFERENCE_HIDE_INPUTS/OUTPUTS,"
    fix += " TRACELOOP_TRACE_CONTENT, ENABLE_SENSITIVE_DATA)"
    return Check(f"{_PREFIX}content", "problem", msg, fix)


def check_arguments(tally: RecordingTally) -> Check:
    """Tool calls recorded without their arguments."""
    if not tally.arguments_missing:
        return Check(f"{_PREFIX}arguments", "ok", "every tool call has its arguments")
    msg = f"{plural(tally.arguments_missing, 'tool call')} without recorded arguments: argument checks on them fail"
    return Check(f"{_PREFIX}arguments", "warn", msg, "turn content capture on (see the content check)")


def check_fragments(tally: RecordingTally) -> Check:
    """Model calls that became traces of their own, with no agent span around them."""
    if not tally.fragments:
        return Check(f"{_PREFIX}fragments", "ok", "no trace is a lone model call")
    msg = f"{_of(tally.fragments, tally.traces, 'trace')} are a lone model call with no agent span:"
    if tally.fragments == tally.traces:
        msg += " nothing wrapped the agent's run, so each model call became its own trace and scoring takes"
        msg += " each as a separate run"
        return Check(f"{_PREFIX}fragments", "problem", msg, _WRAP_FIX)
    msg += " a second instrumentation recorded the same model calls outside the agent's traces"
    msg += " (e.g. openai-v2 beside OpenInference's LangChain instrumentation)"
    return Check(
        f"{_PREFIX}fragments", "problem", msg, "disable one of them, e.g. OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=openai"
    )


def check_losses(paths: Iterable[PathArg]) -> Check:
    """Spans the recorder dropped or could not write."""
    from evaltrace.collector.store.reader import resolve_paths, split_signals
    from evaltrace.collector.store.runfiles import recording_losses

    # The counts sit in the span files' footers: no row is read again after the tally's pass.
    span_files, _ = split_signals(resolve_paths(paths))
    dropped, unwritten = recording_losses(span_files)
    if not (dropped or unwritten):
        return Check(f"{_PREFIX}losses", "ok", "the recorder lost no span")
    msg = f"the recording lost spans: {dropped} dropped (export queue full), {unwritten} not written;"
    msg += " traces may be incomplete"
    fix = "raise OTEL_BSP_MAX_QUEUE_SIZE, or check the folder's free space and permissions"
    return Check(f"{_PREFIX}losses", "warn", msg, fix)
