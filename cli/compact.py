"""`evaltrace compact`: merge a folder's small span files into fewer, larger ones."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.collector.runfiles.schema import DEFAULT_MAX_ROWS
from evaltrace.collector.terminal import json_text, plural, printable

if TYPE_CHECKING:
    from evaltrace.collector.runfiles.compact import Compaction


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
    from evaltrace.collector.runfiles.compact import compact_folder  # deferred: pyarrow only when compacting

    for folder in opt.folders(paths):
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
