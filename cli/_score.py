"""`evaltrace score` (score stored traces and gate) and `evaltrace schema` (the spec's JSON Schema).

Exit codes (CONTRACT.md): 0 the gate passed, 1 the gate failed, 2 bad input or usage. The
summary goes to stdout; with `--json -` the report takes stdout and the summary goes to stderr.
Progress is shown on stderr only when stderr is a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from evaltrace.cli.main import app
from evaltrace.evaluators.errors import InputError

if TYPE_CHECKING:
    from evaltrace.evaluators.spec_loader import LoadedSpec

_PATHS_HELP = "Span files, folders (their *.parquet files) or globs such as 'runs/*.parquet'."
_JUDGE = "Judge"
_SELECT = "Selection"
_PROGRESS_EVERY = 50


@app.command()
def score(
    paths: Annotated[list[str], typer.Argument(help=_PATHS_HELP, metavar="PATH...")],
    spec: Annotated[
        str | None, typer.Option("--spec", help="Spec file (YAML or JSON); FILE::CASE_ID scores one case.")
    ] = None,
    confidence: Annotated[
        float | None,
        typer.Option("--confidence", min=0.0, max=1.0, help="Minimum pass rate for the gate (overrides the spec's)."),
    ] = None,
    json_path: Annotated[
        str | None, typer.Option("--json", metavar="FILE", help="Write the JSON report to FILE ('-' for stdout).")
    ] = None,
    tier: Annotated[
        list[str] | None, typer.Option("--tier", help="Only cases of this tier (repeatable).", rich_help_panel=_SELECT)
    ] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help="Only cases with this tag (repeatable).", rich_help_panel=_SELECT)
    ] = None,
    case: Annotated[
        list[str] | None,
        typer.Option("--case", help="Only cases whose id matches (glob; repeatable).", rich_help_panel=_SELECT),
    ] = None,
    judge_model: Annotated[str | None, typer.Option(help="Judge model name.", rich_help_panel=_JUDGE)] = None,
    judge_base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible base URL of the judge.", rich_help_panel=_JUDGE)
    ] = None,
    judge_api_key: Annotated[str | None, typer.Option(help="Judge API key.", rich_help_panel=_JUDGE)] = None,
    judge_timeout: Annotated[
        float | None, typer.Option(min=0.0, help="Seconds per judge request.", rich_help_panel=_JUDGE)
    ] = None,
    judge_concurrency: Annotated[
        int | None, typer.Option(min=1, help="Judge requests in flight at once.", rich_help_panel=_JUDGE)
    ] = None,
    judge_max_requests: Annotated[
        int | None, typer.Option(min=0, help="Budget of judge requests for the run.", rich_help_panel=_JUDGE)
    ] = None,
    judge_cache_dir: Annotated[
        Path | None, typer.Option(help="Folder of the judge verdict cache.", rich_help_panel=_JUDGE)
    ] = None,
    no_judge_cache: Annotated[
        bool, typer.Option("--no-judge-cache", help="Neither read nor write the verdict cache.", rich_help_panel=_JUDGE)
    ] = False,
) -> None:
    """Score stored traces against a spec (or the reference-free defaults) and gate on the pass rate."""
    # Imported here so that other commands start without the scoring machinery.
    from evaltrace.collector.convert import read_traces
    from evaltrace.evaluators.engine import ScoreOptions, score_traces
    from evaltrace.evaluators.report import write_report
    from evaltrace.evaluators.summary import render_summary

    loaded, case_from_spec_arg = _load(spec)
    if loaded is None and (tier or tag or case):
        raise InputError("--tier, --tag and --case select spec cases: pass --spec FILE")
    options = ScoreOptions(
        confidence=confidence,
        tiers=tuple(tier or ()),
        tags=tuple(tag or ()),
        cases=tuple(case or ()) + ((_literal_glob(case_from_spec_arg),) if case_from_spec_arg else ()),
        paths=tuple(paths),
        judge_overrides=_judge_overrides(
            model=judge_model,
            base_url=judge_base_url,
            api_key=judge_api_key,
            timeout=judge_timeout,
            concurrency=judge_concurrency,
            max_requests=judge_max_requests,
            cache_dir=judge_cache_dir,
            no_cache=no_judge_cache or None,
        ),
        progress=_progress() if sys.stderr.isatty() else None,
    )
    report = score_traces(read_traces(paths), loaded, options)
    if options.progress is not None:
        print(file=sys.stderr)
    if json_path is not None:
        write_report(report, json_path)
    typer.echo(render_summary(report), nl=False, err=json_path == "-")
    if not report.passed:
        raise typer.Exit(1)


def _load(spec: str | None) -> tuple[LoadedSpec | None, str | None]:
    from evaltrace.evaluators.spec_loader import load_spec, split_spec_arg

    if spec is None:
        return None, None
    file, case_id = split_spec_arg(spec)
    loaded = load_spec(file)
    if case_id is not None and case_id not in {c.id for c in loaded.cases}:
        known = ", ".join(c.id for c in loaded.cases)
        raise InputError(f"{file}: no case with id {case_id!r} (cases: {known})")
    return loaded, case_id


def _literal_glob(text: str) -> str:
    # `file::case_id` names one case exactly, even when its id contains glob characters.
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


def _judge_overrides(**values: Any) -> dict[str, Any]:
    # `None` means "not given": the environment (or the default) then applies.
    return {key: value for key, value in values.items() if value is not None}


def _progress() -> Callable[[int], None]:
    def show(count: int) -> None:
        if count % _PROGRESS_EVERY == 0:
            print(f"\rscoring: {count} traces read", end="", file=sys.stderr, flush=True)

    return show


@app.command()
def schema() -> None:
    """Print the JSON Schema of spec files (point your editor's YAML/JSON support at it)."""
    from evaltrace.evaluators.spec_loader import shipped_schema

    typer.echo(json.dumps(shipped_schema(), indent=2))
