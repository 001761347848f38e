"""`evaltrace compare BASE NEW`: what regressed between two scoring runs, and whether it is significant.

Exit codes: 0 no significant regression; 1 a significant regression at `--alpha` (or, with
`--strict`, any regression); 2 bad input (a REF that is neither a report nor a stored run, an
unwritable output) or scorers whose version or configuration changed between the two runs
(unless `--allow-changed-scorers`). The summary goes to stdout, or to stderr with `--json -`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.collector.errors import InputError

if TYPE_CHECKING:
    from evaltrace.evaluators.results.compare.model import Comparison

COMPARE_EXIT_CODES = (
    "Exit codes: 0 no significant regression; 1 a significant regression at --alpha (with --strict: any "
    "regression); 2 bad input, or scorers that changed between the two runs (one 'Error:' line on stderr)."
)
_REF_HELP = "A JSON report (evaltrace score --json FILE) or a scoring-run id (or unique prefix) in the store."


def compare(
    base: Annotated[str, typer.Argument(metavar="BASE", help="The run compared against. " + _REF_HELP)],
    new: Annotated[str, typer.Argument(metavar="NEW", help="The run checked for regressions. " + _REF_HELP)],
    alpha: opt.Alpha = None,
    strict: opt.Strict = False,
    allow_changed_scorers: Annotated[
        bool,
        typer.Option(
            "--allow-changed-scorers",
            metavar="",
            help="Compare even when a scorer's version or configuration differs between the runs (else exit 2).",
        ),
    ] = False,
    json_path: Annotated[
        str | None, typer.Option("--json", metavar="FILE", help="Write the comparison as JSON to FILE ('-': stdout).")
    ] = None,
    markdown_path: Annotated[
        str | None, typer.Option("--markdown", metavar="FILE", help="Write the comparison as Markdown to FILE.")
    ] = None,
    html_path: Annotated[
        str | None,
        typer.Option("--html", metavar="FILE", help="Write the comparison as a self-contained HTML page to FILE."),
    ] = None,
    store: opt.StoreOption = None,
) -> None:
    """Compare two scoring runs: regressions, fixes, pass-rate deltas with significance, latency, tokens, cost."""
    from evaltrace.evaluators.results.compare.comparison import CompareOptions, compare_sides
    from evaltrace.evaluators.results.compare.render import render_markdown, render_text
    from evaltrace.evaluators.results.compare.render_html import render_html
    from evaltrace.evaluators.results.compare.sides import load_side
    from evaltrace.evaluators.results.report.formats import check_destination
    from evaltrace.evaluators.results.store.location import store_folder

    options = CompareOptions(opt.alpha_level(alpha), strict)
    for name, destination in (("json", json_path), ("markdown", markdown_path), ("html", html_path)):
        if destination is not None:
            check_destination(name, destination)
    folder = store_folder(store)
    comparison = compare_sides(load_side(base, folder), load_side(new, folder), options)
    if json_path is not None:
        opt.write_text_output(json_path, comparison.to_json(), "--json")
    if markdown_path is not None:
        opt.write_text_output(markdown_path, render_markdown(comparison), "--markdown")
    if html_path is not None:
        opt.write_text_output(html_path, render_html(comparison), "--html")
    # Reasons, names and keys come from the reports: `render_text` lays each out inert.
    typer.echo(render_text(comparison), nl=False, err=json_path == "-")
    _exit(comparison, allow_changed_scorers)


def _exit(comparison: Comparison, allow_changed_scorers: bool) -> None:
    if comparison.changed_scorers and not allow_changed_scorers:
        names = ", ".join(change.scorer for change in comparison.changed_scorers)
        raise InputError(
            f"the scorers changed between {comparison.base} and {comparison.new}: {names} (a different version or "
            "configuration scores differently; --allow-changed-scorers compares anyway)"
        )
    if comparison.regressed:
        raise typer.Exit(1)
