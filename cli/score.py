"""`evaltrace score`: score stored traces and gate on the pass rate.

Exit codes (docs/scoring.md, "Exit codes"): 0 the gate passed, 1 the gate failed, 2 bad input or usage.
What scoring writes, and where, is `_scoring.py`'s, shared with `evaltrace run`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.cli import _otlp_options as otlp
from evaltrace.cli._scoring import Scoring, score_and_gate, score_options
from evaltrace.cli._scoring_options import GateArgs, JudgeArgs, ReportArgs, SelectionArgs, option_groups
from evaltrace.evaluators.engine.time_limit import DEFAULT_SCORER_TIMEOUT


@option_groups
def score(
    paths: Annotated[list[str], typer.Argument(help=opt.PATHS_HELP, metavar="PATH")],
    *,
    spec: Annotated[
        str | None,
        typer.Option("--spec", metavar="FILE", help="Spec file (YAML or JSON); FILE::CASE_ID scores one case."),
    ] = None,
    gate: GateArgs,
    min_judge_kappa: opt.MinJudgeKappa = None,
    reports: ReportArgs,
    selection: SelectionArgs,
    workers: opt.Workers = None,
    engine: opt.Engine = "local",
    ray_address: opt.RayAddress = None,
    no_cache: opt.NoCache = False,
    scorer_timeout: opt.ScorerTimeout = DEFAULT_SCORER_TIMEOUT,
    plugin: opt.Plugins = None,
    judge: JudgeArgs,
    send_results: otlp.SendResults = None,
    protocol: otlp.Protocol = "http/protobuf",
    header: otlp.Headers = None,
) -> None:
    """Score stored traces against a spec (or the reference-free defaults) and gate on the pass rate."""
    opt.load_plugins(plugin)
    scoring = Scoring(
        spec=spec,
        options=score_options(gate.confidence, selection, workers, scorer_timeout, no_cache, judge, ray_address),
        engine=engine,
        reports=reports.destinations(gate.json_path),
        store=opt.store_choice(gate.store, gate.no_store),
        baseline=gate.baseline,
        alpha=gate.alpha,
        strict=gate.strict,
        min_judge_kappa=min_judge_kappa,
        send_results=otlp.results_target(send_results, protocol, header),
    )
    score_and_gate(paths, scoring)
