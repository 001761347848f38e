"""The Ray engine's entries stage: samples shuffled by case, whole entries written by the tasks, tallies to the driver.

A run with a spec goes one stage past `ray_data.py`'s groups (with multi-turn cases, two: the
conversations are scored whole in between, `ray_conversations.py`):

1. Each group scores its traces as there (`ray_data.group_result`) but returns its samples as
   rows keyed by their case's partition (`sample_rows`): one row per sample (its parked
   record), one per case it saw (its `CaseTally`, pickled), one per conversation it holds (its
   traces, keyed by the conversation) and one hand-over (what its router still holds without
   those, and its run statistics).
2. Ray's shuffle groups those rows by partition. A partition is a run of consecutive cases in
   the spec's order (`span`), so each task holds whole entries and its share of the report is
   contiguous. The task (`write_entries`) merges each case's tallies, decides the case as the
   local engine does (`SpecRouter.hand_over`), puts the samples in report order, writes its
   share of the scores table as one Parquet part of the store (`StoreParts`, named by
   partition: the parts in name order are the local run's rows in order), writes its entries'
   JSON to a file of the run's entries folder (`write_json`: beside the store's parts, else a
   temporary folder the driver made; a node that does not see that folder returns the file's
   bytes instead, and a store it does not see stops the run) and returns per case only its
   outcome: status, pass rate, and for a failed or missing entry the JSON of its head, which the
   summary lists.
3. The driver (`finish_entries`) merges the hand-overs, adds the outcomes up for the gate and
   the summary, feeds the entries to the report writers in order, read from the partitions'
   files one entry at a time (the JSON writer copies the bytes; the store writer only counts
   them: its rows are in the parts) and writes the header. It parks no sample and decides no case.

Cases no sample reached whose partition got no row at all are decided by the driver, from empty
tallies, with the same function (`decide_span`).
"""

from __future__ import annotations

import dataclasses
import shutil
import zlib
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from evaltrace.collector.errors import InputError
from evaltrace.collector.gc_policy import collections_paused
from evaltrace.collector.runfiles.shard import Shard
from evaltrace.evaluators.engine._aggregate import CaseTally
from evaltrace.evaluators.engine._routers import RouterState, SpecRouter, Totals
from evaltrace.evaluators.engine.ray_coordinator import results
from evaltrace.evaluators.engine.ray_data import (
    RunParts,
    ShardResult,
    files_dataset,
    group_result,
    grouped_by,
    result_row,
    score_shard,
    scored_groups,
    shards_dataset,
)
from evaltrace.evaluators.engine.ray_sorted import JSON, EntryTarget, entry_target, read_json, write_json
from evaltrace.evaluators.engine.sample import RunStats
from evaltrace.evaluators.results.report.model import EntryResult, EntryStatus
from evaltrace.evaluators.results.report.writer import EntrySink, Parked, ReportEntry
from evaltrace.evaluators.results.store.rows import ScorerIndex, ScoreRows
from evaltrace.evaluators.results.store.writer import StoreParts, store_writer

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoredRun, ScoreOptions
    from evaltrace.evaluators.scoring.spec.loader import LoadedSpec

PART, KIND, CASE, START, TRACE, BLOB = "_part", "_kind", "_case", "_start", "_trace", "_blob"
SAMPLE, TALLY, HANDOVER, TURNS = 0, 1, 2, 3
SAMPLES_SCHEMA = pa.schema(
    [
        pa.field(PART, pa.int32()),
        pa.field(KIND, pa.int8()),
        pa.field(CASE, pa.string()),
        pa.field(START, pa.timestamp("us", tz="UTC")),
        pa.field(TRACE, pa.string()),
        pa.field(BLOB, pa.binary()),
    ]
)
"""The rows the groups hand on, by partition: samples, case tallies, held conversations and hand-overs."""
_LISTED = frozenset({"failed", "missing"})
_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)


class Outcome(NamedTuple):
    """A decided entry as the driver needs it: what the gate and the summary count (its JSON is in a file)."""

    status: EntryStatus
    pass_rate: float | None
    head: bytes | None
    """Its JSON up to its samples, for the summary's failure list (failed and missing entries only)."""
    samples: int


@dataclasses.dataclass
class Entries:
    """What one task of the entries stage returns: tallies, outcomes, the hand-overs it passed on."""

    outcomes: dict[int, Outcome]
    """By the case's position in the spec's selection (its entry index)."""
    rows: int
    errors: int
    """Rows written to the store's part, and of them scorer errors."""
    handovers: list[tuple[int, ShardResult]] = dataclasses.field(default_factory=list)
    file: bytes | None = None
    """Its entries' JSON file, where its node did not see the run's entries folder: the driver writes it."""
    unseen: str | None = None
    """The address of a node that did not see the store's folder: no part written, the run stops."""


def span(part: int, parts: int, cases: int) -> range:
    """The positions of the cases partition `part` of `parts` holds: consecutive, so its report share is one piece."""
    return range(-(-part * cases // parts), -(-(part + 1) * cases // parts))


class EntryStage:
    """A run's entries stage seen from the driver: its target, and the tasks' results as they come.

    `with` it: leaving removes the run's entries folder (the report has been written from it).
    """

    def __init__(self, router: SpecRouter, sink: EntrySink | None, options: ScoreOptions) -> None:
        self.router, self.sink, self.options = router, sink, options
        self.target = EntryTarget(1, None)
        self.tasks: dict[int, Entries] = {}

    def start(self, count: int) -> EntryTarget:
        """The target for a run of `count` groups (the store's parts folder and the entries folder are made here)."""
        self.target = entry_target(self.router, count, self.sink, self.options)
        return self.target

    def add(self, part: int, entries: Entries) -> None:
        """Keep a task's result, its entries' JSON written to the entries folder if the task returned it.

        Raises:
            InputError: the task's node did not see the score store's folder.
        """
        store = store_writer(self.sink)
        if entries.unseen is not None and store is not None:
            raise InputError(
                f"{store.folder}: Ray node {entries.unseen} does not see the score store's folder; with "
                "--engine ray every node must write the store at the same path (a shared filesystem), or use --no-store"
            )
        if entries.file is not None and self.target.json is not None:
            self.target.json.keep(JSON.format(part), [entries.file])
            entries.file = None
        self.tasks[part] = entries

    def __enter__(self) -> EntryStage:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.target.json is not None:
            shutil.rmtree(self.target.json.path, ignore_errors=True)


def score_entries(parts: RunParts, count: int, received: EntryStage, *, by_shard: bool = False) -> None:
    """Score `parts.locations` in `count` groups (read and shuffled, or `by_shard`), then their samples by case."""
    for part, entries in results(entries_pipeline, parts, count, by_shard):
        received.add(part, entries)


def entries_pipeline(parts: RunParts, count: int, by_shard: bool) -> Any:
    """The stage's dataset, built in the coordinator task (`ray_coordinator.results`): groups, then partitions.

    `by_shard`: each shard's task reads every file, or its cached traces table (`ray_data.score_shard`).
    """
    files, blob = files_dataset(parts)
    if by_shard:
        samples = shards_dataset(count, blob, parts.retries, shard_samples)
    else:
        samples = scored_groups(files, count, blob, parts.retries, group_samples)
    if isinstance(parts.router, SpecRouter) and parts.router.has_multi_turn:
        from evaltrace.evaluators.engine.ray_conversations import score_conversations  # builds on this module

        samples = grouped_by(samples, PART, score_conversations, blob, parts.retries)
    return grouped_by(samples, PART, write_entries, blob, parts.retries)


def shard_samples(items: pa.Table, parts_blob: bytes) -> pa.Table:
    """Stage 1 by shard: one shard of every file (or its cached table) scored, its samples handed on by case."""
    import ray

    parts: RunParts = ray.cloudpickle.loads(parts_blob)
    index: int = items.column("shard")[0].as_py()
    files = [Path(location) for location in parts.locations]
    shard = Shard(index, parts.count)
    result = score_shard(files, shard, parts.histories, parts.router, parts.stats, parts.options)
    return sample_rows(index, result, parts)


def group_samples(rows: pa.Table, parts_blob: bytes) -> pa.Table:
    """Stage 1 in this mode: one group of spans scored, its samples handed on by case partition."""
    import ray

    parts: RunParts = ray.cloudpickle.loads(parts_blob)
    return sample_rows(*group_result(rows, parts), parts)


def sample_rows(key: int, result: ShardResult, parts: RunParts) -> pa.Table:
    """`result`'s samples and tallies as rows keyed by their case's partition, and its hand-over."""
    import ray

    assert parts.entries is not None and isinstance(parts.router, SpecRouter)
    count, cases = parts.entries.parts, parts.router.selected
    where = {case.id: position * count // len(cases) for position, case in enumerate(cases)}
    columns: list[list[Any]] = [[], [], [], [], [], []]

    def add(*row: Any) -> None:
        for values, value in zip(columns, row, strict=True):
            values.append(value)

    for group, start, trace_id, record, _ in result.rows:
        add(where[group], SAMPLE, group, start, trace_id, record)
    if result.router is not None:
        for case_id, tally in result.router.tallies.items():
            add(where[case_id], TALLY, case_id, None, None, ray.cloudpickle.dumps(tally))
        for held, traces in result.router.conversations.items():  # a stable hash: every group's turns meet
            add(zlib.crc32(held.encode()) % count, TURNS, held, None, None, ray.cloudpickle.dumps(traces))
        result.router.tallies, result.router.decided, result.router.conversations = {}, {}, {}
    add(key % count, HANDOVER, None, None, None, ray.cloudpickle.dumps((key, dataclasses.replace(result, rows=[]))))
    arrays = [pa.array(values, field.type) for values, field in zip(columns, SAMPLES_SCHEMA, strict=True)]
    return pa.Table.from_arrays(arrays, schema=SAMPLES_SCHEMA)


def write_entries(rows: pa.Table, parts_blob: bytes) -> pa.Table:
    """Stage 2: one partition's whole cases decided, their store part written; returns `Entries`."""
    import ray

    parts: RunParts = ray.cloudpickle.loads(parts_blob)
    assert parts.entries is not None and isinstance(parts.router, SpecRouter)
    part: int = rows.column(PART)[0].as_py()
    kinds = rows.column(KIND)
    handovers = [ray.cloudpickle.loads(blob) for blob in _blobs(rows, kinds, HANDOVER)]
    if any(result.input_error is not None for _, result in handovers):
        return result_row(part, Entries({}, 0, 0, handovers))
    tallies: dict[str, CaseTally] = {}
    tallied = rows.filter(pc.equal(kinds, TALLY))
    for case_id, blob in zip(tallied.column(CASE).to_pylist(), _blobs(rows, kinds, TALLY), strict=True):
        tally = ray.cloudpickle.loads(blob)
        if case_id in tallies:
            tallies[case_id].merge(tally)
        else:
            tallies[case_id] = tally
    cases = parts.router.selected
    entries = decide_span(parts.router, tallies, _samples(rows, kinds), span(part, parts.entries.parts, len(cases)))
    return result_row(part, entries.written(parts.entries, part, parts.router, handovers))


def _blobs(rows: pa.Table, kinds: pa.ChunkedArray, kind: int) -> list[bytes]:
    return rows.filter(pc.equal(kinds, kind)).column(BLOB).to_pylist()  # type: ignore[no-any-return]


def _samples(rows: pa.Table, kinds: pa.ChunkedArray) -> dict[str, list[bytes]]:
    """Each case's sample records in report order: start time (none: last), then trace id, then as they came."""
    samples = rows.filter(pc.equal(kinds, SAMPLE))
    keyed = zip(
        samples.column(CASE).to_pylist(),
        samples.column(START).to_pylist(),
        samples.column(TRACE).to_pylist(),
        range(samples.num_rows),
        strict=True,
    )
    order = sorted((case, start or _FAR_FUTURE, trace or "", index) for case, start, trace, index in keyed)
    blobs = samples.column(BLOB)
    grouped: dict[str, list[bytes]] = {}
    for case, _, _, index in order:
        grouped.setdefault(case, []).append(blobs[index].as_py())
    return grouped


class Decided:
    """A span of cases decided: their outcomes, and the entries to write to the store."""

    def __init__(self) -> None:
        self.outcomes: dict[int, Outcome] = {}
        self.entries: list[tuple[int, ReportEntry]] = []

    def written(
        self, target: EntryTarget, part: int, router: SpecRouter, handovers: list[tuple[int, ShardResult]]
    ) -> Entries:
        """The entries of partition `part` written to `target` (store part, JSON): what the driver gets.

        A node that does not see the entries folder returns the JSON file's bytes (`Entries.file`);
        the store's parts beside it it does not see either: it writes none and names itself.
        """
        if target.json is not None and target.store is not None and not target.json.seen():
            import ray

            return Entries({}, 0, 0, handovers, unseen=ray.util.get_node_ip_address())
        file = None
        if target.json is not None:
            file = write_json(target.json, part, (entry.json_bytes() for _, entry in self.entries))
        rows = self.write(target.store, part, router) if target.store is not None else (0, 0)
        return Entries(self.outcomes, *rows, handovers, file=file)

    def write(self, store: StoreParts, part: int, router: SpecRouter) -> tuple[int, int]:
        """Write the entries' rows as the store part of `part`; returns its rows and scorer errors."""
        rows = ScoreRows(store.run, ScorerIndex(router.spec))
        batches = []
        for index, entry in self.entries:
            batches.extend(rows.add_report_entry(index, entry))
        last = rows.flush()
        store.write(f"part-{part:05d}.parquet", [*batches, last] if last is not None else batches)
        return rows.total, rows.errors


def decide_span(
    router: SpecRouter, tallies: dict[str, CaseTally], samples: dict[str, list[bytes]], cases: range
) -> Decided:
    """Decide the cases at positions `cases` from their merged `tallies` (none: no sample) as a local run does."""
    selected = [router.selected[index] for index in cases]
    held, router.state = router.state, RouterState()
    try:
        for case in selected:
            router.state.tallies[case.id] = tallies.get(case.id) or CaseTally.for_policy(
                router.spec.spec.repeat_for(case)
            )
        decided = router.hand_over().decided
    finally:
        router.state = held
    done = Decided()
    for index, case in zip(cases, selected, strict=True):
        fields, head = decided[case.id]
        records = samples.get(case.id, [])
        entry = ReportEntry.decided(head, fields, partial(Parked.of, records))
        listed = head if fields.status in _LISTED else None
        done.outcomes[index] = Outcome(fields.status, fields.pass_rate, listed, len(records))
        done.entries.append((index, entry))
    return done


def finish_entries(
    stage: EntryStage, stats: RunStats, spec: LoadedSpec | None, judge: dict[str, Any] | None
) -> ScoredRun:
    """The driver's part: hand-overs merged, outcomes counted, entries fed to the writers in order, the header.

    Raises:
        InputError: a group met bad input.
    """
    from evaltrace.evaluators.engine.scoring import ScoredRun, _build_report

    router, options, sink = stage.router, stage.options, stage.sink
    handovers = sorted((item for task in stage.tasks.values() for item in task.handovers), key=lambda item: item[0])
    for _, result in handovers:
        if result.input_error is not None:
            raise InputError(result.input_error)
    for _, result in handovers:
        assert result.router is not None and result.stats is not None
        router.state.merge(result.router)
        stats.merge(result.stats)
    if options.progress is not None:
        options.progress(stats.traces)
    outcomes = _all_outcomes(router, stage.tasks, stage.target, sink)
    totals = Totals()
    with collections_paused(settle=True):
        for part in range(stage.target.parts):
            _feed(stage, part, outcomes, totals)
        report = _build_report(router, totals, stats, spec, options, judge)
    return ScoredRun(report=report, digest=totals.digest)


def _feed(stage: EntryStage, part: int, outcomes: dict[int, Outcome], totals: Totals) -> None:
    """Partition `part`'s entries counted, and given to the writers as read from its file."""
    target, sink = stage.target, stage.sink
    entries = read_json(target.json.path, part) if target.json is not None else None
    for index in span(part, target.parts, len(stage.router.selected)):
        outcome = outcomes[index]
        totals.add(outcome.status, outcome.pass_rate)
        if outcome.head is not None and totals.digest.full:
            totals.digest.add_omitted()
        elif outcome.head is not None:
            totals.digest.add(EntryResult.model_validate_json(outcome.head + b"]}"), outcome.samples)
        if sink is not None and entries is not None:
            sink.add(ReportEntry.from_json(next(entries)))


def _all_outcomes(
    router: SpecRouter, tasks: dict[int, Entries], target: EntryTarget, sink: EntrySink | None
) -> dict[int, Outcome]:
    """Every case's outcome: the tasks', and the driver's own for partitions no row reached (cases without samples)."""
    outcomes: dict[int, Outcome] = {}
    rows = errors = 0
    for part in range(target.parts):
        task = tasks.get(part)
        if task is None:
            decided = decide_span(router, {}, {}, span(part, target.parts, len(router.selected)))
            task = decided.written(target, part, router, [])
        outcomes.update(task.outcomes)
        rows, errors = rows + task.rows, errors + task.errors
    store = store_writer(sink)
    if target.store is not None and store is not None:
        store.parts_written(rows, errors)
    return outcomes
