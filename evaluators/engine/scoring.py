"""The scoring engine: match traces to cases, run the scorers, aggregate repeats, gate.

Matching (docs/scoring.md, "Cases, entries and the gate"). A trace belongs to a case when any of its spans carries
`evaltrace.case_id` equal to the case id (`Trace.case_id`); otherwise when its input,
whitespace-normalised, equals the case's input (a trace whose input equals several cases'
input is a sample of each). Several traces of one case are repeats, decided by the case's
`repeat` rule. A multi-turn case matches a conversation (`Trace.conversation_id`, or the trace
alone when it has none): one of its traces carries the case id, or its first trace's input equals
the first turn's; turns are matched to the conversation's traces in start-time order. Traces that
match no case are reported as unmatched, not scored; traces of cases left out by the selection
are ignored.

Streaming. Traces are consumed one at a time and scored as they arrive; `Trace` objects are not
kept. Each sample's result is parked as JSON on a temporary file (`_spill.py`) as soon as it is
scored, since entries list samples by start time, known only once the input has ended; then
`score` sends the entries in order to a sink (`ReportWriter` streams them to the JSON
report) while only counts, pass rates, durations (8 bytes per trace each) and the summary's first
failing entries stay in memory. Memory is thus bounded by a batch of traces plus a small index row
per sample. The exception is a spec with multi-turn cases: traces that may belong to a
conversation are held until the input ends, since a conversation's traces arrive in any order.
Without a sink, `score` collects the entries into the returned report instead (small runs, tests, API).
`score` is the one synchronous entry (span files on an engine, or `Trace` records), `ascore` the async one.

Without a spec, every trace is an entry scored by the reference-free defaults.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import functools
import os
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version as dist_version
from typing import Any, cast

from evaltrace.collector.errors import InputError
from evaltrace.collector.gc_policy import bulk_collections, collections_paused
from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.engine._loop import Router, score_held, score_stream
from evaltrace.evaluators.engine._routers import SpecRouter, Totals, TraceRouter
from evaltrace.evaluators.engine._spill import Spill
from evaltrace.evaluators.engine.engines import DEFAULT_ENGINE, ENGINES
from evaltrace.evaluators.engine.sample import RunStats, judge_session_for
from evaltrace.evaluators.engine.time_limit import DEFAULT_SCORER_TIMEOUT, scorer_time_limit
from evaltrace.evaluators.results.report.model import (
    Counts,
    Report,
    ReportInputs,
    gate_from_rates,
)
from evaltrace.evaluators.results.report.terminal import FailureDigest
from evaltrace.evaluators.results.report.writer import EntryList, EntrySink
from evaltrace.evaluators.scoring.scorers.base import reads_histories
from evaltrace.evaluators.scoring.scorers.prices import DEFAULT_PRICES
from evaltrace.evaluators.scoring.scorers.registry import default_scorers
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec
from evaltrace.evaluators.scoring.spec.model import Case

DEFAULT_CONFIDENCE = 1.0
"""Without `confidence` in the spec or `--confidence`, every entry must pass."""


@dataclass(frozen=True)
class ScoreOptions:
    """How to score: the threshold, the selection, the engine's processes, the judge's options, the report's inputs.

    `evaltrace score` and `evaltrace run` build one from their options and hand it to the engine as it is.
    """

    confidence: float | None = None
    """Overrides the spec's `confidence`."""
    tiers: tuple[str, ...] = ()
    """Keep cases whose tier is one of these."""
    tags: tuple[str, ...] = ()
    """Keep cases carrying any of these tags."""
    cases: tuple[str, ...] = ()
    """Keep cases whose id matches any of these globs."""
    paths: tuple[str, ...] = ()
    """The PATH arguments, recorded in the report."""
    judge_overrides: dict[str, Any] = field(default_factory=dict)
    """`JudgeSettings` fields given as options (`--judge-*`), by field name; `JudgeSettings.from_env` puts
    them over the environment when a judge scorer runs (a run without judges never reads the judge's variables)."""
    workers: int | None = None
    """`local`: processes (`None`: one per CPU for large runs; runs with judge scorers use one);
    `ray`: shards (`None`: two per cluster CPU)."""
    ray_address: str | None = None
    """`--engine ray`: the cluster's address (`None`: `RAY_ADDRESS`, else a Ray started for the run)."""
    progress: Callable[[int], None] | None = None
    """Called with the number of traces read so far."""
    scorer_timeout: float | None = DEFAULT_SCORER_TIMEOUT
    """Seconds one scorer may take on one entry (`None`: no limit); past it, the scorer's result
    is an error naming it. Judge scorers are bounded by the judge's own timeout instead."""
    cache: bool = True
    """Read span files through the traces cache (`collector/traces/cache.py`): a re-scoring of
    unchanged files reads their traces table instead of rebuilding the traces (`--no-cache`: off)."""
    columnar: bool = True
    """Take the table path (`columnar_entries.py`) where it applies, cached or not; off: the per-trace path,
    every trace decoded and scored (taken again when a table cannot be read; the tests' reference)."""
    store_values: bool = True
    """Pack each scored sample's score-store values beside its JSON where it is scored (in a sharded
    run, by its worker); off when no score store is written (`--no-store`), which would drop them."""

    def __post_init__(self) -> None:
        """Reject a limit that is not a positive number of seconds, or fewer than one worker."""
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be at least 1, not {self.workers}")
        if self.scorer_timeout is not None and not self.scorer_timeout > 0:
            raise ValueError(
                f"scorer_timeout must be more than 0 seconds (or None for no limit), not {self.scorer_timeout}"
            )


def select_cases(spec: LoadedSpec, options: ScoreOptions) -> list[Case]:
    """The cases the selection keeps (tiers OR'ed, tags OR'ed, id globs OR'ed; the three AND'ed).

    Raises:
        InputError: no case is left.
    """
    selected = [
        case
        for case in spec.cases
        if (not options.tiers or case.tier in options.tiers)
        and (not options.tags or any(tag in case.tags for tag in options.tags))
        and (not options.cases or any(fnmatch.fnmatchcase(case.id, pattern) for pattern in options.cases))
    ]
    if not selected:
        wanted = _describe_selection(options)
        raise InputError(f"{spec.path}: no case matches the selection ({wanted}); check the case ids, tiers and tags")
    return selected


def _describe_selection(options: ScoreOptions) -> str:
    parts = [f"--tier {t}" for t in options.tiers] + [f"--tag {t}" for t in options.tags]
    return " ".join(parts + [f"--case {c}" for c in options.cases]) or "all cases"


@dataclass(frozen=True)
class ScoredRun:
    """A scored run: the report and what the terminal summary lists."""

    report: Report
    """The report; its `entries` are empty when they went to a sink."""
    digest: FailureDigest
    """The failing and missing entries the terminal summary lists."""


def score(
    source: Iterable[Trace] | Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    spec: LoadedSpec | None = None,
    options: ScoreOptions | None = None,
    sink: EntrySink | None = None,
    *,
    engine: str = DEFAULT_ENGINE,
) -> ScoredRun:
    """Score traces (against a spec's cases, or by the reference-free defaults) and gate.

    Args:
        source: span files (files, folders, globs, as the CLI takes them, or the `RunFiles` they
            resolved to), scored on `engine`; or `Trace` records, consumed once, one at a time,
            scored in this process.
        spec: the loaded spec, or `None` to score every trace with the defaults.
        options: threshold override, selection, processes, report inputs, judge overrides.
        sink: where the entries go, in report order, streamed (memory stays bounded); `None`
            keeps them in the returned report's `entries` (small runs, tests).
        engine: `local` or `ray` (`engines.ENGINES`), for span files.

    Returns:
        The report, with the gate's verdict in `passed`, and the summary's failing entries.

    Raises:
        InputError: an unknown engine; a path names nothing or a file is unreadable; the
            selection keeps no case; there was no trace to score without a spec.
    """
    paths = _paths_in(source)
    if paths is None:
        return _run_sync(ascore(source, spec, options, sink, engine=engine))
    options = options or ScoreOptions()
    kept = EntryList() if sink is None else None
    return _with_entries(ENGINES.get(engine)(paths, spec, options, sink if sink is not None else kept), kept)


async def ascore(
    source: Iterable[Trace] | Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    spec: LoadedSpec | None = None,
    options: ScoreOptions | None = None,
    sink: EntrySink | None = None,
    *,
    engine: str = DEFAULT_ENGINE,
) -> ScoredRun:
    """`score` for callers already in an event loop.

    Traces are scored in the caller's loop (judges share it), span files in a worker thread (their
    engines run event loops of their own).
    """
    if _paths_in(source) is not None:
        return await asyncio.to_thread(score, source, spec, options, sink, engine=engine)
    _in_process(engine)
    options = options or ScoreOptions()
    kept = EntryList() if sink is None else None
    router, stats = new_run(spec, options)
    traces = cast("Iterable[Trace]", source)
    return _with_entries(await _ascore(traces, router, stats, spec, options, sink if sink is not None else kept), kept)


def _paths_in(source: object) -> Sequence[str | os.PathLike[str]] | None:
    """The span files `source` names (a path, or a sequence of them), or `None` for `Trace` records."""
    if isinstance(source, (str, os.PathLike)):
        return [source]
    if isinstance(source, Sequence) and all(isinstance(item, (str, os.PathLike)) for item in source):
        return source
    return None


def _in_process(engine: str) -> None:
    ENGINES.get(engine)  # an unknown name is that error, not this one
    if engine != DEFAULT_ENGINE:
        raise InputError(f"engine {engine!r} scores span files; Trace records are scored in this process (local)")


def _with_entries(run: ScoredRun, kept: EntryList | None) -> ScoredRun:
    if kept is None:
        return run
    return dataclasses.replace(run, report=run.report.model_copy(update={"entries": kept.entries}))


def _run_sync(job: Coroutine[Any, Any, ScoredRun]) -> ScoredRun:
    runs: list[ScoredRun] = []

    async def main() -> None:
        # The result is handed out through `runs`, not as the main task's result: on exit,
        # `asyncio.run` restores the SIGINT handler and CPython 3.11 then formats the task's repr,
        # result included.
        runs.append(await job)

    asyncio.run(main())
    return runs[0]


async def _ascore(
    traces: Iterable[Trace],
    router: Router,
    stats: RunStats,
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None,
) -> ScoredRun:
    with Spill() as spill, scorer_time_limit(options.scorer_timeout):
        async with judge_session_for(router.scorers(), options.judge_overrides) as judge_stats:
            await score_stream(traces, router, stats, spill, options)
            await score_held(router, stats, spill)
            judge = judge_stats()
        return _finish(router, stats, spill, spec, options, sink, judge)


def score_files(
    paths: Sequence[str | os.PathLike[str]],
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None,
) -> ScoredRun:
    """The `local` engine: read span files and score their traces, on several cores if it pays.

    With more than one worker, each of `options.workers` forked processes reads, rebuilds and scores one
    shard of the traces (see `shards.py`); the report is the one a single process would write.
    With `options.cache`, traces come through the traces cache (each worker caches its shard).
    `options.workers` `None` picks one per CPU for large runs; runs with judge scorers, and
    platforms other than Linux, use one. The rest is `score`'s.
    """
    from evaltrace.collector.otlp.files.inputs import resolve_paths
    from evaltrace.collector.runfiles.reader import recording_losses
    from evaltrace.collector.traces.cache import traces_of
    from evaltrace.evaluators.engine import columnar_entries as warm
    from evaltrace.evaluators.engine import shards, store_parts

    if options.ray_address is not None:
        raise InputError("--ray-address is for --engine ray")
    # --no-cache: OTLP files imported anew too; the CLI's RunFiles (resolved once) come back as they are
    files = resolve_paths(paths, fresh_imports=not options.cache)
    losses = recording_losses(files)
    router, stats = new_run(spec, options)
    stats.dropped_spans, stats.unwritten_spans = losses
    count = shards.plan_workers(options.workers, files, router)
    histories = reads_histories(router.scorers())
    columnar = options.columnar and warm.applies(router)  # the table cached, or built and dropped (--no-cache)
    if columnar and (count == 1 or warm.in_one_process(files, shards.span_bytes(files), options, count, histories)):
        finish = functools.partial(_finish, router, stats, spec=spec, options=options, sink=sink, judge=None)
        done = warm.score_warm(files, router, stats, options, workers=count, histories=histories, finish=finish)
        if done is not None:
            return done
        router, stats = new_run(spec, options)  # as new: a warm path given up midway may have used them
        stats.dropped_spans, stats.unwritten_spans = losses
        columnar = False
    if count == 1:
        with bulk_collections():
            traces = traces_of(files, histories=histories, cache=options.cache)
            return _run_sync(_ascore(traces, router, stats, spec, options, sink))
    try:
        with Spill() as spill, bulk_collections():
            shards.score_sharded(files, router, stats, spill, options, count, histories=histories, columnar=columnar)
            with scorer_time_limit(options.scorer_timeout):  # each worker set its own: threads do not survive a fork
                asyncio.run(score_held(router, stats, spill))  # a sharded run has no judge: nothing awaits the network
            with store_parts.writing(router, spill, sink, options, count):  # the store's rows beside the report
                return _finish(router, stats, spill, spec, options, sink, None)
    except warm.TableFault:  # scored again per trace, which reads the table again, discards it and rebuilds
        if not columnar:
            raise
        return score_files(paths, spec, dataclasses.replace(options, columnar=False), sink)


def new_run(spec: LoadedSpec | None, options: ScoreOptions) -> tuple[Router, RunStats]:
    """A run's router (the spec's selected cases, else the default scorers) and its empty statistics."""
    if spec is None:
        return TraceRouter(default_scorers()), RunStats(prices=dict(DEFAULT_PRICES))
    router = SpecRouter(spec, select_cases(spec, options), pack_sides=options.store_values)
    return router, RunStats(prices={**DEFAULT_PRICES, **spec.spec.prices})


def _finish(
    router: Router,
    stats: RunStats,
    spill: Spill,
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None,
    judge: dict[str, Any] | None,
) -> ScoredRun:
    totals = Totals()
    # Writing 10,000 entries allocates ~850,000 acyclic containers (Arrow row tuples waiting for
    # their batch, the report's scorer list); the report is kept to the end of the run.
    with collections_paused(settle=True):
        router.emit(spill, totals, sink)
        report = _build_report(router, totals, stats, spec, options, judge)
    return ScoredRun(report=report, digest=totals.digest)


def _build_report(
    router: Router,
    totals: Totals,
    stats: RunStats,
    spec: LoadedSpec | None,
    options: ScoreOptions,
    judge: dict[str, Any] | None,
) -> Report:
    if not totals.entries:
        raise InputError("no trace to score: the PATHs hold no traces")
    confidence = _confidence(spec, options)
    gate = gate_from_rates(totals.rates, confidence)
    return Report(
        evaltrace_version=dist_version("evaltrace"),
        created_at=datetime.now(UTC),
        inputs=ReportInputs(
            paths=list(options.paths),
            spec=spec.path if spec is not None else None,
            tiers=list(options.tiers),
            tags=list(options.tags),
            cases=list(options.cases),
            dropped_spans=stats.dropped_spans,
            unwritten_spans=stats.unwritten_spans,
        ),
        passed=gate.passed,
        pass_rate=gate.pass_rate,
        confidence=confidence,
        gate_reason=gate.reason,
        counts=_counts(totals, stats.traces, len(router.unmatched)),
        entries=[],
        scorers=router.scorer_infos(),
        scorer_counts=router.state.scorer_tally.rows(),
        latency=stats.latency(),
        usage=stats.usage,
        cost=stats.cost(),
        unmatched=router.unmatched,
        judge=judge,
    )


def _confidence(spec: LoadedSpec | None, options: ScoreOptions) -> float:
    if options.confidence is not None:
        return options.confidence
    if spec is not None and spec.spec.confidence is not None:
        return spec.spec.confidence
    return DEFAULT_CONFIDENCE


def _counts(totals: Totals, traces: int, unmatched: int) -> Counts:
    count = totals.statuses
    return Counts(
        entries=totals.entries,
        passed=count["passed"],
        failed=count["failed"],
        missing=count["missing"],
        not_applicable=count["not_applicable"],
        traces=traces,
        unmatched=unmatched,
    )
