"""`evaltrace run`: call an agent over a spec's cases, record the run, then score it like `evaltrace score`.

The run goes into a new folder (`runs/<timestamp>-<id>/`, or `--out`); its location is printed
on stderr so the run can be scored again later. Scoring is `evaltrace score FOLDER` with the same
options, so stdout, `--json` and the exit codes (0 gate passed, 1 gate failed, 2 bad input) are
exactly those of `evaltrace score`. An agent that raises or times out gives failed entries, never
a crash.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evaltrace.cli import _score
from evaltrace.cli.main import app
from evaltrace.evaluators.errors import InputError

if TYPE_CHECKING:
    from evaltrace.evaluators.runner import RunResult

_JUDGE = "Judge"
_SELECT = "Selection"
_RUN = "Run"


@app.command()
def run(
    agent: Annotated[
        str,
        typer.Option("--agent", help="The agent function as MODULE:FUNCTION (sync or async).", rich_help_panel=_RUN),
    ],
    spec: Annotated[str, typer.Option("--spec", help="Spec file (YAML or JSON); FILE::CASE_ID runs one case.")],
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Calls per case.", rich_help_panel=_RUN)] = 1,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Cases running at once.", rich_help_panel=_RUN)
    ] = 1,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", min=0.0, help="Seconds one call (one turn) may take.", rich_help_panel=_RUN),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Folder for the run (default runs/<timestamp>-<id>/).", rich_help_panel=_RUN),
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
    """Run an agent over a spec's cases, record its spans, then score and gate like `evaltrace score`."""
    from evaltrace.evaluators.engine import ScoreOptions, select_cases
    from evaltrace.evaluators.runner import RunOptions, load_agent, new_run_directory, run_agent
    from evaltrace.evaluators.spec_loader import load_spec, split_spec_arg

    if timeout is not None and timeout <= 0:
        raise InputError("--timeout: must be more than 0 seconds")
    function = load_agent(agent)
    spec_file, case_id = split_spec_arg(spec)
    loaded = load_spec(spec_file)
    globs = tuple(case or ()) + ((_literal_glob(case_id),) if case_id else ())
    if case_id is not None and case_id not in {c.id for c in loaded.cases}:
        known = ", ".join(c.id for c in loaded.cases)
        raise InputError(f"{spec_file}: no case with id {case_id!r} (cases: {known})")
    cases = select_cases(loaded, ScoreOptions(tiers=tuple(tier or ()), tags=tuple(tag or ()), cases=globs))
    directory = out if out is not None else new_run_directory()
    options = RunOptions(repeat=repeat, concurrency=concurrency, timeout=timeout)
    result = run_agent(function, cases, directory, options)
    _report_run(result, spec, tier, tag, case)
    _score.score(
        paths=[str(directory)],
        spec=spec,
        confidence=confidence,
        json_path=json_path,
        tier=tier,
        tag=tag,
        case=case,
        judge_model=judge_model,
        judge_base_url=judge_base_url,
        judge_api_key=judge_api_key,
        judge_timeout=judge_timeout,
        judge_concurrency=judge_concurrency,
        judge_max_requests=judge_max_requests,
        judge_cache_dir=judge_cache_dir,
        no_judge_cache=no_judge_cache,
    )


def _report_run(
    result: RunResult, spec: str, tier: list[str] | None, tag: list[str] | None, case: list[str] | None
) -> None:
    """Tell the user (on stderr, so stdout stays `evaltrace score`'s) what ran and where it is."""
    for call in result.calls:
        if call.outcome != "ok":
            turn = f" turn {call.turn}" if call.turn is not None else ""
            print(f"{call.case_id} (repeat {call.repeat}{turn}): {call.outcome}: {call.error}", file=sys.stderr)
    counts = ", ".join(f"{result.count(o)} {o}" for o in ("ok", "error", "timeout"))
    print(f"recorded {len(result.calls)} agent calls ({counts}) into {result.directory}", file=sys.stderr)
    selection = [f"--tier {shlex.quote(t)}" for t in tier or []] + [f"--tag {shlex.quote(t)}" for t in tag or []]
    selection += [f"--case {shlex.quote(c)}" for c in case or []]
    command = ["evaltrace score", shlex.quote(str(result.directory)), "--spec", shlex.quote(spec), *selection]
    print("score it again with: " + " ".join(command), file=sys.stderr)


def _literal_glob(text: str) -> str:
    # `file::case_id` names one case exactly, even when its id contains glob characters.
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)
