"""The scoring loop: traces in, jobs routed and awaited, results parked on the spill.

Shared by the one-process engine (`scoring.score` and `ascore`) and by each worker process of a
sharded run (`shards.py`); held conversations are scored separately by `score_held`, since in a
sharded run they are only complete once every worker has handed its share over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.engine._routers import Job, SampleSpill, SpecRouter, TraceRouter
from evaltrace.evaluators.engine.sample import RunStats, is_async_scorer
from evaltrace.evaluators.results.report.model import SampleResult

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoreOptions

Router = TraceRouter | SpecRouter
_MAX_IN_FLIGHT = 64
"""Samples scored concurrently: bounds memory while judge requests of many samples overlap."""


async def score_stream(
    traces: Iterable[Trace], router: Router, stats: RunStats, spill: SampleSpill, options: ScoreOptions
) -> None:
    """Route and score every trace of `traces`; conversations are held on `router` (see `score_held`)."""
    if not any(is_async_scorer(scorer) for scorer in router.scorers()):
        score_stream_now(traces, router, stats, spill, options)
        return
    pending: set[asyncio.Task[tuple[str | None, SampleResult]]] = set()
    for trace in _counted(traces, stats, options):
        for job in router.route(trace, stats):
            pending.add(asyncio.create_task(job))
        if len(pending) >= _MAX_IN_FLIGHT:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                router.keep(spill, *task.result())
        await asyncio.sleep(0)  # let judge requests progress while the next trace is read
    await _drain(pending, router, spill)


def score_stream_now(
    traces: Iterable[Trace], router: Router, stats: RunStats, spill: SampleSpill, options: ScoreOptions
) -> None:
    """`score_stream` for runs without judges: each job is run to its end at once, with no event loop.

    Rule scorers never wait, so a task per sample and a loop turn per trace would only cost time
    (about a fifth of rule scoring).
    """
    for trace in _counted(traces, stats, options):
        for job in router.route(trace, stats):
            router.keep(spill, *_run_now(job))


def _counted(traces: Iterable[Trace], stats: RunStats, options: ScoreOptions) -> Iterator[Trace]:
    """`traces`, counting each one read (scored or not) and reporting progress."""
    for trace in traces:
        stats.traces += 1
        if options.progress is not None:
            options.progress(stats.traces)
        yield trace


def _run_now(job: Job) -> tuple[str | None, SampleResult]:
    try:
        job.send(None)
    except StopIteration as finished:
        result: tuple[str | None, SampleResult] = finished.value
        return result
    job.close()
    raise RuntimeError("a scoring job without judges waited: is_async_scorer must flag every async scorer")


async def score_held(router: Router, stats: RunStats, spill: SampleSpill) -> None:
    """Score the conversations `router` held until the input ended."""
    await _drain({asyncio.create_task(job) for job in router.finish(stats)}, router, spill)


async def _drain(
    pending: set[asyncio.Task[tuple[str | None, SampleResult]]], router: Router, spill: SampleSpill
) -> None:
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            router.keep(spill, *task.result())
