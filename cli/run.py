"""`evaltrace run`: call an agent over a spec's cases, record the run, then score it like `evaltrace score`.

The installed instrumentations are loaded before the agent's module, as `opentelemetry-instrument`
would (unless it already did), and the run goes into a new folder (`runs/<timestamp>-<id>/`, or
`--out`), each span and log record once; its location is printed
on stderr so the run can be scored again later. Scoring is `evaltrace score FOLDER` with the same
options, through the same function (`_scoring.py`), so stdout, `--json` and the exit codes (0 gate
passed, 1 gate failed, 2 bad input) are exactly those of `evaltrace score`. An agent that raises or
times out gives failed entries, never a crash.
"""

from __future__ import annotations

import dataclasses
import itertools
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.cli import _otlp_options as otlp
from evaltrace.cli._progress import progress_bar
from evaltrace.cli._scoring import Scoring, baseline_side, compare_options, score_and_gate, score_options
from evaltrace.cli._scoring_options import GateArgs, JudgeArgs, ReportArgs, SelectionArgs, option_groups
from evaltrace.collector.errors import InputError
from evaltrace.collector.terminal import plural, printable
from evaltrace.evaluators.engine.time_limit import DEFAULT_SCORER_TIMEOUT

if TYPE_CHECKING:
    from evaltrace.evaluators.runner.agent import CallRecord, RunResult
    from evaltrace.evaluators.runner.call import CallOutcome
    from evaltrace.evaluators.scoring.spec.model import Case

_RUN = "Run"
_OUTCOMES: tuple[tuple[CallOutcome, str], ...] = (("ok", "ok"), ("error", "errors"), ("timeout", "timeouts"))
"""Each call outcome, singular and plural, in the order the run's tally lists them."""


@option_groups
def run(
    *,
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
    gate: GateArgs,
    no_cache: opt.NoCache = False,
    reports: ReportArgs,
    plugin: opt.Plugins = None,
    scorer_timeout: opt.ScorerTimeout = DEFAULT_SCORER_TIMEOUT,
    selection: SelectionArgs,
    judge: JudgeArgs,
    send_results: otlp.SendResults = None,
    protocol: otlp.Protocol = "http/protobuf",
    header: otlp.Headers = None,
) -> None:
    """Run an agent over a spec's cases, record its spans, then score and gate like `evaltrace score`."""
    from evaltrace.collector.recorder.autoconf import instrument_installed
    from evaltrace.evaluators.engine.sample import check_judge_setup
    from evaltrace.evaluators.engine.scoring import new_run, select_cases
    from evaltrace.evaluators.runner.agent import RunOptions, load_agent, new_run_directory, run_agent

    if timeout is not None and timeout <= 0:
        raise InputError("--timeout: must be more than 0 seconds")
    # This process runs the agent and may still have its threads when scoring: never fork it (workers=1).
    options = score_options(gate.confidence, selection, 1, scorer_timeout, no_cache, judge)
    # A bad FILE stops us before the agent runs.
    destinations = reports.destinations(gate.json_path)
    store_dir = opt.store_choice(gate.store, gate.no_store)  # an unwritable store stops us before the agent runs
    baseline_side(gate.baseline, store_dir)  # so does a --baseline REF that names no run
    compare_options(gate.baseline, gate.alpha, gate.strict)  # or --alpha / --strict without it
    results = otlp.results_target(send_results, protocol, header)  # and a bad --send-results
    # As `opentelemetry-instrument` would: the installed instrumentations, before the agent's module loads.
    instrument_installed()
    function = load_agent(agent)
    opt.load_plugins(plugin)  # before the spec, which may name the plugins' scorers
    loaded, case_id = opt.load_spec_arg(spec, cache=not no_cache)
    chosen = dataclasses.replace(options, cases=opt.case_globs(selection.case, case_id))
    cases = select_cases(loaded, chosen)
    # A judge that cannot be asked stops us before the agent runs, not after.
    check_judge_setup(new_run(loaded, chosen)[0].scorers(), options.judge_overrides)
    directory = out if out is not None else new_run_directory()
    run_options = RunOptions(repeat=repeat, concurrency=concurrency, timeout=timeout)
    with progress_bar("running", "calls", lambda: _planned_calls(cases, repeat)) as progress:
        result = run_agent(function, cases, directory, run_options, on_call=_counter(progress))
    _report_run(result, spec, selection)
    scoring = Scoring(
        spec=spec,
        options=options,
        loaded=(loaded, case_id),
        reports=destinations,
        store=store_dir,
        baseline=gate.baseline,
        alpha=gate.alpha,
        strict=gate.strict,
        send_results=results,
    )
    score_and_gate([str(directory)], scoring)  # the plugins and the spec were loaded above, once


def _planned_calls(cases: list[Case], repeat: int) -> int:
    """Calls the run will make if no conversation stops early: a turn each, a call per single-turn case."""
    return repeat * sum(len(case.turns) if case.turns else 1 for case in cases)


def _counter(progress: Callable[[int], None] | None) -> Callable[[CallRecord], None] | None:
    """The runner's per-call hook feeding the bar: it counts the calls that ended."""
    if progress is None:
        return None
    done = itertools.count(1)
    return lambda _call: progress(next(done))


def _report_run(result: RunResult, spec: str, selection: SelectionArgs) -> None:
    """Tell the user (on stderr, so stdout stays `evaltrace score`'s) what ran and where it is."""
    for call in result.calls:
        if call.outcome != "ok":
            turn = f" turn {call.turn}" if call.turn is not None else ""
            # The error is the agent's own text (often a model's): shown, never run by the terminal.
            line = f"{call.case_id} (repeat {call.repeat}{turn}): {call.outcome}: {call.error}"
            print(printable(line), file=sys.stderr)
    counts = ", ".join(plural(result.count(one), one, many) for one, many in _OUTCOMES)
    calls = plural(len(result.calls), "agent call")
    print(printable(f"recorded {calls} ({counts}) into {result.directory}"), file=sys.stderr)
    chosen = [f"--{name} {shlex.quote(value)}" for name, values in vars(selection).items() for value in values or []]
    command = ["evaltrace score", shlex.quote(str(result.directory)), "--spec", shlex.quote(spec), *chosen]
    print(printable("score it again with: " + " ".join(command)), file=sys.stderr)
