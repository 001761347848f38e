"""The warm path: samples made from the cached traces table's columns, a `Trace` only where they cannot be.

When the traces cache holds the run's traces table and every scorer of the selected cases has a
columnar form (`scoring/columns.py`), `score_files` takes this path instead of decoding each row
into a `Trace`. Each top-level row is routed to its case by its `case_id` and `input` columns (the
router's own matching); the case's scorers' forms are asked on the row; when every one gives its
sure pass, the sample is made from the row's columns (the very `SampleResult` the per-trace path
makes) and kept as that path keeps it, so the report, the store rows and the gate are the same.
The rows left undecided (a form's `None`: failures; rows matching several cases; a trace id two
rows share) are decoded with their nested agents' rows by the table's own decoder and scored by
the per-trace path, which gives the reasons. Unmatched rows are noted in table order, as there.

Nothing is forked: a sharded run's tables (a first scoring with workers caches one per shard) are
read one after the other in shard order, which is the order a sharded run merges its workers'
unmatched traces in. Multi-turn specs, runs without a spec and scorers without a form (plugins,
judges) keep the per-trace path.

A first scoring (no table yet) goes the same way (`score_shard`): the table is built from the span
files (`cache.built_batches`: flat GenAI traces' rows straight from their spans, the others'
converted) and written to the cache batch by batch, each batch scored as a cached one is; a Ray Data
group's table is built so from the group's spans. A `--no-cache` run goes the same way, its table
built and scored but never written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evaltrace.collector.arrow_arrays import column
from evaltrace.collector.gc_policy import bulk_collections
from evaltrace.collector.runfiles.shard import Shard
from evaltrace.collector.traces.cache import built_batches, is_cached, table_batches
from evaltrace.collector.traces.table import iter_table_traces
from evaltrace.evaluators.engine._aggregate import sample_statuses, score_rows, status_passed
from evaltrace.evaluators.engine._loop import Router, score_stream_now
from evaltrace.evaluators.engine._routers import SampleSpill, SpecRouter
from evaltrace.evaluators.engine._spill import Spill
from evaltrace.evaluators.engine.sample import Run, RunStats, timed_out
from evaltrace.evaluators.engine.time_limit import Limiter, ScorerTimeout, current_limiter, scorer_time_limit
from evaltrace.evaluators.results.report.sample_row import SampleRow
from evaltrace.evaluators.scoring.columns import FORMS, BatchCalls, RowCalls, ask_rows
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.spec.model import Case

if TYPE_CHECKING:
    from evaltrace.collector.runfiles.spans import Span
    from evaltrace.evaluators.engine.scoring import ScoreOptions
    from evaltrace.evaluators.scoring.scorers.prices import TokenCounts

logger = logging.getLogger("evaltrace")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T = TypeVar("T")


class TableFault(Exception):
    """The cached table could not be read: the run is scored again by the per-trace path."""


FORK_MIN_BYTES = 64 * 1024 * 1024
"""Below this much span data a warm re-scoring stays in one process even where a first scoring forks:
the columnar path does a few times less work per trace, so forking pays later (its cost is memory)."""


def applies(router: Router) -> bool:
    """Whether the table path can score this run (cache or not): single-turn cases, every scorer with a form."""
    if not isinstance(router, SpecRouter) or router.has_multi_turn:
        return False
    return all(type(scorer) in FORMS for scorer in router.scorers())


def in_one_process(files: Sequence[Path], size: int, options: ScoreOptions, workers: int, histories: bool) -> bool:
    """Whether a warm re-scoring planned over several workers (their tables cached) should rather run here.

    `size`: the span files' total bytes, as `shards.span_bytes` weighs them for `plan_workers`. Not
    with `--workers` given, nor without the cache (`--no-cache` builds the tables as a first scoring).
    """
    if options.workers is not None or not options.cache or size >= FORK_MIN_BYTES:
        return False
    return all(is_cached(files, histories=histories, shard=Shard(index, workers)) for index in range(workers))


def score_warm(
    files: Sequence[Path],
    router: Router,
    stats: RunStats,
    options: ScoreOptions,
    *,
    workers: int,
    histories: bool,
    finish: Callable[[Spill], T],
) -> T | None:
    """Score the run in this process from its tables' columns when the path applies, then `finish(spill)`; else `None`.

    The tables are those of the planned layout (one, or one per shard of `workers`), read in shard
    order; one not cached yet is scored as it is written. Also `None` when a table cannot be read:
    `router` and `stats` may then hold part of the run, and the caller scores it again from new
    ones, by the per-trace path.
    """
    if not applies(router):
        return None
    shards = [None] if workers == 1 else [Shard(index, workers) for index in range(workers)]
    try:
        with Spill() as spill, scorer_time_limit(options.scorer_timeout), bulk_collections():
            for shard in shards:
                score_shard(files, shard, histories, router, stats, spill, options)
            return finish(spill)
    except TableFault as fault:  # the per-trace path reads the table again, discards it and rebuilds
        logger.info("traces cache unusable for the warm path (%s); scoring trace by trace", fault)
        return None


def score_shard(
    files: Sequence[Path],
    shard: Shard | None,
    histories: bool,
    router: Router,
    stats: RunStats,
    spill: SampleSpill,
    options: ScoreOptions,
    spans: Iterable[list[Span]] | None = None,
) -> None:
    """Score `shard` of `files` from its table (`score_table`): the cached one, or, a first scoring, one built now.

    A table built is written to the cache as its batches go by; one the cache cannot hold, or any
    without `options.cache` (`--no-cache`: the cache neither read nor written), is still scored from
    its batches. `spans`: the shard's spans of each trace, read elsewhere (a Ray Data group's), for
    building its table.

    Raises:
        TableFault: the cached table could not be read, or the table could not be built (a value it
            cannot hold, a span file unreadable: the per-trace path then reports or copes with it).
    """
    batches = table_batches(files, histories=histories, shard=shard) if options.cache else None
    built = batches or built_batches(files, histories=histories, shard=shard, spans=spans, cache=options.cache)
    score_table(built, router, stats, spill, options)


def score_table(
    batches: Iterator[pa.RecordBatch], router: Router, stats: RunStats, spill: SampleSpill, options: ScoreOptions
) -> None:
    """Score one cached table's rows: from the columns where the forms decide, the rest per trace.

    Raises:
        TableFault: the table could not be read.
    """
    assert isinstance(router, SpecRouter)
    rows = _Rows(router, stats, spill, options)
    score_stream_now(iter_table_traces(rows.undecided(_guarded(batches))), router, stats, spill, options)


def _guarded(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except Exception as exc:  # the table's fault: the caller scores the run again without it
            raise TableFault(f"{type(exc).__name__}: {exc}") from exc
        yield batch


class _Tokens:
    """A model call's usage as `call_cost` reads it, from the table's usage struct."""

    __slots__ = _FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens")

    def __init__(self, input_tokens: int | None, output_tokens: int | None, cache_read_tokens: int | None) -> None:
        self.input_tokens, self.output_tokens, self.cache_read_tokens = input_tokens, output_tokens, cache_read_tokens


class _Rows:
    """Decides a batch's rows from their columns; what is left goes on, filtered, to the decoder."""

    def __init__(self, router: SpecRouter, stats: RunStats, spill: SampleSpill, options: ScoreOptions) -> None:
        self._router, self._stats, self._spill, self._options = router, stats, spill, options
        self._seen: set[str] = set()
        self._carried: set[int] = set()
        """The previous batch's last top row, when undecided: its nested rows may go on in this batch."""

    def undecided(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Each batch's rows that belong to an undecided top-level trace (nested rows with it)."""
        for batch in batches:
            calls = _Columns(batch)
            left = self._carried | self.decide(calls)
            last = calls.top_rows[-1] if calls.top_rows else None
            self._carried = {last} if last in left else set()
            if left:
                kept = batch.filter(pc.is_in(batch.column("top_row"), column(sorted(left), pa.int64())))
                if kept.num_rows:
                    yield kept

    def decide(self, calls: _Columns) -> set[int]:
        """Keep the samples the forms decide, the batch's at once; returns the top rows left undecided."""
        router, stats, left = self._router, self._stats, set()
        unique = dict(calls.rows())
        asked: list[tuple[int, Case]] = []
        for index in calls.tops:
            trace_id, text = calls.ids[index], calls.inputs[index]
            matched = router.cases_for(calls.case_ids[index], text)
            if not matched:
                router.add_unmatched(trace_id, text)
            cases = [case for case in matched if case.id in router.selected_ids]
            alone = unique.get(trace_id) == index and trace_id not in self._seen
            self._seen.add(trace_id)
            if cases and alone and len(cases) == 1:
                asked.append((index, cases[0]))
            elif cases:
                left.add(calls.top_rows[index])  # counted by the per-trace path as it reads it
            else:
                stats.traces += 1
        kept = []
        for (index, case), scores in zip(asked, self._scores(calls, asked), strict=True):
            if scores is None:
                left.add(calls.top_rows[index])
            else:
                kept.append((index, case, scores))
        stats.traces += len(kept)
        self._keep(calls, kept)
        if self._options.progress is not None:
            self._options.progress(stats.traces)
        return left

    def _scores(self, calls: _Columns, asked: list[tuple[int, Case]]) -> list[list[Score] | None]:
        """Per asked row (its index, its one case): its case's scores by its scorers' forms; `None` unless all pass.

        Each scorer class's form is asked once for the batch, on the rows of every case it scores, each
        row with its case's scorer object (its configuration); every form is asked, as the per-trace
        path asks each scorer. The answers go by array operations into one flat list, a row's in a run.
        """
        by_case: dict[str, list[int]] = {}  # places in `asked`, by case: a case's rows share its scorers
        for place, (_, case) in enumerate(asked):
            by_case.setdefault(case.id, []).append(place)
        sizes, indexes = np.zeros(len(asked), np.int64), np.asarray([index for index, _ in asked], np.int64)
        for case_id, places in by_case.items():
            sizes[places] = len(self._router.spec.case_scorers[case_id][0])
        starts = np.cumsum(sizes) - sizes  # where each row's scores start in the flat list
        groups: dict[type[Scorer], tuple[list[Scorer], list[int], list[np.ndarray[Any, Any]]]] = {}
        for case_id, places in by_case.items():  # by class: its scorers, their rows, their places in the flat list
            at = np.asarray(places)
            for slot, scorer in enumerate(self._router.spec.case_scorers[case_id][0]):
                of_class, rows, where = groups.setdefault(type(scorer), ([], [], []))
                of_class += [scorer] * len(places)
                rows += indexes[at].tolist()
                where.append(starts[at] + slot)
        flat, missing = np.empty(int(sizes.sum()), object), np.zeros(int(sizes.sum()), np.int64)
        for of_class, rows, where in groups.values():
            answers = _ask(of_class, calls, rows)
            at = np.concatenate(where)
            flat[at], missing[at] = np.fromiter(answers, object, len(answers)), [score is None for score in answers]
        seen, listed = np.concatenate(([0], np.cumsum(missing))), flat.tolist()
        decided = (seen[starts + sizes] == seen[starts]).tolist()
        return [
            listed[start : start + size] if sure else None
            for sure, start, size in zip(decided, starts.tolist(), sizes.tolist(), strict=True)
        ]

    def _keep(self, calls: _Columns, kept: list[tuple[int, Case, list[Score]]]) -> None:
        """Keep the batch's passing rows' samples, made from their columns and scores, at once (`keep_rows`).

        Each sample holds the values a `SampleResult` would (its float fields as floats), made by column:
        `sample_jsons` gives its JSON.
        """
        indices = [index for index, _, _ in kept]
        costs = self._stats.add_runs([calls.run(index) for index in indices])
        found = score_rows([scores for *_, scores in kept])
        statuses = sample_statuses(found)
        ids, used = [calls.ids[index] for index in indices], [calls.usages[index] for index in indices]
        roots, conversations, errors = (calls.column(name) for name in ("root_span_id", "conversation_id", "error"))
        starts = [calls.starts[index] for index in indices]
        columns = (
            ids,
            [[trace_id] for trace_id in ids],
            [[roots[index]] for index in indices],
            [conversations[index] for index in indices],
            statuses,
            [status_passed(status) for status in statuses],
            found,
            [calls.inputs[index] for index in indices],
            [RowCalls(calls, index).final_answer() for index in indices],
            [errors[index] for index in indices],
            [None if start is None else _EPOCH + timedelta(0, 0, start) for start in starts],
            [calls.duration(index) for index in indices],
            [counts["input_tokens"] or 0 for counts in used],
            [counts["output_tokens"] or 0 for counts in used],
            [None if cost is None else float(cost) for cost in costs],
        )
        samples = list(map(SampleRow._make, zip(*columns, strict=True)))
        # Cases decided whole only with this process's own spill: its router's `emit` reads them back (a
        # worker's samples go to its parent's spill, and its state is merged there without them).
        rows = [(case.id, sample) for (_, case, _), sample in zip(kept, samples, strict=True)]
        self._router.keep_rows(self._spill, rows, whole=isinstance(self._spill, Spill))


def _ask(scorers: list[Scorer], calls: BatchCalls, rows: list[int]) -> list[Score | None]:
    """One class's form on `rows` at once (`ask_rows`), under the run's time limit as the per-trace path asks it.

    The limit holds for the batch's rows together; past it, each row is asked again under it alone,
    so a row its form cannot settle in time gets that path's result, a time-out.
    """
    limiter = current_limiter()
    if limiter is None:
        return ask_rows(scorers, calls, rows)
    try:
        return limiter.call(lambda: ask_rows(scorers, calls, rows))
    except ScorerTimeout:
        return [_limited(limiter, scorer, calls, index) for scorer, index in zip(scorers, rows, strict=True)]


def _limited(limiter: Limiter, scorer: Scorer, calls: BatchCalls, index: int) -> Score | None:
    try:
        return limiter.call(lambda: ask_rows([scorer], calls, [index])[0])
    except ScorerTimeout:
        return timed_out(scorer, limiter.seconds)


class _Columns(BatchCalls):
    """A batch's columns the samples are made of, converted once per batch."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        super().__init__(batch)
        self.ids: list[str] = batch.column("trace_id").to_pylist()
        self.case_ids: list[str | None] = batch.column("case_id").to_pylist()
        self.inputs: list[str | None] = batch.column("input").to_pylist()
        self.top_rows: list[int] = batch.column("top_row").to_pylist()
        self.usages: list[dict[str, int | None]] = batch.column("usage").to_pylist()
        self.starts: list[int | None] = batch.column("start_time").cast(pa.int64()).to_pylist()
        self.ends: list[int | None] = batch.column("end_time").cast(pa.int64()).to_pylist()
        tops = pc.is_null(batch.column("parent_row")).to_pylist()
        self.tops = [index for index, top in enumerate(tops) if top]

    def duration(self, index: int) -> float | None:
        """Row `index`'s run time in seconds (`None`: its start or end not recorded)."""
        start, end = self.starts[index], self.ends[index]
        return None if start is None or end is None else (end - start) / 1_000_000

    def run(self, index: int) -> Run:
        """Row `index`'s run as `RunStats` counts it: duration, tokens, and its model calls' models and usages."""
        first, last = self.iteration_bounds(index)
        used = self.usages[index]
        return self.duration(index), used["input_tokens"], used["output_tokens"], self._calls[first:last]

    @cached_property
    def _calls(self) -> list[tuple[str | None, TokenCounts]]:
        """Every model call of the batch, flat: its model and its usage's counts, converted once per batch."""
        usage = pc.struct_field(self._batch.column("iterations").values, "usage")  # as `iteration_field` reads it
        counts = (pc.struct_field(usage, name).to_pylist() for name in _Tokens._FIELDS)
        return list(zip(cast("list[str | None]", self.iteration_field("model")), map(_Tokens, *counts), strict=True))
