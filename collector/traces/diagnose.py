"""What a recording says about how it was recorded: the findings behind `evaltrace doctor PATH`.

A recording can be complete as files and still useless for scoring, and nothing fails when that
happens: the instrumentation sent message content somewhere evaltrace did not record (GenAI
events as log records), content capture was off, no span wrapped the agent's run (so each model
call became a trace of its own), the run's root span never arrived (a sender or file cut off),
or the rebuilt trace looks inflated (two tool calls under one call id, one model call described
twice, so iterations and tokens double) or short (a reply that stopped to call a tool with no
call rebuilt). Scoring such a run gives noise, so the doctor reads the rebuilt traces and names
each of these with an example trace, the `traces --explain` command that shows how it was read,
and a fix that fits where the spans came from (`_diagnose_origin.py`).

Each check is one function from the tally of a recording to a `Check`; the tally is built in a
single pass over the traces (`tally_recording`), so a large run is read once.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from evaltrace.collector.terminal import plural
from evaltrace.collector.traces._diagnose_origin import Origin, fix_for, origin_of
from evaltrace.collector.traces._trace_findings import doubled, has_content, unanswered_tool_stop

if TYPE_CHECKING:  # the reader and converter load pyarrow and pydantic: `doctor` without a path needs neither
    from pathlib import Path

    from evaltrace.collector.runfiles.runfiles import RecordingLosses
    from evaltrace.collector.runfiles.spans import Span
    from evaltrace.collector.traces.records import Trace

PathArg = str | os.PathLike[str]

Status = Literal["ok", "warn", "problem"]

_EVENTS_SCOPES = ("opentelemetry.instrumentation.openai_v2", "opentelemetry.util.genai")
"""Instrumentations whose default mode sends message content as log records (GenAI events)."""


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
class Affected:
    """The traces one finding is about: how many, the first one's id, and where their spans came from."""

    traces: int = 0
    example: str | None = None
    origins: set[Origin] = field(default_factory=set)

    def add(self, trace_id: str, origin: Origin) -> None:
        """Count one more trace."""
        self.traces += 1
        self.example = self.example or trace_id
        self.origins.add(origin)


@dataclass
class RecordingTally:
    """What one pass over a recording counted (see `tally_recording`)."""

    traces: int = 0
    """Rebuilt traces."""
    with_model_calls: int = 0
    """Traces with at least one model call."""
    without_content: Affected = field(default_factory=Affected)
    """Traces with model calls but no input, answer, message text, tool arguments or results anywhere."""
    arguments_missing: int = 0
    """Tool calls whose arguments were not recorded."""
    fragments: Affected = field(default_factory=Affected)
    """Traces that are one model call and nothing else: no agent, workflow or tool span, and a root span."""
    rootless: Affected = field(default_factory=Affected)
    """Traces whose run span was never recorded: their top is the placeholder the converter put in for a
    parent that never arrived (`root_span_id` is `None`), while a run span under a missing parent (a trace
    continued from another service) is the trace's root and is not counted."""
    repeated_ids: Affected = field(default_factory=Affected)
    """Traces where two tool calls share one call id."""
    doubled: Affected = field(default_factory=Affected)
    """Traces where one model call became two iterations (see `_trace_findings.doubled`)."""
    tool_stops: Affected = field(default_factory=Affected)
    """Traces with a model reply that stopped to call a tool but no tool call rebuilt for it."""
    merged_calls: Affected = field(default_factory=Affected)
    """Traces where the converter read a model call described by several spans as one iteration."""
    merged_ids: Affected = field(default_factory=Affected)
    """Traces where the converter read a call id recorded twice in one reply as one call."""
    events_not_recorded: int = 0
    """Model calls by an events-mode instrumentation with no message content and no events."""
    events_scopes: set[str] = field(default_factory=set)
    """The instrumentation scopes behind `events_not_recorded`."""


def tally_recording(files: Sequence[Path], imported: dict[str, str] | None = None) -> RecordingTally:
    """Read a recording once and count what the checks need.

    Args:
        files: the recording's run files, as `resolve_paths` returns them.
        imported: run ids of span files imported from OTLP files, with the file names (`read_footers`).

    Raises:
        InputError: a file is unreadable or not an evaltrace span file.
    """
    from evaltrace.collector.runfiles.reader import iter_traces
    from evaltrace.collector.traces.rebuild import convert_trace

    tally = RecordingTally()
    for spans in iter_traces(files):
        traces = convert_trace(spans, histories=True)
        origin = origin_of(spans, imported or {})
        for trace in traces:
            _count_trace(tally, trace, origin)
        if len(traces) == 1 and traces[0].root_span_id is not None and _is_fragment(spans):
            tally.fragments.add(traces[0].trace_id, origin)
        for span in spans:
            if _content_went_to_events(span):
                tally.events_not_recorded += 1
                tally.events_scopes.add(span.scope_name or "")
    return tally


def _count_trace(tally: RecordingTally, trace: Trace, origin: Origin) -> None:
    tally.traces += 1
    calls = trace.all_tool_calls()
    tally.arguments_missing += sum(1 for call in calls if call.arguments is None)
    if trace.root_span_id is None:  # the placeholder of a parent never recorded: `show` warns of it too
        tally.rootless.add(trace.trace_id, origin)
    ids = [call.call_id for call in calls if call.call_id is not None]
    if len(set(ids)) < len(ids):
        tally.repeated_ids.add(trace.trace_id, origin)
    if not trace.iterations:
        return
    tally.with_model_calls += 1
    if not has_content(trace):
        tally.without_content.add(trace.trace_id, origin)
    if doubled(trace.iterations):
        tally.doubled.add(trace.trace_id, origin)
    if any(it.merged_span_ids for it in trace.iterations):
        tally.merged_calls.add(trace.trace_id, origin)
    if any(it.duplicate_call_ids for it in trace.iterations):
        tally.merged_ids.add(trace.trace_id, origin)
    if unanswered_tool_stop(trace):
        tally.tool_stops.add(trace.trace_id, origin)


def _is_fragment(spans: list[Span]) -> bool:
    from evaltrace.collector.traces.rebuild import classify

    roles = [classify(span).role for span in spans]
    return roles.count("llm") >= 1 and not any(role in ("agent", "tool", "chain") for role in roles)


def _content_went_to_events(span: Span) -> bool:
    # The events-mode instrumentations put content only in log records; a model span from one of
    # them with neither content attributes nor events means those records were not recorded.
    from evaltrace.collector.traces.rebuild import classify

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
    from evaltrace.collector.otlp.files.inputs import resolve_paths
    from evaltrace.collector.traces._diagnose_origin import read_footers

    paths = list(paths)
    files = resolve_paths(paths)
    # The footers first (no row is read): the losses, and which runs were imported from OTLP files.
    losses, imported = read_footers(files.span_files)
    tally = tally_recording(files, imported)
    where = " ".join(shlex.quote(os.fspath(path)) for path in paths)
    return [
        check_has_traces(tally),
        check_events_recorded(tally),
        check_content(tally),
        check_arguments(tally),
        check_fragments(tally),
        check_roots(tally, where),
        check_call_ids(tally, where),
        check_doubled_calls(tally, where),
        check_tool_stops(tally, where),
        check_losses(losses),
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
        fix = "install the instrumentation for your client or framework (see docs/frameworks.md, the recipes)"
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
    missing = tally.without_content
    if not missing.traces:
        return Check(f"{_PREFIX}content", "ok", "message content was recorded")
    msg = f"{_of(missing.traces, tally.with_model_calls, 'trace')} with model calls have no input, no answer"
    msg += f" and no message text, tool arguments or results (e.g. trace {missing.example}): checks on them"
    msg += " cannot pass"
    if tally.events_not_recorded:
        return Check(f"{_PREFIX}content", "problem", msg, "record the log records (see recording/events)")
    return Check(f"{_PREFIX}content", "problem", msg, fix_for("content", missing.origins))


def check_arguments(tally: RecordingTally) -> Check:
    """Tool calls recorded without their arguments."""
    if not tally.arguments_missing:
        return Check(f"{_PREFIX}arguments", "ok", "every tool call has its arguments")
    msg = f"{plural(tally.arguments_missing, 'tool call')} without recorded arguments: argument checks on them fail"
    return Check(f"{_PREFIX}arguments", "warn", msg, "turn content capture on (see the content check)")


def check_fragments(tally: RecordingTally) -> Check:
    """Model calls that became traces of their own, with no agent span around them."""
    fragments = tally.fragments
    if not fragments.traces:
        return Check(f"{_PREFIX}fragments", "ok", "no trace is a lone model call")
    msg = f"{_of(fragments.traces, tally.traces, 'trace')} are a lone model call with no agent span:"
    if fragments.traces == tally.traces:
        msg += " nothing wrapped the agent's run, so each model call became its own trace and scoring takes"
        msg += " each as a separate run"
        return Check(f"{_PREFIX}fragments", "problem", msg, fix_for("wrap", fragments.origins))
    msg += " a second instrumentation recorded the same model calls outside the agent's traces"
    msg += " (e.g. openai-v2 beside OpenInference's LangChain instrumentation)"
    return Check(f"{_PREFIX}fragments", "problem", msg, fix_for("second", fragments.origins))


def _explain(where: str, affected: Affected) -> str:
    return f"`evaltrace traces {where} --explain {affected.example}` shows which span became what"


def _merged(merged: Affected, what: str, where: str) -> str:
    # Said on the `ok` line: the converter already reads these as one, and --explain shows the spans it set aside.
    if not merged.traces:
        return ""
    return f" ({what} were read once in {plural(merged.traces, 'trace')}: {_explain(where, merged)})"


def check_roots(tally: RecordingTally, where: str) -> Check:
    """Traces whose root span (the run's own span, with its input and answer) was never recorded."""
    rootless = tally.rootless
    if not rootless.traces:
        return Check(f"{_PREFIX}roots", "ok", "every trace's root span was recorded")
    msg = f"{_of(rootless.traces, tally.traces, 'trace')} have spans whose parent was never recorded"
    msg += f" (e.g. trace {rootless.example}): the run's root span is missing, and with it the run's input,"
    msg += " answer and status, so scoring sees part of a run"
    return Check(f"{_PREFIX}roots", "problem", msg, f"{fix_for('root', rootless.origins)}; {_explain(where, rootless)}")


def check_call_ids(tally: RecordingTally, where: str) -> Check:
    """Tool calls of one trace that share a call id."""
    repeated = tally.repeated_ids
    if not repeated.traces:
        msg = "no trace repeats a tool call id" + _merged(tally.merged_ids, "call ids recorded twice", where)
        return Check(f"{_PREFIX}call-ids", "ok", msg)
    msg = f"{_of(repeated.traces, tally.traces, 'trace')} hold two tool calls with one call id (e.g. trace"
    msg += f" {repeated.example}): one tool run recorded twice, or calls scoring cannot tell apart; call counts"
    msg += " and trajectories count them twice"
    fix = f"{fix_for('duplicates', repeated.origins)}; {_explain(where, repeated)}"
    return Check(f"{_PREFIX}call-ids", "problem", msg, fix)


def check_doubled_calls(tally: RecordingTally, where: str) -> Check:
    """One model call rebuilt as two iterations (doubled iterations and tokens)."""
    doubled = tally.doubled
    if not doubled.traces:
        msg = "no model call is counted twice" + _merged(tally.merged_calls, "model calls described twice", where)
        return Check(f"{_PREFIX}model-calls", "ok", msg)
    msg = f"{_of(doubled.traces, tally.traces, 'trace')} count one model call twice (e.g. trace {doubled.example}):"
    msg += " two iterations with the same model and token counts at the same time, so iterations and tokens"
    msg += " are doubled"
    fix = f"{fix_for('duplicates', doubled.origins)}; {_explain(where, doubled)}"
    return Check(f"{_PREFIX}model-calls", "problem", msg, fix)


def check_tool_stops(tally: RecordingTally, where: str) -> Check:
    """Model replies that stopped to call tools while no tool call was rebuilt for them."""
    stops = tally.tool_stops
    if not stops.traces:
        return Check(f"{_PREFIX}tool-stops", "ok", "every reply that asked for tools has its tool calls")
    msg = f"{_of(stops.traces, tally.with_model_calls, 'trace')} have a model reply that stopped to call a tool"
    msg += f" (finish reason tool_calls or tool_use) with no tool call rebuilt for it (e.g. trace {stops.example}):"
    msg += " tool checks see no call"
    fix = f"{fix_for('tool_stop', stops.origins)}; {_explain(where, stops)}"
    return Check(f"{_PREFIX}tool-stops", "problem", msg, fix)


def check_losses(losses: RecordingLosses) -> Check:
    """Spans the recorder dropped or could not write (the counts in the span files' footers)."""
    dropped, unwritten = losses
    if not (dropped or unwritten):
        return Check(f"{_PREFIX}losses", "ok", "the recorder lost no span")
    msg = f"the recording lost spans: {dropped} dropped (export queue full), {unwritten} not written;"
    msg += " traces may be incomplete"
    fix = "raise OTEL_BSP_MAX_QUEUE_SIZE, or check the folder's free space and permissions"
    return Check(f"{_PREFIX}losses", "warn", msg, fix)
