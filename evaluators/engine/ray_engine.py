"""Scoring one run on a Ray cluster: shards of the traces scored as Ray tasks, the report made here.

The Ray engine is the sharded engine (`shards.py`) with Ray in place of forked processes. The
driver resolves the span files (local paths, or URIs a pyarrow filesystem opens) and builds the
run's router once. Ray Data reads the files and shuffles the span rows by shard key, so every
trace's spans meet in one group, whose task rebuilds and scores its traces (`ray_data.py`). A warm
re-scoring (every shard's traces table cached: no read, no shuffle, no rebuild) and a run with
log-record files (attached to spans as each file is read) take per-shard tasks that each read
every file instead (`_score_by_shards`). A task returns what its copy of the router still holds
and its run statistics; with a spec its samples go on to the entries stage (`ray_entries.py`, its
conversations scored whole on the way: `ray_conversations.py`); without a spec its entries go to
the driver's entries folder (`ray_sorted.py`). The driver merges the hand-overs and computes the
gate and the report as a local run: the entries are the same, entry for entry.

A task returns its whole shard at once rather than streaming it, so a task that Ray re-runs (its
worker or node died; Ray retries it, up to `EVALTRACE_RAY_MAX_RESTARTS` times) cannot deliver a
sample twice. Scorer crashes are error results inside the task, as locally; bad input is returned
as a message and raised here as `InputError`. Judges ask a pool of actors (`ray_judges.py`).

What is shipped to workers: the span file paths or URIs (each node must read them at the same
path: a shared or network filesystem, or an object store), the router (the spec's selected
cases and their scorers, pickled by Ray), the score options. The workers import evaltrace and any
plugin scorer's module themselves: installed on every node, or given by the cluster's `runtime_env`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import logging
import os
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles.reader import Shard
from evaltrace.collector.runfiles.runfiles import Location
from evaltrace.collector.settings import RaySettings
from evaltrace.evaluators.engine._loop import Router
from evaltrace.evaluators.engine._routers import SpecRouter
from evaltrace.evaluators.engine._spill import Spill
from evaltrace.evaluators.engine.ray_coordinator import score_groups
from evaltrace.evaluators.engine.ray_data import RunParts, ShardResult, score_shard
from evaltrace.evaluators.engine.ray_entries import EntryStage, finish_entries, score_entries
from evaltrace.evaluators.engine.ray_judges import judges_on_ray
from evaltrace.evaluators.engine.ray_sorted import SORTED, EntriesFolder, EntryTarget, SortedParts, write_sorted
from evaltrace.evaluators.engine.sample import RunStats
from evaltrace.evaluators.engine.shards import WorkerError

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoredRun, ScoreOptions
    from evaltrace.evaluators.results.report.writer import EntrySink
    from evaltrace.evaluators.scoring.spec.loader import LoadedSpec

SHARDS_PER_CPU = 2
"""Shards per CPU of the cluster: several per CPU balance uneven nodes and give progress steps."""
ADDRESS_ENV = "RAY_ADDRESS"
CONNECT_TIMEOUT = 10.0
"""Seconds to wait for the head node to accept a connection before giving up."""


def run_shard(
    shard: Shard, shared: tuple[Sequence[Path], bool, Router, RunStats, ScoreOptions, EntriesFolder | None]
) -> ShardResult:
    """A Ray task: `score_shard` with the run's shared parts (put once); entries to the folder if given (no spec)."""
    files, histories, router, stats, options, folder = shared
    result = score_shard(files, shard, histories, router, stats, options)
    if folder is not None and result.input_error is None:
        result.file = write_sorted(folder, shard.index, result.rows)
        result.rows = []
    return result


def connect(address: str | None) -> Any:
    """Join the Ray cluster at `address` (else `RAY_ADDRESS`, else a Ray started for this run); returns `ray`.

    Raises:
        InputError: Ray is not installed, or the cluster cannot be reached.
    """
    try:
        import ray
    except ImportError:
        raise InputError("--engine ray needs Ray: pip install 'evaltrace[ray]'") from None
    # A Ray started here reports usage nowhere and serves no dashboard: scoring sends nothing out.
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if ray.is_initialized():
        return ray
    where = address or os.environ.get(ADDRESS_ENV)
    if where is not None:
        _check_reachable(where)
    try:
        ray.init(
            # Without an address Ray joins the latest cluster any user of the machine started (its
            # address file under /tmp/ray): that cluster would get the traces and hand pickled results
            # back. "local" always starts a Ray of this run's own.
            address=where if where is not None else "local",
            include_dashboard=False if where is None else None,
            log_to_driver=False,
            logging_level=logging.WARNING,
            **_loopback_node(where),
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise InputError(f"cannot join the Ray cluster at {where}: {_reason(exc)}") from None
    return ray


def _reason(exc: Exception) -> str:
    """`exc`'s message on one line: its first line, and its last where they differ.

    Ray Client's server answers a failed join with a header line and the server's traceback, whose
    last line says why (e.g. its per-client server did not start).
    """
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0].rstrip(':')}: {lines[-1]}"


def _check_reachable(address: str) -> None:
    """Fail at once on a HOST:PORT nobody answers at: Ray itself would retry for minutes.

    Raises:
        InputError: the address is malformed or refuses or drops the connection.
    """
    if address == "auto" or "://" in address:
        return  # Ray finds these itself (a local cluster's address file, a Ray client URL)
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--ray-address {address}: give the head node's HOST:PORT (e.g. 10.0.0.5:6379)")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"cannot join the Ray cluster at {address}: {reason}") from None


def _loopback_node(address: str | None) -> dict[str, str]:
    """For a cluster on a loopback address, the driver's node address to match it.

    Ray turns 127.0.0.1 into the machine's network address, so a cluster kept on loopback runs its
    nodes on other 127.x addresses; the driver finds its node's raylet by address, and would look
    for it at 127.0.0.1 unless told.
    """
    host = (address or "").rsplit(":", 1)[0].strip("[]")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        return {}
    return {"_node_ip_address": host} if loopback else {}


def shard_count(ray: Any, requested: int | None) -> int:
    """How many shards (tasks): `requested` (`--workers`), else `SHARDS_PER_CPU` per CPU of the cluster."""
    if requested is not None:
        return requested
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, cpus * SHARDS_PER_CPU)


def score_on_ray(
    files: Sequence[Location],
    router: Router,
    stats: RunStats,
    spill: Spill | None,
    options: ScoreOptions,
    *,
    address: str | None,
    shards: int | None,
    histories: bool,
    retries: int,
    entries: EntryStage | None = None,
) -> bool:
    """Score `files` in Ray tasks; entries go to `spill`'s folder, the rest to `router` and `stats` (no spec).

    With `entries` (a spec), the run takes the entries stage (`ray_entries.py`): its results land on `entries`; `True`.

    Raises:
        InputError: Ray is missing or unreachable, or a task met bad input.
    """
    ray = connect(address)
    count = shard_count(ray, shards)
    _ship_plugins(ray, router)
    # The progress bar stays here, and judge settings (an API key among them) never leave the driver.
    shipped = dataclasses.replace(options, progress=None, judge_overrides={})
    # Workers do not share the driver's working folder: local paths go absolute, URIs as they are.
    located = [path.resolve() if isinstance(path, Path) else path for path in files]
    by_shard = _holds_logs(located) or _all_cached(located, count, histories, options.cache)
    if entries is not None:
        target = entries.start(count)
        parts = RunParts(located, count, histories, router, RunStats(prices=stats.prices), shipped, retries, target)
        score_entries(parts, count, entries, by_shard=by_shard)
        return True
    assert isinstance(spill, SortedParts)  # without a spec
    if by_shard:
        run = (histories, router, stats, shipped, spill.folder)
        results = _score_by_shards(ray, located, count, run, retries, spill, options.progress)
    else:
        merged = EntryTarget(count, None, spill.folder)
        parts = RunParts(located, count, histories, router, RunStats(prices=stats.prices), shipped, retries, merged)
        gathered = _Gathered(spill, options.progress)
        score_groups(parts, count, gathered.add)
        results = [gathered.results[key] for key in sorted(gathered.results)]
    for result in results:
        assert result.router is not None and result.stats is not None
        router.state.merge(result.router)
        stats.merge(result.stats)
    return False


def _holds_logs(files: Sequence[Location]) -> bool:
    """Whether log-record files are among `files` (Ray Data's path reads span files only).

    Raises:
        InputError: a file is unreadable, or log-record files are given as URIs.
    """
    from evaltrace.collector.runfiles.runfiles import file_signal, is_uri
    from evaltrace.collector.runfiles.schema import SIGNAL_LOGS

    logs = [path for path in files if file_signal(path) == SIGNAL_LOGS]
    if any(is_uri(path) for path in files) and logs:
        raise InputError(f"{logs[0]}: --engine ray reads runs with log-record files from local paths only")
    return bool(logs)


def _all_cached(files: Sequence[Location], count: int, histories: bool, cache: bool) -> bool:
    """Whether the cache folder seen here holds every shard's traces table (a warm re-scoring).

    The shard tasks then read those tables instead of the spans: no read, no shuffle, no rebuild.
    Seen from the driver, so it holds where the nodes share the cache folder (one machine, or
    `EVALTRACE_CACHE_DIR` on the shared filesystem); a task on a node without the table rebuilds.
    """
    from evaltrace.collector.traces.cache import is_cached

    paths = [path for path in files if isinstance(path, Path)]
    if not cache or len(paths) < len(files):
        return False
    return all(is_cached(paths, histories=histories, shard=Shard(index, count)) for index in range(count))


class _Gathered:
    """The driver's side of Ray Data's path (no spec): each group's result kept, its progress shown as it ends."""

    def __init__(self, spill: SortedParts, progress: Callable[[int], None] | None) -> None:
        self.spill, self.progress = spill, progress
        self.results: dict[int, ShardResult] = {}
        self.read = 0

    def add(self, key: int, result: ShardResult) -> None:
        _park(self.spill, key, result)
        self.results[key] = result
        self.read += result.stats.traces if result.stats is not None else 0
        if self.progress is not None:
            self.progress(self.read)


def _score_by_shards(
    ray: Any,
    files: Sequence[Location],
    count: int,
    run: tuple[bool, Router, RunStats, ScoreOptions, EntriesFolder | None],
    retries: int,
    spill: SortedParts,
    progress: Callable[[int], None] | None,
) -> list[ShardResult]:
    """Shard tasks that each read every file and keep their shard's traces (runs with log-record files)."""
    histories, router, stats, shipped, folder = run
    # SPREAD: shards go to every node rather than filling the first ones (each reads every file).
    task = ray.remote(max_retries=retries, num_cpus=1, scheduling_strategy="SPREAD")(run_shard)
    shared = ray.put(
        ([Path(path) for path in files], histories, router, RunStats(prices=stats.prices), shipped, folder)
    )
    pending = [task.remote(Shard(index, count), shared) for index in range(count)]
    return _gather(ray, pending, spill, progress)


def _result(ray: Any, ref: Any, index: int, count: int) -> ShardResult:
    """The task's result; a task that failed past its retries is one error naming the shard."""
    try:
        result: ShardResult = ray.get(ref)
    except Exception as exc:  # Ray wraps the task's exception in its own types
        lines = [line for line in str(exc).splitlines() if line.strip()]
        last = lines[-1] if lines else repr(exc)
        raise WorkerError(f"the Ray task of shard {index + 1} of {count} failed: {last}") from None
    return result


def _ship_plugins(ray: Any, router: Router) -> None:
    """Send the code of plugin scorers (modules outside evaltrace) with the router, not by name.

    Workers import evaltrace themselves, but a scorer loaded from a `--plugin` file exists only in
    this process: its module is pickled by value so that every worker can rebuild the scorer.
    """
    for scorer in router.scorers():
        module = sys.modules.get(type(scorer).__module__)
        if module is not None and not module.__name__.startswith("evaltrace."):
            ray.cloudpickle.register_pickle_by_value(module)


def _gather(
    ray: Any, pending: list[Any], spill: SortedParts, progress: Callable[[int], None] | None
) -> list[ShardResult]:
    """Wait for every task, keeping each one's entries file as it finishes (`_park`); results in shard order."""
    order = {ref: index for index, ref in enumerate(pending)}
    results: list[ShardResult | None] = [None] * len(pending)
    read = 0
    waiting = list(pending)
    while waiting:
        done, waiting = ray.wait(waiting, num_returns=1)
        result = _result(ray, done[0], order[done[0]], len(pending))
        if result.input_error is not None:
            for ref in waiting:
                ray.cancel(ref, force=True)
        _park(spill, order[done[0]], result)
        results[order[done[0]]] = result
        read += result.stats.traces if result.stats is not None else 0
        if progress is not None:
            progress(read)
    return [result for result in results if result is not None]


def _park(spill: SortedParts, key: int, result: ShardResult) -> None:
    """The entries' file task `key` returned (its node did not see the folder) written to the spill's folder.

    Raises:
        InputError: the task met bad input.
    """
    if result.input_error is not None:
        raise InputError(result.input_error)
    if result.file is not None:
        spill.folder.keep(SORTED.format(key), [result.file])
        result.file = None


def _entry_stage(
    router: Router, spec: LoadedSpec | None, sink: EntrySink | None, options: ScoreOptions
) -> contextlib.AbstractContextManager[EntryStage | None]:
    """The entries stage, for a run with a spec; leaving it removes its folder."""
    if not isinstance(router, SpecRouter) or spec is None:
        return contextlib.nullcontext()
    return EntryStage(router, sink, options)


def score_paths_ray(
    paths: Sequence[str | os.PathLike[str]],
    spec: LoadedSpec | None,
    options: ScoreOptions,
    sink: EntrySink | None,
) -> ScoredRun:
    """`scoring.score_files` on a Ray cluster (`--engine ray`): the same report, entry for entry.

    Args:
        paths: files, folders, globs or URIs, as the CLI takes them (read by every node at the same path),
            or the `RunFiles` they resolved to (with `uris=True`).
        spec: the loaded spec, or `None` for the reference-free defaults.
        options: as for `score_files`; `ray_address` is the cluster (`ray://HOST:PORT`, `HOST:PORT`,
            `auto`; `None`: `RAY_ADDRESS`, else a Ray started for this run on this machine), `workers`
            the tasks to split the traces into (`None`: `SHARDS_PER_CPU` per CPU of the cluster).
        sink: where the entries go, in report order.

    Raises:
        InputError: as `score_files`; also Ray missing or unreachable, or judges not set up on the cluster.
    """
    from evaltrace.collector.otlp.files.inputs import resolve_paths
    from evaltrace.collector.runfiles.reader import recording_losses
    from evaltrace.evaluators.engine.scoring import _finish, new_run
    from evaltrace.evaluators.scoring.scorers.base import reads_histories

    address, shards = options.ray_address, options.workers
    retries = RaySettings.from_env().max_restarts  # a bad value stops the run before Ray is joined
    files = resolve_paths(paths, uris=True).locations  # the CLI's RunFiles (resolved with uris) as they are
    router, stats = new_run(spec, options)
    stats.dropped_spans, stats.unwritten_spans = recording_losses(files)
    histories = reads_histories(router.scorers())
    with (
        judges_on_ray(router, options.judge_overrides, lambda: connect(address)) as judged,
        _entry_stage(router, spec, sink, options) as stage,
        SortedParts() if stage is None else contextlib.nullcontext() as spill,  # without a spec: the tasks' files
    ):
        done = score_on_ray(
            files,
            router,
            stats,
            spill,
            options,
            address=address,
            shards=shards,
            histories=histories,
            retries=retries,
            entries=stage,
        )
        if done and stage is not None:
            return finish_entries(stage, stats, spec, judged())
        assert spill is not None
        return _finish(router, stats, spill, spec, options, sink, judged())
