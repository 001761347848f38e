"""`evaltrace runs` (what was recorded) and `evaltrace clean` (remove stale temporary files)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evaltrace.cli.main import app
from evaltrace.collector._inflight import DEFAULT_MAX_AGE_S, clean_stale_inflight
from evaltrace.collector._schema import DEFAULT_MAX_ROWS
from evaltrace.collector._terminal import json_text, plural, printable
from evaltrace.collector.errors import InputError

if TYPE_CHECKING:
    from evaltrace.collector.compact import Compaction
    from evaltrace.collector.reader import RunsSummary, TraceSummary

# `evaltrace runs` suggests compaction from this many files averaging fewer spans than this:
# each file costs ~12 KB of footer and ~6 ms of reading (benchmarks/RESULTS.md, Compaction).
_MANY_FILES = 50
_SMALL_FILE_SPANS = 1_000
_PATHS_HELP = "Span files, folders (their *.parquet files) or globs such as 'runs/*.parquet'."


@app.command()
def runs(
    paths: Annotated[list[str], typer.Argument(help=_PATHS_HELP, metavar="PATH")],
    traces: Annotated[bool, typer.Option("--traces", metavar="", help="Also list every trace.")] = False,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print one JSON object instead of text.")] = False,
) -> None:
    """Show what was recorded: files, spans, traces, services, run ids and time range."""
    from evaltrace.collector.reader import summarize_runs  # deferred: pyarrow only when reading

    summary = summarize_runs(paths)
    if as_json:
        exclude = None if traces else {"trace_list"}
        typer.echo(json_text(summary.model_dump(mode="json", exclude=exclude)))
        return
    # Service names, run ids and root span names are recorded content: shown, never run.
    for line in _summary_lines(summary):
        typer.echo(printable(line))
    if traces:
        typer.echo("")
        for line in _trace_lines(summary.trace_list):
            typer.echo(printable(line))


@app.command()
def clean(
    paths: Annotated[list[str], typer.Argument(help="Runs folders (a file stands for its folder).", metavar="PATH")],
    max_age: Annotated[
        float,
        typer.Option(
            "--max-age",
            metavar="SECONDS",
            min=0.0,
            help="Seconds after which another host's temporary file counts as stale.",
        ),
    ] = DEFAULT_MAX_AGE_S,
) -> None:
    """Remove temporary span files left behind by writers that died."""
    removed = 0
    for folder in _folders(paths):
        for path in clean_stale_inflight(folder, max_age):
            typer.echo(printable(f"removed {path}"))
            removed += 1
    if not removed:
        typer.echo("no stale in-flight files")


@app.command()
def compact(
    paths: Annotated[list[str], typer.Argument(help="Runs folders (a file stands for its folder).", metavar="PATH")],
    max_rows: Annotated[
        int, typer.Option("--max-rows", metavar="N", min=2, help="Most spans per merged file.")
    ] = DEFAULT_MAX_ROWS,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", metavar="", help="Show what would be merged; change nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", metavar="", help="Print one JSON object per folder.")] = False,
) -> None:
    """Merge a folder's small span files into fewer, larger ones (per run id; no span is lost)."""
    from evaltrace.collector.compact import compact_folder  # deferred: pyarrow only when compacting

    for folder in _folders(paths):
        done = compact_folder(folder, max_rows=max_rows, dry_run=dry_run)
        if as_json:
            typer.echo(json_text(done.model_dump(mode="json")))
            continue
        for line in _compaction_lines(done):
            typer.echo(printable(line))


def _compaction_lines(done: Compaction) -> list[str]:
    if not done.merged:
        return [f"{done.folder}: nothing to compact ({plural(done.files_before, 'file')})"]
    if done.dry_run:
        lines = [
            f"would merge {plural(len(m.sources), 'file')} ({plural(m.spans, 'span')}) into {m.path}"
            for m in done.merged
        ]
        return [*lines, f"{done.folder}: {plural(done.files_before, 'file')} would become {done.files_after} (dry run)"]
    before = sum(m.bytes_before for m in done.merged)
    after = sum(m.bytes_after for m in done.merged)
    return [
        f"{done.folder}: {plural(done.files_before, 'file')} -> {done.files_after}; "
        f"merged files {_size(before)} -> {_size(after)}"
    ]


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} KB"


def _folders(paths: list[str]) -> list[Path]:
    folders: dict[Path, None] = {}
    for arg in paths:
        path = Path(arg)
        if path.is_dir():
            folders[path] = None
        elif path.is_file():
            folders[path.parent] = None
        else:
            raise InputError(f"{arg}: no such folder")
    return list(folders)


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
