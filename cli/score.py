"""`evaltrace score`: score stored traces and gate on the pass rate.

Exit codes (docs/scoring.md, "Exit codes"): 0 the gate passed, 1 the gate failed, 2 bad input or usage.
What scoring writes, and where, is `_scoring.py`'s, shared with `evaltrace run`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from evaltrace.cli import _options as opt
from evaltrace.cli import _otlp_options as otlp
from evaltrace.cli._scoring import Scoring, judge_options, score_and_gate, score_options
from evaltrace.evaluators.engine.time_limit import DEFAULT_SCORER_TIMEOUT


def score(
    paths: Annotated[list[str], typer.Argument(help=opt.PATHS_HELP, metavar="PATH")],
    spec: Annotated[
        str | None,
        typer.Option("--spec", metavar="FILE", help="Spec file (YAML or JSON); FILE::CASE_ID scores one case."),
    ] = None,
    confidence: opt.Confidence = None,
    json_path: opt.JsonPath = None,
    store: opt.StoreDir = None,
    no_store: opt.NoStore = False,
    baseline: opt.Baseline = None,
    alpha: opt.Alpha = None,
    strict: opt.Strict = False,
    min_judge_kappa: opt.MinJudgeKappa = None,
    junit_path: opt.JunitPath = None,
    markdown_path: opt.MarkdownPath = None,
    html_path: opt.HtmlPath = None,
    report: opt.Reports = None,
    tier: opt.Tiers = None,
    tag: opt.Tags = None,
    case: opt.CaseGlobs = None,
    workers: opt.Workers = None,
    engine: opt.Engine = "local",
    ray_address: opt.RayAddress = None,
    no_cache: opt.NoCache = False,
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
    send_results: otlp.SendResults = None,
    protocol: otlp.Protocol = "http/protobuf",
    header: otlp.Headers = None,
) -> None:
    """Score stored traces against a spec (or the reference-free defaults) and gate on the pass rate."""
    opt.load_plugins(plugin)
    judge = judge_options(
        judge_model,
        judge_base_url,
        judge_api_key,
        judge_timeout,
        judge_concurrency,
        judge_max_requests,
        judge_cache_dir,
        no_judge_cache,
        judge_allow_insecure,
    )
    scoring = Scoring(
        spec=spec,
        options=score_options(confidence, (tier, tag, case), workers, scorer_timeout, no_cache, judge, ray_address),
        engine=engine,
        reports=opt.report_destinations(json_path, junit_path, markdown_path, html_path, report or ()),
        store=opt.store_choice(store, no_store),
        baseline=baseline,
        alpha=alpha,
        strict=strict,
        min_judge_kappa=min_judge_kappa,
        send_results=otlp.results_target(send_results, protocol, header),
    )
    score_and_gate(paths, scoring)
