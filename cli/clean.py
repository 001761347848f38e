"""`evaltrace clean`: remove the temporary span files of writers that died, and (`--cache`) the traces cache."""

from __future__ import annotations

from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles.inflight import DEFAULT_MAX_AGE_S
from evaltrace.collector.terminal import printable


def clean(
    paths: Annotated[
        list[str] | None, typer.Argument(help="Runs folders (a file stands for its folder).", metavar="PATH")
    ] = None,
    max_age: Annotated[
        float,
        typer.Option(
            "--max-age",
            metavar="SECONDS",
            min=0.0,
            help="Seconds after which another host's temporary file counts as stale.",
        ),
    ] = DEFAULT_MAX_AGE_S,
    cache: Annotated[
        bool,
        typer.Option(
            "--cache",
            metavar="",
            help="Empty the traces cache and the imported OTLP files (EVALTRACE_CACHE_DIR; default "
            "~/.cache/evaltrace): scorings rebuild the traces once more.",
        ),
    ] = False,
) -> None:
    """Remove temporary span files left behind by writers that died; with --cache, empty the traces cache."""
    if not paths and not cache:
        raise InputError("name runs folders to clean (PATH...), or pass --cache to empty the traces cache")
    if cache:
        _clean_cache()
    if paths:
        _clean_inflight(paths, max_age)


def _clean_cache() -> None:
    from evaltrace.collector.traces.cache import clear_cache, traces_folder  # deferred: loads pyarrow

    removed = clear_cache()
    size = f"{removed.bytes / 1e6:.1f} MB" if removed.bytes >= 100_000 else f"{removed.bytes} bytes"
    noun = "table" if removed.files == 1 else "tables"
    typer.echo(printable(f"traces cache {traces_folder()}: removed {removed.files} {noun}, {size}"))
    _clean_imports()


def _clean_imports() -> None:
    from evaltrace.collector.otlp.files.import_cache import clear_imports, imports_folder  # deferred: loads pyarrow

    if not imports_folder().is_dir():  # nothing was ever imported: nothing to say
        return
    files, removed = clear_imports()
    size = f"{removed / 1e6:.1f} MB" if removed >= 100_000 else f"{removed} bytes"
    typer.echo(printable(f"imported OTLP files {imports_folder()}: removed {files} run file(s), {size}"))


def _clean_inflight(paths: list[str], max_age: float) -> None:
    from evaltrace.collector.runfiles.reader import clean_stale_inflight  # deferred: the reader loads pyarrow

    removed = 0
    for folder in opt.folders(paths):
        for path in clean_stale_inflight(folder, max_age):
            typer.echo(printable(f"removed {path}"))
            removed += 1
    if not removed:
        typer.echo("no stale in-flight files")
