"""`evaltrace clean`: remove the temporary span files of writers that died."""

from __future__ import annotations

from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.collector.store.inflight import DEFAULT_MAX_AGE_S
from evaltrace.collector.terminal import printable


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
    from evaltrace.collector.store.reader import clean_stale_inflight  # deferred: the reader loads pyarrow

    removed = 0
    for folder in opt.folders(paths):
        for path in clean_stale_inflight(folder, max_age):
            typer.echo(printable(f"removed {path}"))
            removed += 1
    if not removed:
        typer.echo("no stale in-flight files")
