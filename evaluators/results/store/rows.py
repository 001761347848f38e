"""Report entries as rows of the scores table, gathered column by column in bounded batches.

A row is an entry's columns, then its sample's, then one scorer result's (`store/sides.py` packs a
sample's part when the sample is parked; `ScorerIndex` pairs the results of a whole entry with their
scorers when the store is given typed entries instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import pyarrow as pa

from evaltrace.evaluators.results.report.model import EntryResult
from evaltrace.evaluators.results.report.sample_row import SampleRow
from evaltrace.evaluators.results.report.writer import EntryFields, ReportEntry
from evaltrace.evaluators.results.store.arrays import column
from evaltrace.evaluators.results.store.identities import ScorerPairing
from evaltrace.evaluators.results.store.schema import SCORES_SCHEMA
from evaltrace.evaluators.results.store.sides import (
    ERROR_AT,
    RESULT_COLUMNS,
    SampleSide,
    micros,
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
_ROW_ORDER = (*_ENTRY_COLUMNS, *_SAMPLE_COLUMNS, *RESULT_COLUMNS, "details")
"""The order rows are gathered in: an entry's values, then a sample's, then a result's (not the schema's)."""
_NO_SAMPLE = (None,) * len(_SAMPLE_COLUMNS)
_NO_RESULT = (None,) * (len(RESULT_COLUMNS) + 1)
_ERROR_AT = len(_ENTRY_COLUMNS) + len(_SAMPLE_COLUMNS) + ERROR_AT

Values = tuple[Any, ...]


class ScoreRows:
    """Rows of the scores table, gathered as tuples and handed out as Arrow batches of `batch_rows` rows.

    A row is built as one tuple (an entry's values, its sample's, the result's); a batch's rows are
    turned into columns at once (`zip`) and Arrow arrays are made once per batch. That keeps the
    store to a small share of scoring time.
    """

    def __init__(self, run: RunContext, index: ScorerIndex, batch_rows: int = 8192) -> None:
        assert sorted(_ROW_ORDER) == sorted(SCORES_SCHEMA.names)
        self._run = run
        self._started = micros(run.started_at)
        self._index = index
        self._batch_rows = batch_rows
        self._rows: list[Values] = []
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
        rows = self._rows
        before = len(rows)
        entry = self._entry_values(entry_index, fields)
        if not samples:
            rows.append(entry + _NO_SAMPLE + _NO_RESULT)
        for sample_index, (values, trace_id, results) in enumerate(samples):
            start = (*entry, sample_index, *values)
            if results:
                rows.extend([start + result for result in results])
            else:
                rows.append(start + (trace_id,) + _NO_RESULT[1:])
        self.total += len(rows) - before
        batches = []
        while len(rows) >= self._batch_rows:
            batches.append(self._batch(self._batch_rows))
        return batches

    def flush(self) -> pa.RecordBatch | None:
        """The rows still waiting, as one batch (`None` when there are none)."""
        return self._batch(len(self._rows)) if self._rows else None

    def _batch(self, size: int) -> pa.RecordBatch:
        """The first `size` waiting rows as a batch (they stop waiting)."""
        columns = list(zip(*self._rows[:size], strict=True))
        del self._rows[:size]
        errors = columns[_ERROR_AT]
        self.errors += len(errors) - errors.count(None)
        # Not `pa.array`: see `arrays.py` (it would import pandas for the first batch).
        arrays = {
            name: column(values, SCORES_SCHEMA.field(name).type)
            for name, values in zip(_ROW_ORDER, columns, strict=True)
        }
        return pa.RecordBatch.from_arrays([arrays[name] for name in SCORES_SCHEMA.names], schema=SCORES_SCHEMA)

    def _entry_values(self, entry_index: int, entry: EntryFields) -> Values:
        min_samples = self._index.rules(entry.case_id).min_samples if entry.rule is not None else None
        return (
            *(self._run.run_id, self._started, entry_index, entry.case_id, entry.tier, entry.tags, entry.rule),
            *(min_samples, entry.status, entry.passed, entry.pass_rate),
        )
