"""Where the engine meets the columnar path: the batches of a run, and the lookup before a scorer runs.

The engine reads traces through the traces cache; the cache hands each table batch to
`RunCalls.add_batch` before decoding its traces, so by the time a trace is scored its row's
columns are here. `columnar_score(scorer, trace)` then gives the columnar verdict, or `None` to run
the reference. Only the last few batches are kept (memory stays bounded by a batch), plus the set
of trace ids seen, so that an id two top-level rows share is never answered for.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from operator import attrgetter
from typing import Final

import pyarrow as pa

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.columnar.calls import BatchCalls, RowCalls
from evaltrace.evaluators.scoring.columnar.forms import FORMS
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer

_NAME = attrgetter("name")

KEPT_BATCHES: Final = 3
"""Batches kept: the decoder yields a trace once the next top-level row is read, maybe a batch later."""


class RunCalls:
    """The tool-call columns of a run's recent batches, looked up by trace id."""

    def __init__(self) -> None:
        self._batches: deque[BatchCalls] = deque(maxlen=KEPT_BATCHES)
        self._rows: dict[str, tuple[BatchCalls, int]] = {}
        """Each kept batch's rows by trace id, in one dict: a lookup is one probe, not one a batch."""
        self._seen: set[str] = set()
        self.hits = 0
        """Scores given by the columnar path (the benchmark and the tests read it)."""

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Index a traces-table batch (called by the cache before its traces are decoded)."""
        batches = self._batches
        if len(batches) == batches.maxlen:  # the oldest batch goes: its rows with it
            for trace_id in batches.popleft().trace_ids:
                self._rows.pop(trace_id, None)
        calls = BatchCalls(batch)
        rows, seen = self._rows, self._seen
        for trace_id, index in calls.rows():
            if trace_id in seen:  # a second top-level row with this id: never answered for again
                rows.pop(trace_id, None)
                calls.forget(trace_id)
            else:
                seen.add(trace_id)
                rows[trace_id] = (calls, index)
        self._batches.append(calls)

    def row(self, trace: Trace) -> RowCalls | None:
        """The columns of `trace`'s row, when a kept batch holds it and no other row shares its id."""
        found = self._rows.get(trace.trace_id)
        if found is None:
            return None
        row = RowCalls(*found)
        # The row must describe this very trace: a cheap check on the calls' names.
        return row if row.names == list(map(_NAME, trace.tool_calls)) else None

    def score(self, scorer: Scorer, trace: Trace) -> Score | None:
        """The columnar verdict of `scorer` on `trace`, or `None` when the reference must score it."""
        form = FORMS.get(type(scorer))  # `form_of`, minus a call on every scorer of every trace
        if form is None:
            return None
        row = self.row(trace)
        if row is None:
            return None
        found = form(scorer, row, trace)
        if found is not None:
            self.hits += 1
        return found


_active: ContextVar[RunCalls | None] = ContextVar("evaltrace_columnar_run", default=None)


@contextmanager
def columnar_run(calls: RunCalls) -> Iterator[RunCalls]:
    """Make `calls` the run's columnar source for the scorers run inside this block."""
    token = _active.set(calls)
    try:
        yield calls
    finally:
        _active.reset(token)


def columnar_score(scorer: Scorer, trace: Trace) -> Score | None:
    """The columnar verdict of `scorer` on `trace` in the active run, or `None` (no run, or the reference's turn)."""
    calls = _active.get()
    return None if calls is None else calls.score(scorer, trace)
