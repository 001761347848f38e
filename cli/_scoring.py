"""Scoring and gating a run, shared by `evaltrace score` and `evaltrace run` through one options object.

The summary goes to stdout; with `--json -` (or `--report json=-`) the report takes stdout and the summary goes to
stderr. The report's entries are streamed to each report asked for (`--json`, `--junit`,
`--markdown`, `--html`; a temporary name, renamed into place at the end), so scoring memory does not grow
with the number of traces; every report path is checked before any work starts. A progress bar
(`_progress.py`) is drawn on stderr only when stderr is a terminal.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import typer

from evaltrace.cli import _options as opt
from evaltrace.cli._progress import progress_bar
from evaltrace.collector.errors import InputError
from evaltrace.collector.gc_policy import collections_paused
from evaltrace.collector.terminal import inline

if TYPE_CHECKING:
    from evaltrace.cli._scoring_options import JudgeArgs, SelectionArgs
    from evaltrace.collector.otlp.files.inputs import RunFiles
    from evaltrace.collector.otlp.send.targets import ResultsTarget
    from evaltrace.evaluators.engine.scoring import ScoreOptions
    from evaltrace.evaluators.results.compare.baseline import BaselineCheck
    from evaltrace.evaluators.results.compare.comparison import CompareOptions
    from evaltrace.evaluators.results.compare.sides import Side
    from evaltrace.evaluators.results.report.results_writer import ResultsWriter
    from evaltrace.evaluators.results.report.writer import ReportFormat
    from evaltrace.evaluators.results.store.writer import StoreWriter
    from evaltrace.evaluators.scoring.spec.loader import LoadedSpec

_Added = TypeVar("_Added", bound="ReportFormat")

EXIT_CODES_HELP = (
    "Exit codes: 0 the gate passed; 1 the gate failed; 2 bad input, usage or setup (one 'Error:' line on "
    "stderr); 130 interrupted; 141 the reader of the output went away."
)
"""The exit codes, as `score --help` and `run --help` list them (main.py returns them)."""


@dataclass(frozen=True)
class Scoring:
    """What `score` and `run` ask of scoring: the engine's options, the spec, the gate, the reports, the store."""

    spec: str | None
    """`FILE` or `FILE::CASE_ID`; `None` scores with the reference-free defaults."""
    options: ScoreOptions
    """Handed to the engine as it is, with the spec's case id, the PATHs and the progress bar added."""
    loaded: tuple[LoadedSpec, str | None] | None = None
    """The spec already loaded by `run` (and the case id of `FILE::CASE_ID`): each command loads it once."""
    engine: str = "local"
    """`--engine NAME`: where the traces are scored (`evaluators/engine/engines.py`)."""
    reports: Sequence[tuple[str, str]] = ()
    """The reports as `(format, FILE)`, each FILE checked (`opt.report_destinations`); `("json", "-")` takes stdout."""
    store: Path | None = None
    """The score store the scoring is added to; `None`: not stored (`--no-store`)."""
    baseline: str | None = None
    """`--baseline REF`: a JSON report or a stored scoring-run id this scoring must not regress from."""
    alpha: float | None = None
    """`--alpha P` of the baseline's tests (`None`: the default)."""
    strict: bool = False
    """`--strict`: any case that regressed against the baseline fails the gate."""
    min_judge_kappa: float | None = None
    """`--min-judge-kappa K`: refuse to gate on a judge whose kappa against the store's labels is below K."""
    send_results: ResultsTarget | None = None
    """`--send-results [KIND:]URL`: where every score is sent (OTLP events, Phoenix annotations, Langfuse scores)."""


def score_options(
    confidence: float | None,
    selection: SelectionArgs,
    workers: int | None,
    scorer_timeout: float,
    no_cache: bool,
    judge: JudgeArgs,
    ray_address: str | None = None,
) -> ScoreOptions:
    """The options `score` and `run` share, as the engine's `ScoreOptions`."""
    # The scoring machinery's first import in a run, with no cyclic collection meanwhile: the collector's
    # ~120 passes over the new modules' objects found no garbage and took ~15% of a warm run's imports.
    with collections_paused(settle=True):
        from evaltrace.evaluators.engine.scoring import ScoreOptions

    return ScoreOptions(
        confidence=confidence,
        tiers=tuple(selection.tier or ()),
        tags=tuple(selection.tag or ()),
        cases=tuple(selection.case or ()),
        workers=workers,
        ray_address=ray_address,
        scorer_timeout=scorer_timeout or None,  # 0: no limit
        cache=not no_cache,
        judge_overrides=judge.overrides(),
    )


def score_and_gate(paths: list[str], scoring: Scoring) -> None:
    """Score the traces in `paths`, write the report and the summary, and exit 1 when the gate fails."""
    # Imported here so that other commands start without the scoring machinery.
    from evaltrace.collector.otlp.files.inputs import resolve_paths
    from evaltrace.evaluators.engine.engines import ENGINES, READS_URIS
    from evaltrace.evaluators.engine.scoring import score
    from evaltrace.evaluators.results.report.formats import ReportTarget, open_formats
    from evaltrace.evaluators.results.report.terminal import render_summary
    from evaltrace.evaluators.results.report.writer import Discard

    ENGINES.check(scoring.engine)  # an unknown name stops us before any scoring
    baseline = baseline_side(scoring.baseline, scoring.store)  # a bad REF stops us before any scoring
    comparing = compare_options(scoring.baseline, scoring.alpha, scoring.strict)
    loaded, case_from_spec_arg = _spec_of(scoring)
    options = scoring.options
    if loaded is None and (options.tiers or options.tags or options.cases):
        raise InputError("--tier, --tag and --case select spec cases: pass --spec FILE")
    if scoring.min_judge_kappa is not None:
        _check_judges(loaded, scoring.min_judge_kappa, scoring.store)  # before any scoring work
    cases = opt.case_globs(list(options.cases), case_from_spec_arg)
    options = dataclasses.replace(options, cases=cases, paths=tuple(paths), store_values=scoring.store is not None)
    to_stdout = ("json", "-") in scoring.reports  # the report takes stdout: the summary goes to stderr
    # The PATHs resolved once (OTLP files imported here): the count, the engine and the HTML report read these.
    files = resolve_paths(paths, fresh_imports=not options.cache, uris=scoring.engine in READS_URIS)
    writer: ReportFormat | None = open_formats(
        [(name, ReportTarget(path, scoring.spec, cache=options.cache, files=files)) for name, path in scoring.reports]
    )
    store: StoreWriter | None = None
    results: ResultsWriter | None = None
    if scoring.store is not None:  # this scoring also goes into the score store
        from evaltrace.evaluators.results.store.writer import open_store

        writer, store = _joined(writer, partial(open_store, scoring.store, loaded))
    if scoring.send_results is not None:  # and every score to the backend
        from evaltrace.evaluators.results.report.results_writer import ResultsWriter

        writer, results = _joined(writer, partial(ResultsWriter, scoring.send_results, _judged_scorers(loaded)))
    # The comparison with the baseline sits in front of the others, which then carry it.
    check: BaselineCheck | None = None
    if baseline is not None and comparing is not None:  # both are given by --baseline
        from evaltrace.evaluators.results.compare.baseline import BaselineCheck

        writer = check = BaselineCheck(baseline, comparing, writer)
    try:
        # `--json -` on a terminal: the report's lines and the bar would share the screen.
        shown = not (to_stdout and _stdout_is_terminal())
        with progress_bar("scoring", "traces", lambda: _count_traces(files), shown=shown) as progress:
            options = dataclasses.replace(options, progress=progress)
            run = score(files, loaded, options, writer if writer is not None else Discard(), engine=scoring.engine)
        if writer is not None:
            writer.finish(run.report)
    finally:
        if writer is not None:
            writer.abort()
    # The summary quotes recorded content (reasons, model names): `render_summary` lays each out inert.
    typer.echo(render_summary(run.report, run.digest), nl=False, err=to_stdout)
    regressed = check is not None and _against_baseline(check, err=to_stdout)
    if results is not None:
        typer.echo(inline(results.summary()), err=True)
    if store is not None:
        # On stderr, like `run`'s notes: stdout stays the summary (or the report) scripts read.
        typer.echo(inline(f"scores stored: {store.run_id} in {store.folder}"), err=True)
    if not run.report.passed or regressed:
        raise typer.Exit(1)


def _spec_of(scoring: Scoring) -> tuple[LoadedSpec | None, str | None]:
    """The spec (loaded here unless `run` loaded it already) and the case id of `FILE::CASE_ID`."""
    if scoring.loaded is not None:
        return scoring.loaded
    return opt.load_spec_arg(scoring.spec, cache=scoring.options.cache) if scoring.spec is not None else (None, None)


def baseline_side(ref: str | None, store: Path | None) -> Side | None:
    """The `--baseline` run: a JSON report, or a scoring-run id looked up in `store` (else the default store)."""
    if ref is None:
        return None
    from evaltrace.evaluators.results.compare.sides import load_side
    from evaltrace.evaluators.results.store.location import store_folder

    return load_side(ref, store if store is not None else store_folder())


def _judged_scorers(loaded: LoadedSpec | None) -> frozenset[str]:
    """The scorers of this scoring whose verdicts an LLM judge gives."""
    from evaltrace.evaluators.scoring.scorers.registry import default_scorers

    turns = [t for turns in loaded.case_scorers.values() for t in turns] if loaded is not None else [default_scorers()]
    return frozenset(scorer.name for turn in turns for scorer in turn if scorer.uses_judge)


def _check_judges(loaded: LoadedSpec | None, min_kappa: float, store: Path | None) -> None:
    """Refuse (exit 2) when a judge this scoring uses is calibrated below `min_kappa`; note the unchecked ones."""
    from evaltrace.evaluators.results.review.calibration import judge_check
    from evaltrace.evaluators.results.store.location import store_folder

    judges = _judged_scorers(loaded)
    for note in judge_check(store if store is not None else store_folder(), judges, min_kappa):
        typer.echo(inline(note), err=True)


def compare_options(baseline: str | None, alpha: float | None, strict: bool) -> CompareOptions | None:
    """`--alpha` and `--strict`, which only `--baseline` uses (`None` without it: nothing is compared).

    Raises:
        InputError: either was given without `--baseline`, or `--alpha` is out of range.
    """
    if baseline is None:
        if alpha is not None or strict:
            raise InputError("--alpha and --strict test against a baseline: pass --baseline REF")
        return None  # and the comparison's modules are not imported
    from evaltrace.evaluators.results.compare.comparison import CompareOptions

    return CompareOptions(alpha=opt.alpha_level(alpha), strict=strict)


def _against_baseline(check: BaselineCheck, err: bool) -> bool:
    """Print how this scoring compares with the baseline; whether that fails the gate."""
    from evaltrace.evaluators.results.compare.render import render_baseline

    assert check.comparison is not None  # the writers were finished
    # Reasons quote recorded content: `render_baseline` lays each out inert.
    typer.echo(render_baseline(check.comparison), nl=False, err=err)
    return check.comparison.regressed


def _joined(writer: ReportFormat | None, opened: Callable[[], _Added]) -> tuple[ReportFormat | None, _Added]:
    """`writer` joined by the writer `opened` returns (a store, a results sender); `writer` is aborted if that fails."""
    from evaltrace.evaluators.results.report.formats import FanOut

    try:
        added = opened()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return (added if writer is None else FanOut([writer, added])), added


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced by an object without a file, or closed
        return False


def _count_traces(files: RunFiles) -> int | None:
    """The recorded traces in `files`, read from the trace-id column alone (~0.3% of scoring's time).

    `None` (a bar without a total) when some files are URIs: only the engine's nodes read those.
    """
    from evaltrace.collector.runfiles.reader import find_trace_ids

    return None if files.uris else len(find_trace_ids(files, ""))
