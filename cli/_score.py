"""`evaltrace score` (score stored traces and gate) and `evaltrace schema` (the spec's JSON Schema).

Exit codes (README.md, "Score"): 0 the gate passed, 1 the gate failed, 2 bad input or usage. The
summary goes to stdout; with `--json -` the report takes stdout and the summary goes to stderr.
The report's entries are streamed to the file (a temporary name, renamed into place at the end),
so scoring memory does not grow with the number of traces.
A progress bar (`_progress.py`) is drawn on stderr only when stderr is a terminal.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Annotated, Any

import typer

from evaltrace.cli import _options as opt
from evaltrace.cli._progress import progress_bar
from evaltrace.cli.main import app
from evaltrace.collector._terminal import printable
from evaltrace.evaluators.engine.time_limit import DEFAULT_SCORER_TIMEOUT
from evaltrace.evaluators.errors import InputError

_PATHS_HELP = "Span files, folders (their *.parquet files) or globs such as 'runs/*.parquet'."
EXIT_CODES_HELP = (
    "Exit codes: 0 the gate passed; 1 the gate failed; 2 bad input, usage or setup (one 'Error:' line on "
    "stderr); 130 interrupted; 141 the reader of the output went away."
)
"""The exit codes, as `score --help` and `run --help` list them (main.py returns them)."""


@app.command(epilog=EXIT_CODES_HELP)
def score(
    paths: Annotated[list[str], typer.Argument(help=_PATHS_HELP, metavar="PATH")],
    spec: Annotated[
        str | None,
        typer.Option("--spec", metavar="FILE", help="Spec file (YAML or JSON); FILE::CASE_ID scores one case."),
    ] = None,
    confidence: opt.Confidence = None,
    json_path: opt.JsonPath = None,
    tier: opt.Tiers = None,
    tag: opt.Tags = None,
    case: opt.CaseGlobs = None,
    workers: opt.Workers = None,
    scorer_timeout: opt.ScorerTimeout = DEFAULT_SCORER_TIMEOUT,
    plugin: opt.Plugins = None,
    judge_model: opt.JudgeModel = None,
    judge_base_url: opt.JudgeBaseUrl = None,
    judge_api_key: opt.JudgeApiKey = None,
    judge_timeout: opt.JudgeTimeout = None,
    judge_concurrency: opt.JudgeConcurrency = None,
    judge_max_requests: opt.JudgeMaxRequests = None,
    judge_cache_dir: opt.JudgeCacheDir = None,
    no_judge_cache: opt.NoJudgeCache = False,
    judge_allow_insecure: opt.JudgeAllowInsecure = False,
) -> None:
    """Score stored traces against a spec (or the reference-free defaults) and gate on the pass rate."""
    # Imported here so that other commands start without the scoring machinery.
    from evaltrace.evaluators.engine.scoring import ScoreOptions, score_paths_to
    from evaltrace.evaluators.report.model import ReportWriter
    from evaltrace.evaluators.report.terminal import render_summary

    opt.load_plugins(plugin)
    loaded, case_from_spec_arg = opt.load_spec_arg(spec) if spec is not None else (None, None)
    if loaded is None and (tier or tag or case):
        raise InputError("--tier, --tag and --case select spec cases: pass --spec FILE")
    options = ScoreOptions(
        confidence=confidence,
        tiers=tuple(tier or ()),
        tags=tuple(tag or ()),
        cases=opt.case_globs(case, case_from_spec_arg),
        paths=tuple(paths),
        scorer_timeout=scorer_timeout or None,  # 0: no limit
        judge_overrides=_judge_overrides(
            model=judge_model,
            base_url=judge_base_url,
            api_key=judge_api_key,
            timeout=judge_timeout,
            concurrency=judge_concurrency,
            max_requests=judge_max_requests,
            cache_dir=judge_cache_dir,
            no_cache=no_judge_cache or None,
            allow_insecure=judge_allow_insecure or None,
        ),
    )
    writer = ReportWriter(json_path) if json_path is not None else None
    try:
        # `--json -` on a terminal: the report's lines and the bar would share the screen.
        shown = not (json_path == "-" and _stdout_is_terminal())
        with progress_bar("scoring", "traces", lambda: _count_traces(paths), shown=shown) as progress:
            options = dataclasses.replace(options, progress=progress)
            run = score_paths_to(paths, loaded, options, writer, workers=workers)
        if writer is not None:
            writer.finish(run.report)
    finally:
        if writer is not None:
            writer.abort()
    # The summary quotes recorded content (reasons, model names): shown, never run by the terminal.
    summary = printable(render_summary(run.report, run.digest), layout=True)
    typer.echo(summary, nl=False, err=json_path == "-")
    if not run.report.passed:
        raise typer.Exit(1)


def _judge_overrides(**values: Any) -> dict[str, Any]:
    # `None` means "not given": the environment (or the default) then applies.
    return {key: value for key, value in values.items() if value is not None}


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced by an object without a file, or closed
        return False


def _count_traces(paths: list[str]) -> int:
    """The recorded traces in `paths`, read from the trace-id column alone (~0.3% of scoring's time)."""
    from evaltrace.collector.reader import find_trace_ids

    return len(find_trace_ids(paths, ""))


@app.command()
def schema() -> None:
    """Print the JSON Schema of spec files (point your editor's YAML/JSON support at it)."""
    from evaltrace.evaluators.spec.loader import shipped_schema

    typer.echo(json.dumps(shipped_schema(), indent=2))
