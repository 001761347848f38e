"""`evaltrace history`: pass rate per scorer (and the gate's) across the scoring runs in the score store.

Exit codes: 0 shown; 2 bad input (no store, no run in it, a `--spec` no run used, an unknown
`--scorer`, an unwritable output), as one `Error:` line. The table goes to stdout, or to stderr
with `--json -`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from evaltrace.cli import _options as opt

HISTORY_EXIT_CODES = (
    "Exit codes: 0 shown; 2 bad input (no store or run, an unknown --scorer or --spec; one 'Error:' line)."
)


def history(
    store: opt.StoreOption = None,
    last: Annotated[
        int, typer.Option("--last", metavar="N", min=1, help="Show the newest N scoring runs.")
    ] = 20,  # evaluators.compare.history.DEFAULT_LAST (not imported here: it would load pyarrow for --help)
    scorer: Annotated[
        list[str] | None,
        typer.Option("--scorer", metavar="NAME", help="Only this scorer (repeat for more; default: every scorer)."),
    ] = None,
    spec: Annotated[
        str | None,
        typer.Option(
            "--spec", metavar="PATH", help="Only runs scored with this spec file (by its path or its content)."
        ),
    ] = None,
    json_path: Annotated[
        str | None,
        typer.Option(
            "--json",
            metavar="[FILE]",
            help="Write the series as JSON to FILE, or to stdout when FILE is '-' or left out.",
        ),
    ] = None,
    html_path: Annotated[
        str | None,
        typer.Option("--html", metavar="FILE", help="Write a self-contained page with a line chart per scorer."),
    ] = None,
) -> None:
    """Show each scorer's pass rate across scoring runs, oldest first, as sparklines; '|' marks a changed scorer."""
    from evaltrace.evaluators.results.compare.history import HistoryOptions, load_history
    from evaltrace.evaluators.results.compare.history_html import render_html
    from evaltrace.evaluators.results.compare.history_render import render_text
    from evaltrace.evaluators.results.report.formats import check_destination
    from evaltrace.evaluators.results.store.location import store_folder

    if json_path is not None:
        check_destination("json", json_path)
    if html_path is not None:
        check_destination("html", html_path)
    options = HistoryOptions(last=last, scorers=scorer or [], spec=spec)
    result = load_history(store_folder(store), options)
    if json_path is not None:
        opt.write_text_output(json_path, result.model_dump_json(indent=2) + "\n", "--json")
    if html_path is not None:
        opt.write_text_output(html_path, render_html(result), "--html")
    # Scorer names and spec paths come from the store: `render_text` lays each out inert.
    typer.echo(render_text(result), nl=False, err=json_path == "-")
