"""`evaltrace runs`: what was recorded (files, spans, traces, services, run ids, time range, losses)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.collector.terminal import inline, json_text, plural

if TYPE_CHECKING:
    from evaltrace.collector.runfiles.reader import RunsSummary, TraceSummary

# `evaltrace runs` suggests compaction from this many files averaging fewer spans than this:
# each file costs ~12 KB of footer and ~6 ms of reading (benchmarks/RESULTS.md, Compaction).
_MANY_FILES = 50
_SMALL_FILE_SPANS = 1_000


def runs(
    paths: Annotated[list[str], typer.Argument(help=opt.PATHS_HELP, metavar="PATH")],
    traces: Annotated[bool, typer.Option("--traces", metavar="", help="Also list every trace.")] = False,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print one JSON object instead of text.")] = False,
) -> None:
    """Show what was recorded: files, spans, traces, services, run ids and time range."""
    from evaltrace.collector.otlp.files.inputs import resolve_paths  # deferred: pyarrow only when reading
    from evaltrace.collector.runfiles.reader import summarize_runs

    summary = summarize_runs(resolve_paths(paths))
    if as_json:
        exclude = None if traces else {"trace_list"}
        typer.echo(json_text(summary.model_dump(mode="json", exclude=exclude)))
        return
    # Service names, run ids and root span names are recorded content: shown, never run.
    for line in _summary_lines(summary):
        typer.echo(inline(line))
    if traces:
        typer.echo("")
        for line in _trace_lines(summary.trace_list):
            typer.echo(inline(line))


def _summary_lines(s: RunsSummary) -> list[str]:
    lines = [
        f"files:       {len(s.files)}",
        f"spans:       {s.spans}"
        + (f" ({plural(s.duplicate_spans, 'duplicate row')} ignored)" if s.duplicate_spans else ""),
        f"traces:      {s.traces}",
    ]
    if s.spans_per_trace is not None:
        p = s.spans_per_trace
        lines.append(f"spans/trace: min {p.min}, median {p.median:g}, max {p.max}")
    lines.append(f"error spans: {s.error_spans}")
    lines.append("services:    " + _counts(s.services))
    lines.append("run ids:     " + _counts(s.run_ids))
    if s.start_time is not None and s.end_time is not None:
        span_s = (s.end_time - s.start_time).total_seconds()
        lines.append(f"time range:  {_iso(s.start_time)} .. {_iso(s.end_time)} ({span_s:.3f} s)")
    if s.dropped_spans or s.unwritten_spans:
        lines.append(
            f"lost spans:  {s.dropped_spans} dropped (the export queue was full), "
            f"{s.unwritten_spans} not written (writes failed); traces may be incomplete"
        )
    if s.log_files:
        lines.append(f"log records: {s.log_records} in {s.log_files} file(s): " + _counts(s.log_events))
    if s.unattached_log_records:
        lines.append(
            f"unattached:  {s.unattached_log_records} log record(s) name spans not in these files; "
            "they are in no rebuilt trace (were span files left out?)"
        )
    if s.dropped_log_records or s.unwritten_log_records:
        lines.append(
            f"lost logs:   {s.dropped_log_records} dropped (the export queue was full), "
            f"{s.unwritten_log_records} not written (writes failed)"
        )
    if len(s.files) >= _MANY_FILES and s.spans < _SMALL_FILE_SPANS * len(s.files):
        lines.append(
            f"small files: {len(s.files)} files of {plural(s.spans // len(s.files), 'span')} on average "
            "('evaltrace compact PATH' merges them: smaller on disk, faster to read)"
        )
    if s.stale_inflight:
        lines.append(
            f"stale in-flight files: {len(s.stale_inflight)} (left by writers that died; "
            "'evaltrace clean PATH' removes them)"
        )
    return lines


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} ({n})" for name, n in counts.items()) or "-"


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def _trace_lines(traces: list[TraceSummary]) -> list[str]:
    lines = [f"{'trace_id':32}  {'spans':>5}  {'errors':>6}  {'start (UTC)':26}  {'duration s':>10}  root"]
    for t in traces:
        duration = (t.end_time - t.start_time).total_seconds()
        start = t.start_time.strftime("%Y-%m-%d %H:%M:%S.%f")
        lines.append(f"{t.trace_id:32}  {t.spans:>5}  {t.errors:>6}  {start:26}  {duration:>10.3f}  {t.root or '-'}")
    return lines
