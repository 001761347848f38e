"""Scoring one run in several processes, one shard of its traces each.

Reading, rebuilding and rule-scoring traces is pure-Python work, so one process uses one core.
A sharded run forks `workers` processes; worker i reads every file but keeps only the traces of
shard i (chosen on the Arrow trace-id column before any row is decoded, see
`collector/runfiles/shard.py`), rebuilds them (or reads its shard's traces table from the traces
cache, keyed by the shard: a re-scoring with as many workers is warm) and scores them with its
inherited copy of the router, and streams each scored sample's JSON back to the parent, which
parks it on its own spill. When a worker's input ends it hands over what its router still holds
(conversations waiting for their other turns, unmatched traces, the tallies that decide its
cases) and its run statistics; the parent merges them, scores the conversations (whose traces
may have come from several shards) and writes the report as a one-process run would. The
entries are the same: only their arrival order differs, and the spill sorts by start time anyway.

Workers are forked, not spawned: they inherit the loaded spec, its scorers and any scorer the
program registered, without pickling or re-importing anything. That is done on Linux only; other
platforms score in one process. Runs with judge scorers stay in one process too: judges wait on
the network, not the CPU, and share one request budget, one cache and one concurrency limit.
"""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltrace.collector.errors import EvaltraceError, InputError
from evaltrace.collector.gc_policy import collections_paused
from evaltrace.collector.runfiles.reader import Shard
from evaltrace.collector.traces.cache import traces_of
from evaltrace.evaluators.engine._loop import Router, score_stream_now
from evaltrace.evaluators.engine._routers import RouterState
from evaltrace.evaluators.engine._spill import Added, Spill
from evaltrace.evaluators.engine.columnar_entries import TableFault, score_shard
from evaltrace.evaluators.engine.sample import RunStats, is_async_scorer
from evaltrace.evaluators.engine.time_limit import scorer_time_limit

if TYPE_CHECKING:
    from evaltrace.collector.traces.records import Trace
    from evaltrace.evaluators.engine.scoring import ScoreOptions

logger = logging.getLogger(__name__)

AUTO_MIN_BYTES = 8 * 1024 * 1024
"""Below this much span data, forking costs more than it saves: auto mode uses one process."""
MAX_AUTO_WORKERS = 8
_ROWS_PER_MESSAGE = 256
_BYTES_PER_MESSAGE = 1 << 20


class WorkerError(EvaltraceError):
    """A scoring worker process failed for a reason other than bad input (a bug or a kill)."""


def available_cpus() -> int:
    """CPUs this process may use: its affinity mask, capped by a container's CPU quota."""
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    # A container limited to 2 CPUs still sees every CPU of its host in the affinity mask.
    quota = cgroup_cpus()
    return min(count, quota) if quota is not None else count


_CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))


def cgroup_cpus() -> int | None:
    """The cgroup CPU quota (`docker --cpus`, a Kubernetes CPU limit) in whole CPUs; `None` without one."""
    try:
        if _CGROUP_V2.exists():
            quota, period = _CGROUP_V2.read_text(encoding="ascii").split()[:2]
        else:
            quota, period = (path.read_text(encoding="ascii").strip() for path in _CGROUP_V1)
    except (OSError, ValueError):
        return None
    return quota_cpus(quota, period)


def quota_cpus(quota: str, period: str) -> int | None:
    """CPUs granted by a CFS quota and period (`max` or `-1`: no quota), rounded up."""
    try:
        microseconds, window = int(quota), int(period)
    except ValueError:
        return None  # "max": unlimited
    if microseconds <= 0 or window <= 0:
        return None
    return -(-microseconds // window)


def plan_workers(requested: int | None, files: Sequence[Path], router: Router) -> int:
    """How many processes score the run.

    Args:
        requested: the user's `--workers`; `None` picks one per CPU for runs of at least
            `AUTO_MIN_BYTES` of span files, else one.
        files: the span files of the run.
        router: the run's router (a judge among its scorers means one process).
    """
    # Forking a process that has loaded system frameworks is unsafe on macOS (CPython spawns
    # there by default for that reason); Linux is where forking this process is known to be sound.
    if requested == 1 or not sys.platform.startswith("linux"):
        return 1
    if any(is_async_scorer(scorer) for scorer in router.scorers()):
        return 1
    if requested is not None:
        cpus = available_cpus()
        if requested > cpus:
            # Kept as asked (uneven shards are valid), but each worker reads every file: the
            # extra ones add memory, not speed.
            logger.warning(
                "--workers %d: only %d CPUs are available here; more workers than CPUs add memory, not speed",
                requested,
                cpus,
            )
        return requested
    if span_bytes(files) < AUTO_MIN_BYTES:
        return 1
    return max(1, min(available_cpus(), MAX_AUTO_WORKERS))


def span_bytes(files: Sequence[Path]) -> int:
    """The span files' total size, what the choices to fork weigh (a file gone is the reader's to report)."""
    return sum(_size(path) for path in files)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # the reader reports the file properly


def score_sharded(
    files: Sequence[Path],
    router: Router,
    stats: RunStats,
    spill: Spill,
    options: ScoreOptions,
    workers: int,
    *,
    histories: bool = True,
    columnar: bool = False,
) -> None:
    """Score `files` in `workers` forked processes; samples land on `spill`, the rest on `router` and `stats`.

    Afterwards `router` holds every worker's conversations, unmatched traces (in shard order) and
    case tallies, and `stats` the sums of theirs: the caller goes on as after `score_stream`.
    `histories`: whether the traces are read with their prompts (see `convert.read_traces`).
    `columnar`: each worker scores its shard from its traces table's columns, cached or as written (`score_shard`).

    Raises:
        TableFault: a worker could not read its cached table (the caller scores again with `columnar` off).
        InputError: a worker met bad input (the first such error, as that worker reported it).
        WorkerError: a worker crashed or was killed.
    """
    # A forked child flushes its copy of these buffers on exit: empty them first, or text written
    # before the fork would appear once per worker.
    sys.stdout.flush()
    sys.stderr.flush()
    receivers: dict[Connection, int] = {}
    processes: list[multiprocessing.process.BaseProcess] = []
    try:
        for index in range(workers):
            work = (files, Shard(index, workers), histories, columnar, router, stats, options)
            start_process(_work, work, f"evaltrace-score-{index}", receivers, processes)
        # The messages are acyclic (rows of bytes and strings, the hand-overs' tallies): a collection
        # would only scan them, and the spill's index rows kept meanwhile.
        with collections_paused(settle=True):
            states = _collect(receivers, processes, spill, options)
    finally:
        stop_processes(receivers, processes)
    for state in states:
        router.state.merge(state.router)
        stats.merge(state.stats)


@dataclasses.dataclass
class _Handover:
    """What a worker sends last: its router's held state and its run statistics."""

    router: RouterState
    stats: RunStats


def _collect(
    receivers: dict[Connection, int],
    processes: Sequence[multiprocessing.process.BaseProcess],
    spill: Spill,
    options: ScoreOptions,
) -> list[_Handover]:
    """Read the workers' messages until each has handed over; returns the hand-overs in shard order."""
    handovers: list[_Handover | None] = [None] * len(processes)
    counts = [0] * len(processes)
    waiting = dict(receivers)
    while waiting:
        for ready in wait(list(waiting)):
            assert isinstance(ready, Connection)
            index = waiting[ready]
            kind, payload = receive(ready, index, processes)
            if kind == "rows":
                rows, counts[index] = payload
                spill.add_rows(rows)
                if options.progress is not None:
                    options.progress(sum(counts))
            else:  # "done"
                handovers[index] = payload
                del waiting[ready]
                if options.progress is not None:
                    counts[index] = payload.stats.traces
                    options.progress(sum(counts))
    return [handover for handover in handovers if handover is not None]


def start_process(
    target: Callable[..., None],
    args: tuple[Any, ...],
    name: str,
    receivers: dict[Connection, int],
    processes: list[multiprocessing.process.BaseProcess],
) -> None:
    """Fork a process running `target(*args, sender)`, whose messages `receivers` reads (keyed by its place).

    Ctrl-C reaches the whole process group: the process ignores it, the parent handles it and stops it.
    SIGINT is held back over the fork, so that one arriving before the child ignores it cannot raise
    KeyboardInterrupt there (in the parent's frames: the child would run the parent's handlers).
    """
    receiver, sender = multiprocessing.get_context("fork").Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(
        target=_ignoring_ctrl_c, args=(target, *args, sender), name=name, daemon=True
    )
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
        sender.close()  # the process holds the only write end: its exit ends our reads
        receivers[receiver] = len(processes)
        processes.append(process)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a Ctrl-C held meanwhile is raised here


def _ignoring_ctrl_c(target: Callable[..., None], *args: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a held one is dropped: ignored
    target(*args)


def stop_processes(receivers: dict[Connection, int], processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
    """End the processes `start_process` started (those still running are terminated) and close their pipes."""
    for process in processes:
        if process.is_alive():
            process.terminate()
        process.join()
    for receiver in receivers:
        receiver.close()


def receive(ready: Connection, index: int, processes: Sequence[multiprocessing.process.BaseProcess]) -> Any:
    """A process's next message (kind, payload); raises what it reported (bad input, an unreadable table, a crash)."""
    try:
        kind, payload = ready.recv()
    except EOFError:
        processes[index].join()
        code = processes[index].exitcode
        raise WorkerError(f"{_name(index, processes)} ended early (exit code {code})") from None
    if kind == "input":
        raise InputError(payload)
    if kind == "table":  # the run is scored again per trace (see `score_sharded`)
        raise TableFault(payload)
    if kind == "error":
        raise WorkerError(f"{_name(index, processes)} failed:\n{payload}")
    return kind, payload


def _name(index: int, processes: Sequence[object]) -> str:
    return f"scoring worker {index + 1} of {len(processes)}"


class _PipeSpill:
    """A worker's stand-in for the parent's `Spill`: rows are batched into pipe messages."""

    def __init__(self, sender: Connection) -> None:
        self._sender = sender
        self._rows: list[Added] = []
        self._bytes = 0
        self.traces = 0
        self._traces_sent = 0

    def add_rows(self, rows: Iterable[Added]) -> None:
        """Send rows as the parent's `Spill.add_rows` takes them: a warm batch's (hundreds) in one message."""
        before = len(self._rows)
        self._rows += rows
        self._bytes += sum(len(row[3]) for row in self._rows[before:])
        if len(self._rows) >= _ROWS_PER_MESSAGE or self._bytes >= _BYTES_PER_MESSAGE:
            self.flush()

    def count(self, traces: int) -> None:
        self.traces = traces
        # Traces that park no row (unmatched, or held for their conversation) still count as read:
        # the parent's progress hears of them at least every `_ROWS_PER_MESSAGE` traces.
        if traces - self._traces_sent >= _ROWS_PER_MESSAGE:
            self.flush()

    def flush(self) -> None:
        self._sender.send(("rows", (self._rows, self.traces)))
        self._rows, self._bytes = [], 0
        self._traces_sent = self.traces


@contextmanager
def shard_traces(
    files: Sequence[Path], shard: Shard, histories: bool, options: ScoreOptions
) -> Iterator[Iterator[Trace]]:
    """The traces of `shard` of `files`, to be scored inside the block: a worker's, unless its rows are decided.

    Inside, the scorer time limit is set (threads do not survive a fork).
    """
    with scorer_time_limit(options.scorer_timeout):
        yield traces_of(files, shard, histories=histories, cache=options.cache)


def _work(
    files: Sequence[Path],
    shard: Shard,
    histories: bool,
    columnar: bool,
    router: Router,
    stats: RunStats,
    options: ScoreOptions,
    sender: Connection,
) -> None:
    """A worker's whole life: score one shard, then hand over; errors go to the parent as messages."""
    message: tuple[str, Any]
    try:
        spill = _PipeSpill(sender)
        local = dataclasses.replace(options, progress=spill.count)
        if columnar:  # from this shard's table's columns, read or being written (see `columnar_entries.py`)
            with scorer_time_limit(options.scorer_timeout):
                score_shard(files, shard, histories, router, stats, spill, local)
        else:
            with shard_traces(files, shard, histories, options) as traces:
                score_stream_now(traces, router, stats, spill, local)
        spill.flush()
        message = ("done", _Handover(router=router.hand_over(), stats=stats))
    except InputError as exc:
        message = ("input", str(exc))
    except TableFault as exc:
        message = ("table", str(exc))
    except BaseException:  # reported to the parent, which raises it: nothing may die silently here
        message = ("error", traceback.format_exc())
    try:
        sender.send(message)
    finally:
        sender.close()
