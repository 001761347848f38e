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

from evaltrace.cli import _options as opt
from evaltrace.cli import _score
from evaltrace.cli.main import app
from evaltrace.evaluators.errors import InputError

from evaltrace.collector._terminal import plural, printable
from evaltrace.evaluators._time_limit import DEFAULT_SCORER_TIMEOUT
if TYPE_CHECKING:
    from evaltrace.evaluators.runner import RunResult

_RUN = "Run"


@app.command()
def run(
    agent: Annotated[
        str,
        typer.Option(
            "--agent",
            metavar="MODULE:FUNCTION",
            help="The agent function as MODULE:FUNCTION (sync or async).",
            rich_help_panel=_RUN,
        ),
    ],
    spec: Annotated[
        str, typer.Option("--spec", metavar="FILE", help="Spec file (YAML or JSON); FILE::CASE_ID runs one case.")
    ],
    repeat: Annotated[
        int, typer.Option("--repeat", metavar="N", min=1, help="Calls per case.", rich_help_panel=_RUN)
    ] = 1,
    concurrency: Annotated[
        int, typer.Option("--concurrency", metavar="N", min=1, help="Cases running at once.", rich_help_panel=_RUN)
    ] = 1,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", metavar="SECONDS", min=0.0, help="Seconds one call (one turn) may take.", rich_help_panel=_RUN
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", metavar="DIR", help="Folder for the run (default runs/<timestamp>-<id>/).", rich_help_panel=_RUN
        ),
    ] = None,
    confidence: opt.Confidence = None,
    json_path: opt.JsonPath = None,
    tier: opt.Tiers = None,
    tag: opt.Tags = None,
    case: opt.CaseGlobs = None,
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
    scorer_timeout: opt.ScorerTimeout = DEFAULT_SCORER_TIMEOUT,
) -> None:
    """Run an agent over a spec's cases, record its spans, then score and gate like `evaltrace score`."""
    from evaltrace.evaluators.engine import ScoreOptions, select_cases
    from evaltrace.evaluators.runner import RunOptions, load_agent, new_run_directory, run_agent

    if timeout is not None and timeout <= 0:
        raise InputError("--timeout: must be more than 0 seconds")
    function = load_agent(agent)
    opt.load_plugins(plugin)  # before the spec, which may name the plugins' scorers
    loaded, case_id = opt.load_spec_arg(spec)
    selection = ScoreOptions(tiers=tuple(tier or ()), tags=tuple(tag or ()), cases=opt.case_globs(case, case_id))
    cases = select_cases(loaded, selection)
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
        # This process ran the agent and may still have its threads: never fork it.
        workers=1,
        plugin=None,  # loaded above, once
        judge_model=judge_model,
        judge_base_url=judge_base_url,
        judge_api_key=judge_api_key,
        judge_timeout=judge_timeout,
        judge_concurrency=judge_concurrency,
        judge_max_requests=judge_max_requests,
        scorer_timeout=scorer_timeout,
        judge_cache_dir=judge_cache_dir,
        no_judge_cache=no_judge_cache,
        judge_allow_insecure=judge_allow_insecure,
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
