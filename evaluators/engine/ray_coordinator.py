"""The Ray engine's coordinator: a Ray Data pipeline run in a task of its own, its results streamed to the driver.

Ray Data's executor runs where the dataset is iterated and looks at its queues every 10 ms while
the tasks run. In the driver that was most of its main thread's time (~0.8% of a core over the
wall: 2.6-4.4 s of 2.9-4.5 s per 1M spans, `benchmarks/RESULTS.md`, "Scoring on Ray"). The
pipeline (`ray_data`, `ray_entries`) is built and run by a coordinator task on the driver's node
instead (no CPU reserved, never re-run: it dies only with that node, whose loss the driver does
not survive either); it yields each row of the last stage as it comes (a streaming generator),
and the driver waits for the next in `ray.get`, which blocks without polling.
Through Ray Client (`ray://`), which streams no task and in whose driver Ray Data does not run at
all, the coordinator returns every row at its end instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from evaltrace.evaluators.engine.ray_data import (
    KEY,
    RESULT,
    RunParts,
    ShardResult,
    files_dataset,
    scored_groups,
)
from evaltrace.evaluators.engine.shards import WorkerError


def score_groups(parts: RunParts, count: int, on_result: Callable[[int, ShardResult], None]) -> None:
    """Read, shuffle and score `parts.locations` in `count` groups; `on_result` takes each group's result."""
    for key, result in results(groups_pipeline, parts, count):
        on_result(key, result)


def groups_pipeline(parts: RunParts, count: int) -> Any:
    """The dataset of `score_groups`, built in the coordinator task."""
    files, blob = files_dataset(parts)
    return scored_groups(files, count, blob, parts.retries)


def results(build: Callable[..., Any], *args: Any) -> Iterator[tuple[int, Any]]:
    """The dataset `build(*args)`, built and run by a coordinator task: its last stage's rows as they come.

    Each row is a key and its result, unpickled (`ray_data.result_row`). The driver neither builds
    nor runs the dataset, so it does not even import Ray Data (~1 s of CPU).

    Raises:
        WorkerError: a task failed past its retries (its worker or node died each time).
    """
    import ray

    for key, payload in _rows(ray, build, args):
        if key < 0:
            raise WorkerError(f"a Ray task failed past EVALTRACE_RAY_MAX_RESTARTS re-runs: {payload.decode()}")
        yield key, ray.cloudpickle.loads(payload)


def _rows(ray: Any, build: Callable[..., Any], args: tuple[Any, ...]) -> Iterator[tuple[int, bytes]]:
    """The coordinator's rows as they come; through Ray Client (`ray://`), which runs no streaming task, run here."""
    from ray.util.client import ray as client
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if client.is_connected():  # all rows at the end: Ray Data runs in no client, and Ray Client streams no task
        yield from ray.get(ray.remote(_collected).options(num_cpus=0, max_retries=0).remote(build, *args))
        return
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    coordinator = ray.remote(_coordinate).options(
        num_cpus=0, max_retries=0, num_returns="streaming", scheduling_strategy=here
    )
    rows = coordinator.remote(build, *args)
    try:
        for ref in rows:
            try:
                yield ray.get(ref)
            except Exception as exc:  # the coordinator itself died
                yield -1, _last_line(exc).encode()
    finally:
        ray.cancel(rows)  # a run stopped early (bad input) leaves no pipeline running


def _coordinate(build: Callable[..., Any], *args: Any) -> Iterator[tuple[int, bytes]]:
    """The coordinator task: `build(*args)` run, its rows (key, pickled result) as they come; failed: (-1, why)."""
    try:
        for batch in build(*args).iter_batches(batch_size=None, batch_format="pyarrow"):
            # Not `yield from`: Ray sends values into the generator, which a zip cannot take.
            for row in zip(batch.column(KEY).to_pylist(), batch.column(RESULT).to_pylist(), strict=True):  # noqa: UP028
                yield row
    except Exception as exc:  # Ray wraps the task's failure in its own types
        yield -1, _last_line(exc).encode()


def _collected(build: Callable[..., Any], *args: Any) -> list[tuple[int, bytes]]:
    """The coordinator task's rows all at once (through Ray Client)."""
    return list(_coordinate(build, *args))


def _last_line(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__
