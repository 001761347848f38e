"""`evaltrace calibrate`: how far each judge (and the entry outcome) agrees with the labels people gave.

Exit codes: 0 shown (every kappa with at least 10 labels meets `--min-kappa`); 1 one is below it;
2 bad input or no labels in the store, as one `Error:` line.
"""

from __future__ import annotations

from typing import Annotated

import typer

from evaltrace.cli import _options as opt

CALIBRATE_EXIT_CODES = (
    "Exit codes: 0 shown; 1 a kappa with n >= 10 is below --min-kappa; 2 bad input or no labels (one 'Error:' line)."
)


def calibrate(
    run: Annotated[
        str | None,
        typer.Argument(metavar="[RUN]", help="A scoring-run id (or a unique prefix); default: each entry's latest."),
    ] = None,
    store: opt.StoreOption = None,
    min_kappa: Annotated[
        float | None,
        typer.Option("--min-kappa", metavar="K", help="Exit 1 when a kappa with n >= 10 is below K."),
    ] = None,
    json_path: Annotated[
        str | None, typer.Option("--json", metavar="FILE", help="Write the calibration as JSON to FILE ('-': stdout).")
    ] = None,
) -> None:
    """Hold each judge's verdicts (and the entries' outcomes) against people's labels: agreement, Cohen's kappa."""
    from evaltrace.evaluators.results.report.formats import check_destination
    from evaltrace.evaluators.results.review.calibration import calibrate as run_calibration
    from evaltrace.evaluators.results.review.calibration_text import render_text
    from evaltrace.evaluators.results.store.location import store_folder

    if json_path is not None:
        check_destination("json", json_path)
    result = run_calibration(store_folder(store), run)
    if json_path is not None:
        opt.write_text_output(json_path, result.model_dump_json(indent=2) + "\n", "--json")
    typer.echo(render_text(result, min_kappa), nl=False, err=json_path == "-")
    if min_kappa is not None and any(item.below(min_kappa) for item in result.scorers):
        raise typer.Exit(1)
