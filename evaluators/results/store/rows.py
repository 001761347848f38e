"""Report entries as rows of the scores table, gathered column by column in bounded batches.

A row is an entry's columns, then its sample's, then one scorer result's (`store/sides.py` packs a
sample's part when the sample is parked; `ScorerIndex` pairs the results of a whole entry with their
scorers when the store is given typed entries instead).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import repeat
from typing import Any, NamedTuple

import pyarrow as pa

from evaltrace.collector.arrow_arrays import column, micros
from evaltrace.evaluators.results.report.model import EntryResult
from evaltrace.evaluators.results.report.sample_row import SampleRow
from evaltrace.evaluators.results.report.writer import EntryFields, ReportEntry
from evaltrace.evaluators.results.store.identities import ScorerPairing
from evaltrace.evaluators.results.store.schema import SCORES_SCHEMA
from evaltrace.evaluators.results.store.sides import (
    ERROR_AT,
    RESULT_COLUMNS,
    SampleSide,
    sample_side,
    unpack_side,
)
from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec


class CaseRules(NamedTuple):
    """A case's repeat rule fields the scores table carries."""

    min_samples: int | None


class ScorerIndex(ScorerPairing):
    """Each entry's scorers (per turn) and repeat settings: from a spec, or the defaults for every trace."""

    def __init__(self, spec: LoadedSpec | None, defaults: Sequence[Scorer] = ()) -> None:
        super().__init__(spec, defaults)
        self._min_samples = (
            {case.id: spec.spec.repeat_for(case).min_samples for case in spec.cases} if spec is not None else {}
        )

    def rules(self, case_id: str | None) -> CaseRules:
        """The case's `min_samples` (`None` without a spec)."""
        return CaseRules(self._min_samples.get(case_id or ""))


@dataclass(frozen=True)
class RunContext:
    """What every row of one scoring run repeats."""

    run_id: str
    started_at: datetime


_ENTRY_COLUMNS = (
    "run_id",
    "run_started_at",
    "entry_index",
    "case_id",
    "tier",
    "tags",
    "rule",
    "min_samples",
    "entry_status",
    "entry_passed",
    "entry_pass_rate",
)
_SAMPLE_COLUMNS = (
    "sample_index",
    "conversation_id",
    "sample_start_time",
    "sample_duration_seconds",
    "sample_input_tokens",
    "sample_output_tokens",
    "sample_cost_usd",
)
_NO_SAMPLE = (None,) * len(_SAMPLE_COLUMNS)
_NO_RESULT = (None,) * (len(RESULT_COLUMNS) + 1)
_RESULT_NAMES = (*RESULT_COLUMNS, "details")

Values = tuple[Any, ...]


class ScoreRows:
    """Rows of the scores table, gathered by level and handed out as Arrow batches of `batch_rows` rows.

    A row is an entry's values, its sample's and one result's; each level is kept once (an entry's
    values are not repeated on each of its rows), its columns made into Arrow arrays once per batch
    and repeated onto the rows by index (`take`). That keeps the store to a small share of scoring time.
    """

    def __init__(self, run: RunContext, index: ScorerIndex, batch_rows: int = 8192) -> None:
        assert sorted((*_ENTRY_COLUMNS, *_SAMPLE_COLUMNS, *_RESULT_NAMES)) == sorted(SCORES_SCHEMA.names)
        self._run = run
        self._started = micros(run.started_at)
        self._index = index
        self._batch_rows = batch_rows
        self._entries = _Level(_ENTRY_COLUMNS)
        self._samples = _Level(_SAMPLE_COLUMNS)
        self._results: list[Values] = []
        """Per waiting row, its result's values (`_RESULT_NAMES`)."""
        self.total = 0
        """Rows added so far."""
        self.errors = 0
        """Of the rows handed out in batches, results where a scorer could not run."""

    def add_report_entry(self, entry_index: int, entry: ReportEntry) -> list[pa.RecordBatch]:
        """`add_entry` for an entry as the engine hands it to the writers.

        From its samples' packed values when it was decided with them (no JSON parsed), else from the parsed entry.
        """
        fields, sides = entry.fields(), entry.sides()
        if fields is not None and sides is not None:
            return self.add_sides(entry_index, fields, [unpack_side(side) for side in sides])
        return self.add_entry(entry_index, entry.result())

    def add_entry(self, entry_index: int, entry: EntryResult) -> list[pa.RecordBatch]:
        """Add the entry's rows; returns a batch for each `batch_rows` rows waiting."""
        pair = self._index.identities
        samples = [sample_side(SampleRow.of(sample), pair(entry.case_id, sample.scores)) for sample in entry.samples]
        return self.add_sides(entry_index, EntryFields.of(vars(entry)), samples)

    def add_sides(self, entry_index: int, fields: EntryFields, samples: Sequence[SampleSide]) -> list[pa.RecordBatch]:
        """`add_entry` from the entry's own fields and its samples' values, in order."""
        results = self._results
        before = len(results)
        if not samples:  # a missing case: one row, no sample, no result
            self._samples.add(_NO_SAMPLE, 1)
            results.append(_NO_RESULT)
        for sample_index, (values, trace_id, found) in enumerate(samples):
            rows = found or ((trace_id, *_NO_RESULT[1:]),)  # a sample without results: one row
            self._samples.add((sample_index, *values), len(rows))
            results.extend(rows)
        added = len(results) - before
        self._entries.add(self._entry_values(entry_index, fields), added)
        self.total += added
        batches = []
        while len(results) >= self._batch_rows:
            batches.append(self._batch(self._batch_rows))
        return batches

    def flush(self) -> pa.RecordBatch | None:
        """The rows still waiting, as one batch (`None` when there are none)."""
        return self._batch(len(self._results)) if self._results else None

    def _batch(self, size: int) -> pa.RecordBatch:
        """The first `size` waiting rows as a batch (they stop waiting)."""
        columns = list(zip(*self._results[:size], strict=True))
        del self._results[:size]
        errors = columns[ERROR_AT]
        self.errors += len(errors) - errors.count(None)
        # Not `pa.array`: see `collector/arrow_arrays.py` (it would import pandas for the first batch).
        arrays = {name: column(values, _type(name)) for name, values in zip(_RESULT_NAMES, columns, strict=True)}
        arrays.update(self._entries.take(size))
        arrays.update(self._samples.take(size))
        return pa.RecordBatch.from_arrays([arrays[name] for name in SCORES_SCHEMA.names], schema=SCORES_SCHEMA)

    def _entry_values(self, entry_index: int, entry: EntryFields) -> Values:
        min_samples = self._index.rules(entry.case_id).min_samples if entry.rule is not None else None
        return (
            *(self._run.run_id, self._started, entry_index, entry.case_id, entry.tier, entry.tags, entry.rule),
            *(min_samples, entry.status, entry.passed, entry.pass_rate),
        )


def entry_rows(entries: Sequence[tuple[int, EntryFields, int | None, SampleSide]]) -> pa.RecordBatch:
    """The rows of entries of one sample each (entry index, fields, `min_samples`, values), made at once.

    The rows `ScoreRows.add_sides` makes of them, each column made once for all; the run's two
    columns are left out (`StoreWriter.add_rows` adds them).
    """
    of: list[int] = []
    results: list[Values] = []
    for at, (*_, side) in enumerate(entries):
        found = side.results or ((side.trace_id, *_NO_RESULT[1:]),)  # a sample without results: one row
        of.extend(repeat(at, len(found)))
        results.extend(found)
    values = [
        (index, fields.case_id, fields.tier, fields.tags, fields.rule, least, *fields[4:], 0, *side.values)
        for index, fields, least, side in entries
    ]
    names = (*_ENTRY_COLUMNS[2:], *_SAMPLE_COLUMNS)
    made = {name: column(found, _type(name)) for name, found in zip(names, zip(*values, strict=True), strict=True)}
    if len(of) > len(entries):  # an entry's values repeated on each of its results' rows
        indices = column(of, pa.int64())
        made = {name: found.take(indices) for name, found in made.items()}
    made.update(
        (name, column(found, _type(name)))
        for name, found in zip(_RESULT_NAMES, zip(*results, strict=True), strict=True)
    )
    return pa.RecordBatch.from_arrays([made[name] for name in SCORES_SCHEMA.names[2:]], SCORES_SCHEMA.names[2:])


def _type(name: str) -> pa.DataType:
    return SCORES_SCHEMA.field(name).type


class _Level:
    """The entries' (or samples') values of the waiting rows, each once, and which of them each row repeats."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names
        self._values: list[Values] = []
        self._of = array("q")
        """Per waiting row, the position of its values in `_values`."""

    def add(self, values: Values, rows: int) -> None:
        """`values` for the next `rows` rows."""
        self._of.extend(repeat(len(self._values), rows))
        self._values.append(values)

    def take(self, size: int) -> dict[str, pa.Array]:
        """The first `size` waiting rows' columns (they stop waiting): each value made once, then repeated."""
        used = self._of[size - 1] + 1  # the first row's values are the first
        columns = zip(*self._values[:used], strict=True)
        made = [column(values, _type(name)) for name, values in zip(self._names, columns, strict=True)]
        if used < size:  # values repeated onto several rows (an entry's samples, a sample's results)
            indices = column(self._of[:size], pa.int64())
            made = [values.take(indices) for values in made]
        # Values no waiting row repeats any more are dropped; positions start from 0 again.
        left = self._of[size:]
        keep = left[0] if left else len(self._values)
        del self._values[:keep]
        self._of = array("q", (position - keep for position in left))
        return dict(zip(self._names, made, strict=True))
