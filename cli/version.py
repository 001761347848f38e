"""`evaltrace version` and `evaltrace --version`."""

from __future__ import annotations

from typing import Annotated

import typer


def _version_line() -> str:
    from importlib.metadata import version as dist_version

    return f"evaltrace {dist_version('evaltrace')}"


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(_version_line())
        raise typer.Exit()


def root(
    _version: Annotated[
        bool,
        typer.Option(
            "--version",
            metavar="",
            is_eager=True,
            callback=_print_version,
            help="Print the evaltrace version and exit.",
        ),
    ] = False,
) -> None:
    """Record agent spans to Parquet and score them offline."""


def version() -> None:
    """Print the evaltrace version."""
    typer.echo(_version_line())
