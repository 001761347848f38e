"""The Ray engine's data path: Ray Data reads the span rows, shuffles them by trace, and each group is scored.

1. Read. `ray.data.from_items` holds one item per span file (a local path, or a URI any pyarrow
   filesystem opens); a map task reads each file with evaltrace's own reader
   (`runfiles.iter_batches`), so schema checks, and the one-line errors naming the file, are
   exactly those of a local run. `read_parquet` is not used: it checks no evaltrace schema and
   its errors name no file the way the CLI reports them. Each row gets its shard key
   (`shard.shard_keys` on the trace id, the shards of `Shard`), its file's index and its row
   number in the file. Rows stay Arrow: nothing is decoded before the shuffle.
2. Shuffle. `groupby(key).map_groups(...)`, Ray's own shuffle (sort-based, pull: plain tasks,
   which Ray re-runs when a node dies, where the hash shuffle keeps state in actors): each group
   holds every span of its traces, whichever files they were spread over.
3. Score. A group's task puts its rows back in file and row order, rebuilds the traces with the
   converter the file reader uses (`rebuild.convert_span_rows`: same decoding, deduplication on
   (trace id, span id) with the first copy in file order winning, same span order) and scores
   them with a fresh copy of the router, as `score_shard` does; it returns one row,
   its `ShardResult` pickled. The driver gathers those as the tasks end (see `ray_engine`).

Bad input met while reading (a damaged page) travels as a row of its own with the message and
reaches the driver through group 0; bad input met while decoding is the group's `input_error`.
Runs holding log-record files are not read this way (their records attach to spans as they are
read, file by file): `ray_engine` scores those with per-shard tasks that read every file.

The traces cache: with the cache on and local files, each group writes its shard's traces table
on the way (`cache.built_batches` over the group's spans, the key `cached_traces` gives that shard of
those files), its rows decided from the columns where the forms can, as a local first scoring's
(`columnar_entries`).
Re-scoring the same files with as many shards then finds every table, and `ray_engine` scores
the shards from them without reading or shuffling a span (warm: measured in
`benchmarks/RESULTS.md`, "Issue 20").
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles.layout import SCHEMA
from evaltrace.collector.runfiles.reader import SPAN_COLUMNS
from evaltrace.collector.runfiles.runfiles import Location, iter_batches
from evaltrace.collector.runfiles.shard import Shard, shard_keys
from evaltrace.collector.traces.cache import cache_rebuilt, traces_of
from evaltrace.evaluators.engine import columnar_entries
from evaltrace.evaluators.engine._loop import Router
from evaltrace.evaluators.engine._routers import RouterState, TraceRouter
from evaltrace.evaluators.engine.columnar_entries import TableFault, applies
from evaltrace.evaluators.engine.ray_judges import score_in_task
from evaltrace.evaluators.engine.ray_sorted import EntryTarget, write_sorted
from evaltrace.evaluators.engine.sample import RunStats
from evaltrace.evaluators.engine.time_limit import scorer_time_limit

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoreOptions

logger = logging.getLogger("evaltrace")

# One parked sample as `Spill.add_rows` takes it: group, start, trace id, JSON, tag.
_Row = tuple[str, datetime | None, str | None, bytes, int]


@dataclasses.dataclass
class ShardResult:
    """What one task returns: its samples, or the bad input it met, and its router's hand-over."""

    rows: list[_Row]
    router: RouterState | None
    stats: RunStats | None
    input_error: str | None = None
    file: bytes | None = None
    """Its entries' file (without a spec), where its node did not see the run's entries folder: the driver writes it."""


class ListSpill:
    """A task's stand-in for the driver's `Spill`: rows kept in a list returned with the task."""

    def __init__(self) -> None:
        self.rows: list[_Row] = []

    def add_rows(self, rows: Iterable[_Row]) -> None:
        """Keep scored samples, as `Spill.add_rows` parks them."""
        self.rows += rows


KEY, FILE, ROW, ERROR, RESULT = "_shard", "_file", "_row", "_error", "_result"
ROWS_SCHEMA = pa.schema(
    [
        *(SCHEMA.field(name).with_nullable(True) for name in SPAN_COLUMNS),
        pa.field(KEY, pa.int32()),
        pa.field(FILE, pa.int32()),
        pa.field(ROW, pa.int64()),
        pa.field(ERROR, pa.string()),
    ]
)
"""The shuffled rows: the span columns decoding needs, the shard key, where the row was read, bad input."""
_RESULTS_SCHEMA = pa.schema([pa.field(KEY, pa.int32()), pa.field(RESULT, pa.binary())])


@dataclasses.dataclass(frozen=True)
class RunParts:
    """What every task needs, pickled once by the driver and unpickled afresh in each task."""

    locations: list[Location]
    count: int
    histories: bool
    router: Router
    stats: RunStats
    options: ScoreOptions
    retries: int
    """Times Ray re-runs a task whose worker process or node died (`RaySettings.max_restarts`)."""
    entries: EntryTarget | None = None
    """Set: the groups' samples go on to the entries stage (`ray_entries.py`), or without a spec their
    entries to the entries folder (`ray_sorted.py`), instead of the driver."""


def read_file(items: pa.Table, count: int) -> Iterator[pa.Table]:
    """The read stage: the rows of each file in `items` (columns `file`, `location`), keyed by shard."""
    for index, location in zip(items.column("file").to_pylist(), items.column("location").to_pylist(), strict=True):
        first = 0
        try:
            for batch in iter_batches(location, SPAN_COLUMNS):
                yield _keyed(batch, count, index, first)
                first += batch.num_rows
        except InputError as exc:
            yield _error_row(str(exc), index)


def _keyed(batch: pa.RecordBatch, count: int, file: int, first: int) -> pa.Table:
    extra = [
        shard_keys(batch.column("trace_id"), count),
        pa.array([file] * batch.num_rows, pa.int32()),
        pa.array(range(first, first + batch.num_rows), pa.int64()),
        pa.nulls(batch.num_rows, pa.string()),
    ]
    return pa.Table.from_arrays([*batch.columns, *extra], schema=ROWS_SCHEMA)


def _error_row(message: str, file: int) -> pa.Table:
    values: dict[str, Any] = {KEY: 0, FILE: file, ROW: 0, ERROR: message}
    arrays = [pa.array([values.get(field.name)], field.type) for field in ROWS_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=ROWS_SCHEMA)


def score_group(rows: pa.Table, parts_blob: bytes) -> pa.Table:
    """The scoring stage: one group of the shuffle (every span of its traces) scored into a `ShardResult`."""
    import ray

    return result_row(*group_result(rows, ray.cloudpickle.loads(parts_blob)))


def group_result(rows: pa.Table, parts: RunParts) -> tuple[int, ShardResult]:
    """One group's key and `ShardResult`: its traces scored, or the first bad input read (in file order)."""
    key: int = rows.column(KEY)[0].as_py()
    errors = rows.filter(pc.is_valid(rows.column(ERROR)))
    if errors.num_rows:
        first = errors.sort_by([(FILE, "ascending")]).column(ERROR)[0].as_py()
        return key, ShardResult(rows=[], router=None, stats=None, input_error=first)
    return key, _score_rows(rows, key, parts)


def _score_rows(rows: pa.Table, key: int, parts: RunParts) -> ShardResult:
    spill = ListSpill()
    quiet = dataclasses.replace(parts.options, progress=None)
    try:
        with scorer_time_limit(parts.options.scorer_timeout):
            _score_traces(rows, key, parts, spill, quiet)
    except InputError as exc:
        return ShardResult(rows=[], router=None, stats=None, input_error=str(exc))
    file = None
    if parts.entries is not None and parts.entries.json is not None and isinstance(parts.router, TraceRouter):
        file = write_sorted(parts.entries.json, key, spill.rows)  # without a spec: the entries to the driver's folder
        spill.rows = []
    # The entries stage decides the cases from the merged tallies: no decision here.
    return ShardResult(rows=spill.rows, router=parts.router.state, stats=parts.stats, file=file)


def _score_traces(rows: pa.Table, key: int, parts: RunParts, spill: ListSpill, options: ScoreOptions) -> None:
    """Score the group's traces, rebuilt; with the cache on, its shard's traces table written on the way.

    As a local first scoring, the group's table is built from its spans and its rows decided from
    the columns where the forms can (`columnar_entries.score_shard`). A re-scoring of the same local
    files then finds every shard's table and skips Ray Data altogether (`ray_engine`), as a local
    run skips the rebuild.
    """
    from evaltrace.collector.runfiles.reader import span_groups_of_rows
    from evaltrace.collector.traces.rebuild import convert_span_rows

    located = rows_by_file(rows, parts.locations)
    paths = [location for location in parts.locations if isinstance(location, Path)]
    router, stats, shard = parts.router, parts.stats, Shard(key, parts.count)
    cache = options.cache and len(paths) == len(parts.locations)
    if cache and applies(router):
        fresh = copy.deepcopy((router.state, stats))
        try:
            spans = span_groups_of_rows(located)
            columnar_entries.score_shard(paths, shard, parts.histories, router, stats, spill, options, spans)
            return
        except TableFault as fault:  # bad input is the group's; a table that cannot be built: scored per trace
            if isinstance(fault.__cause__, InputError):
                raise fault.__cause__ from None
            logger.info("traces table not built for the columnar forms (%s); scoring trace by trace", fault)
            spill.rows.clear()
            router.state, state = fresh
            vars(stats).update(vars(state))
    traces = convert_span_rows(located, histories=parts.histories)
    if cache:
        traces = cache_rebuilt(paths, traces, histories=parts.histories, shard=shard)
    score_in_task(traces, router, stats, spill, options)


def score_task(
    files: Sequence[Path], shard: Shard, histories: bool, router: Router, stats: RunStats, options: ScoreOptions
) -> tuple[ListSpill, Router, RunStats]:
    """`shard` of `files` scored (`score_shard`): its samples, and the router and stats holding the rest."""
    spill = ListSpill()
    if applies(router):
        # Only the router's state changes while it scores: copying the whole router would copy the
        # spec's cases too (2 s of CPU a task for a 10,000-case spec, against 0.3 ms for the state).
        fresh = copy.deepcopy((router.state, stats))
        try:
            columnar_entries.score_shard(files, shard, histories, router, stats, spill, options)
            return spill, router, stats
        except TableFault as fault:  # as a local run: scored again per trace, the table discarded and rebuilt
            logger.info("traces cache unusable for the warm path (%s); scoring trace by trace", fault)
            spill, (router.state, stats) = ListSpill(), fresh
    traces = traces_of(files, shard, histories=histories, cache=options.cache)
    score_in_task(traces, router, stats, spill, options)
    return spill, router, stats


def score_shard(
    files: Sequence[Path],
    shard: Shard,
    histories: bool,
    router: Router,
    stats: RunStats,
    options: ScoreOptions,
) -> ShardResult:
    """Score the traces of `shard` of `files` with `router` (a fresh copy): the body of one Ray task.

    As a local worker does, the task decides the rows of the shard's traces table (read from the
    cache, or written on the way) from their columns when every scorer has a form
    (`columnar_entries.score_shard`); the rest, and every other run, go per trace.
    """
    quiet = dataclasses.replace(options, progress=None)
    try:
        with scorer_time_limit(options.scorer_timeout):
            spill, router, stats = score_task(files, shard, histories, router, stats, quiet)
    except InputError as exc:
        return ShardResult(rows=[], router=None, stats=None, input_error=str(exc))
    # Its cases are left undecided: the entries stage decides them from every shard's tallies.
    return ShardResult(rows=spill.rows, router=router.state, stats=stats)


def rows_by_file(rows: pa.Table, locations: Sequence[Location]) -> list[tuple[Location, list[pa.RecordBatch]]]:
    """The group's rows back in file and row order (the shuffle keeps neither), split by file."""
    ordered = rows.sort_by([(FILE, "ascending"), (ROW, "ascending")]).combine_chunks()
    files = ordered.column(FILE).to_pylist()
    parts: list[tuple[Location, list[pa.RecordBatch]]] = []
    start = 0
    while start < len(files):
        end = _run_end(files, start)
        part = ordered.slice(start, end - start).select(list(SPAN_COLUMNS))
        parts.append((locations[files[start]], part.to_batches(max_chunksize=16_384)))
        start = end
    return parts


def _run_end(values: list[int], start: int) -> int:
    """The end of the run of equal values starting at `start` (values are sorted)."""
    import bisect

    return bisect.bisect_right(values, values[start], lo=start)


def files_dataset(parts: RunParts) -> tuple[Any, bytes]:
    """The dataset of the run's span files (one item each: `file`, `location`), and `parts` pickled for the tasks."""
    import ray
    import ray.data

    quiet_ray_data(ray.data.DataContext.get_current())
    items = [{"file": index, "location": str(location)} for index, location in enumerate(parts.locations)]
    return ray.data.from_items(items, override_num_blocks=max(1, len(items))), ray.cloudpickle.dumps(parts)


def result_row(key: int, result: object) -> pa.Table:
    """A stage's one output row: `key` and `result` pickled (what `results` reads)."""
    import ray

    return pa.Table.from_arrays(
        [pa.array([key], pa.int32()), pa.array([ray.cloudpickle.dumps(result)])], schema=_RESULTS_SCHEMA
    )


def scored_groups(
    files: Any, count: int, blob: bytes, retries: int, stage: Callable[..., pa.Table] = score_group
) -> Any:
    """The pipeline over the dataset of `files`: read, shuffle by shard key, score each group (`stage`)."""
    return _map_groups(shuffled(files, count, retries), stage, blob, retries)


def shards_dataset(count: int, blob: bytes, retries: int, stage: Callable[..., pa.Table]) -> Any:
    """`count` shards (items `shard`), each given to `stage` (with `blob`) in a task of its own."""
    import ray.data

    shards = ray.data.from_items([{"shard": index} for index in range(count)], override_num_blocks=count)
    with warnings.catch_warnings(action="ignore", category=DeprecationWarning):  # see `shuffled`
        return shards.map_batches(
            stage, batch_size=1, batch_format="pyarrow", fn_kwargs={"parts_blob": blob}, max_retries=retries
        )


def grouped_by(dataset: Any, key: str, stage: Callable[..., pa.Table], blob: bytes, retries: int) -> Any:
    """`dataset` grouped by `key` and each group given to `stage` (with `blob`): one more shuffle and map."""
    with warnings.catch_warnings(action="ignore", category=DeprecationWarning):  # see `shuffled`
        return _map_groups(dataset.groupby(key), stage, blob, retries)


def _map_groups(grouped: Any, stage: Callable[..., pa.Table], blob: bytes, retries: int) -> Any:
    with warnings.catch_warnings(action="ignore", category=DeprecationWarning):  # see `shuffled`
        return grouped.map_groups(stage, batch_format="pyarrow", fn_kwargs={"parts_blob": blob}, max_retries=retries)


def shuffled(files: Any, count: int, retries: int) -> Any:
    """The span rows of `files` (a dataset of `file`, `location` items) grouped by shard key (`GroupedData`).

    Each task is re-run at most `retries` times, where Ray Data retries forever: a scorer that kills
    its worker each time fails the run. Ray 2.60 deprecates task options given this way (none has a
    name of its own yet): the warning is not shown.
    """
    with warnings.catch_warnings(action="ignore", category=DeprecationWarning):
        rows = files.map_batches(
            read_file, batch_size=1, batch_format="pyarrow", fn_kwargs={"count": count}, max_retries=retries
        )
        return rows.groupby(KEY)


def quiet_ray_data(context: Any) -> None:
    """No progress bars or statistics on the terminal (evaltrace shows its own progress), a task shuffle."""
    from ray.data.context import ShuffleStrategy

    # Before the switches below, which warn; a failed task is logged with its traceback, raised here as one line.
    logging.getLogger("ray.data").setLevel(logging.CRITICAL)
    context.enable_progress_bars = False
    context.enable_operator_progress_bars = False
    context.enable_auto_log_stats = False
    context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED
