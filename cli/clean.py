"""`evaltrace clean`: remove the temporary span files of writers that died, and (`--cache`) evaltrace's cache."""

from __future__ import annotations

from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.collector.cachedir import NAMESPACES, cache_root, clear
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
            help="Empty evaltrace's cache: traces tables, imported OTLP files, judge verdicts and compiled specs "
            "(EVALTRACE_CACHE_DIR; default ~/.cache/evaltrace). Scorings rebuild and ask them again.",
        ),
    ] = False,
) -> None:
    """Remove temporary span files left behind by writers that died; with --cache, empty evaltrace's cache."""
    if not paths and not cache:
        raise InputError("name runs folders to clean (PATH...), or pass --cache to empty evaltrace's cache")
    if cache:
        _clean_cache()
    if paths:
        _clean_inflight(paths, max_age)


def _clean_cache() -> None:
    """Empty every namespace of the cache root, one line each saying what was removed."""
    root = cache_root()
    for name, removed in clear(root).items():
        size = f"{removed.bytes / 1e6:.1f} MB" if removed.bytes >= 100_000 else f"{removed.bytes} bytes"
        noun = "entry" if removed.entries == 1 else "entries"
        typer.echo(printable(f"{NAMESPACES[name]} {root / name}: removed {removed.entries} {noun}, {size}"))


def _clean_inflight(paths: list[str], max_age: float) -> None:
    from evaltrace.collector.runfiles.reader import clean_stale_inflight  # deferred: the reader loads pyarrow

    removed = 0
    for folder in opt.folders(paths):
        for path in clean_stale_inflight(folder, max_age):
            typer.echo(printable(f"removed {path}"))
            removed += 1
    if not removed:
        typer.echo("no stale in-flight files")
