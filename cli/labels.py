"""`evaltrace labels export FILE` / `labels import FILE`: people's labels in and out of the score store.

Exit codes: 0 done; 2 bad input (an unknown file type, a malformed row: one `Error:` line naming
the file and line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.cli._app import _App, _Group

labels_app = _App(
    name="labels", cls=_Group, help="Export or import people's labels (CSV or JSON lines).", no_args_is_help=True
)


@labels_app.command("export")
def export_labels(
    file: Annotated[str, typer.Argument(metavar="FILE", help="A .csv or .jsonl file ('-': JSON lines on stdout).")],
    store: opt.StoreOption = None,
) -> None:
    """Write the store's labels (the latest per case, trace and scorer) to FILE."""
    from evaltrace.evaluators.results.review.label_files import dump_labels, file_format
    from evaltrace.evaluators.results.store.labels import read_labels
    from evaltrace.evaluators.results.store.location import store_folder

    kind = "jsonl" if file == "-" else file_format(file)
    labels = read_labels(store_folder(store))
    opt.write_text_output(file, dump_labels(labels, kind), "FILE")
    if file != "-":
        typer.echo(f"{len(labels)} labels written to {file}", err=True)


@labels_app.command("import")
def import_labels(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A .csv or .jsonl file of labels.")],
    store: opt.StoreOption = None,
    author: Annotated[
        str | None, typer.Option("--author", metavar="NAME", help="Who labelled, for rows without an author.")
    ] = None,
) -> None:
    """Add the labels of FILE to the store (append-only: a later label of the same key wins)."""
    from evaltrace.evaluators.results.review.label_files import load_labels
    from evaltrace.evaluators.results.store.labels import write_labels
    from evaltrace.evaluators.results.store.location import store_folder

    labels = load_labels(file)
    folder = store_folder(store)
    write_labels(folder, labels, author=author)
    typer.echo(f"{len(labels)} labels added to {folder}", err=True)
