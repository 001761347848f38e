"""The Ray engine's coordinator: a Ray Data pipeline run in a task of its own, its results streamed to the driver.

Ray Data's executor runs where the dataset is iterated and looks at its queues every 10 ms while
the tasks run. In the driver that was most of its main thread's time (~0.8% of a core over the
wall: 2.6-4.4 s of 2.9-4.5 s per 1M spans, `benchmarks/RESULTS.md`, "Scoring on Ray"). The
pipeline, built lazily by the driver (`ray_data`, `ray_entries`), is handed to a coordinator task
on the driver's node instead (no CPU reserved, never re-run: it dies only with that node, whose
loss the driver does not survive either); it yields each row of the last stage as it comes (a
streaming generator), and the driver waits for the next in `ray.get`, which blocks without polling.
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
    quiet_ray_data,
    scored_groups,
)
from evaltrace.evaluators.engine.shards import WorkerError


def score_groups(parts: RunParts, count: int, on_result: Callable[[int, ShardResult], None]) -> None:
    """Read, shuffle and score `parts.locations` in `count` groups; `on_result` takes each group's result."""
    files, blob = files_dataset(parts)
    for key, result in results(scored_groups(files, count, blob, parts.retries)):
        on_result(key, result)


def results(dataset: Any) -> Iterator[tuple[int, Any]]:
    """`dataset` run by a coordinator task: its last stage's rows (`KEY`, `RESULT`) as they come, each unpickled.

    Raises:
        WorkerError: a task failed past its retries (its worker or node died each time).
    """
    import ray

    for key, payload in _rows(ray, dataset):
        if key < 0:
            raise WorkerError(f"a Ray task failed past EVALTRACE_RAY_MAX_RESTARTS re-runs: {payload.decode()}")
        yield key, ray.cloudpickle.loads(payload)


def _rows(ray: Any, dataset: Any) -> Iterator[tuple[int, bytes]]:
    """The coordinator's rows as they come; through Ray Client (`ray://`), which runs no streaming task, run here."""
    from ray.util.client import ray as client
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    if client.is_connected():  # all rows at the end: Ray Data runs in no client, and Ray Client streams no task
        yield from ray.get(ray.remote(_collected).options(num_cpus=0, max_retries=0).remote(dataset))
        return
    here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=True)
    coordinator = ray.remote(_coordinate).options(
        num_cpus=0, max_retries=0, num_returns="streaming", scheduling_strategy=here
    )
    rows = coordinator.remote(dataset)
    try:
        for ref in rows:
            try:
                yield ray.get(ref)
            except Exception as exc:  # the coordinator itself died
                yield -1, _last_line(exc).encode()
    finally:
        ray.cancel(rows)  # a run stopped early (bad input) leaves no pipeline running


def _coordinate(dataset: Any) -> Iterator[tuple[int, bytes]]:
    """The coordinator task: `dataset` run, its rows (key, pickled result) yielded as they come; a failure (-1, why)."""
    import ray.data

    quiet_ray_data(ray.data.DataContext.get_current())
    try:
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            # Not `yield from`: Ray sends values into the generator, which a zip cannot take.
            for row in zip(batch.column(KEY).to_pylist(), batch.column(RESULT).to_pylist(), strict=True):  # noqa: UP028
                yield row
    except Exception as exc:  # Ray wraps the task's failure in its own types
        yield -1, _last_line(exc).encode()


def _collected(dataset: Any) -> list[tuple[int, bytes]]:
    """The coordinator task's rows all at once (through Ray Client)."""
    return list(_coordinate(dataset))


def _last_line(exc: Exception) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__
