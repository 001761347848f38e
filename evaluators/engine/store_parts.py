"""A sharded run's score store rows written by forked processes, one part of the store each, beside the report.

At the end of a sharded run (`shards.py`) the parent holds every sample parked on its spill and
every case's tally. Turning the samples into the scores table's rows (Arrow columns built from
Python values, then Parquet) cost the parent ~90% of its serial end on the 1M-span set, and the
report's JSON is only copied from the spill. So the cases are decided first, then `workers`
forked processes each write the rows of a run of consecutive cases as one part of the store,
the way the Ray engine's entries tasks do (`StoreWriter.in_parts`, `StoreParts`: the parts in
name order are the rows a one-process run writes, in order), while the parent streams the report.
"""

from __future__ import annotations

import multiprocessing
import sys
import traceback
from bisect import bisect_left
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from itertools import accumulate
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaltrace.collector.gc_policy import collections_paused
from evaltrace.evaluators.engine._aggregate import CaseTally
from evaltrace.evaluators.engine._loop import Router
from evaltrace.evaluators.engine._routers import SpecRouter
from evaltrace.evaluators.engine._spill import Spill
from evaltrace.evaluators.engine.shards import receive, start_process, stop_processes
from evaltrace.evaluators.results.report.writer import EntrySink, ReportEntry
from evaltrace.evaluators.results.store.location import store_error
from evaltrace.evaluators.results.store.rows import ScorerIndex, ScoreRows
from evaltrace.evaluators.results.store.writer import store_writer

if TYPE_CHECKING:
    import pyarrow as pa

    from evaltrace.evaluators.engine.scoring import ScoreOptions
    from evaltrace.evaluators.results.store.writer import StoreParts


@contextmanager
def writing(
    router: Router, spill: Spill, sink: EntrySink | None, options: ScoreOptions, workers: int
) -> Iterator[None]:
    """Inside the block, `workers` forked processes write the score store's rows, a part each, as Ray's tasks do.

    At a sharded run's end its store rows cost the parent more than the rest (the report's JSON is
    only copied): each process takes a run of consecutive cases (about as many samples each),
    decided here first, and writes their rows as one part of the store (`StoreWriter.in_parts`)
    while the parent writes the report. Leaving the block waits for them and counts their rows.
    Nothing is forked without a spec, or a score store, or the samples' store values (`store_values`).
    """
    store = store_writer(sink) if options.store_values else None
    if store is None or not isinstance(router, SpecRouter):
        yield
        return
    parts = store.in_parts()
    for case in router.selected:  # a case no sample reached is an entry too, decided from an empty tally
        router.state.tallies.setdefault(case.id, CaseTally.for_policy(router.spec.spec.repeat_for(case)))
    router.hand_over()  # every case decided: by the emit, and by the processes for their rows
    spill.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    receivers: dict[Connection, int] = {}
    processes: list[multiprocessing.process.BaseProcess] = []
    try:
        for index, cases in enumerate(_spans(router, spill, workers)):
            part = (router, spill, parts, store.folder, cases, f"part-{index:05d}.parquet")
            start_process(_write_part, part, f"evaltrace-store-{index}", receivers, processes)
        yield
        written = [receive(receiver, index, processes)[1] for receiver, index in receivers.items()]
        store.parts_written(sum(rows for rows, _ in written), sum(errors for _, errors in written))
    finally:
        stop_processes(receivers, processes)


def _spans(router: SpecRouter, spill: Spill, parts: int) -> list[range]:
    """Runs of consecutive cases, at most `parts`, of about as many samples each (a case without any weighs one)."""
    sums = list(accumulate(max(1, spill.count(case.id)) for case in router.selected))
    cuts = [min(bisect_left(sums, sums[-1] * part / parts) + 1, len(sums)) for part in range(1, parts)]
    bounds = [0, *cuts, len(sums)]
    return [range(start, end) for start, end in zip(bounds, bounds[1:], strict=False) if end > start]


def _write_part(
    router: SpecRouter, spill: Spill, parts: StoreParts, store: Path, cases: range, name: str, sender: Connection
) -> None:
    """A store writer's whole life: the rows of `cases` written as the part `name`; errors go to the parent."""
    message: tuple[str, Any]
    try:
        rows = ScoreRows(parts.run, ScorerIndex(router.spec))
        # As the parent's `_finish`: the rows are many acyclic tuples; a collection would also scan
        # (and so copy, page by page) every object inherited from the parent.
        with collections_paused():
            parts.write(name, _part_batches(router, spill, rows, cases))
        message = ("done", (rows.total, rows.errors))
    except OSError as exc:
        message = ("input", str(store_error(store, exc)))
    except BaseException:  # reported to the parent, which raises it
        message = ("error", traceback.format_exc())
    try:
        sender.send(message)
    finally:
        sender.close()


def _part_batches(router: SpecRouter, spill: Spill, rows: ScoreRows, cases: range) -> Iterator[pa.RecordBatch]:
    """The rows of the entries at `cases` (positions in the selection), in report order, a batch at a time."""
    for index in cases:
        case_id = router.selected[index].id
        fields, head = router.state.decided[case_id]
        yield from rows.add_report_entry(index, ReportEntry.decided(head, fields, partial(spill.parked, case_id)))
    last = rows.flush()
    if last is not None:
        yield last
