"""`evaltrace runs` (what was recorded) and `evaltrace clean` (remove stale temporary files)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evaltrace.cli.main import app
from evaltrace.collector._inflight import DEFAULT_MAX_AGE_S, clean_stale_inflight
from evaltrace.collector.errors import InputError

if TYPE_CHECKING:
    from evaltrace.collector.reader import RunsSummary, TraceSummary

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
        typer.echo(json.dumps(summary.model_dump(mode="json", exclude=exclude), ensure_ascii=False))
        return
    for line in _summary_lines(summary):
        typer.echo(line)
    if traces:
        typer.echo("")
        for line in _trace_lines(summary.trace_list):
            typer.echo(line)


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
            typer.echo(f"removed {path}")
            removed += 1
    if not removed:
        typer.echo("no stale in-flight files")


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
        f"spans:       {s.spans}" + (f" ({s.duplicate_spans} duplicate rows ignored)" if s.duplicate_spans else ""),
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
