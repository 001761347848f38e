"""Report entries as rows of the scores table, gathered column by column in bounded batches.

A report's score result names its scorer but not the scorer's version or configuration hash;
a case's scorers do, and results come in their order (per turn in a conversation). `ScorerIndex`
pairs them up: the i-th result of a turn is the i-th scorer of that turn when the names agree,
else the first scorer of that name; results no scorer made (a conversation's missing turn) have
neither.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import pyarrow as pa

from evaltrace.evaluators.report.model import EntryResult
from evaltrace.evaluators.scorers.base import Scorer
from evaltrace.evaluators.spec.loader import LoadedSpec
from evaltrace.evaluators.store.arrays import column
from evaltrace.evaluators.store.schema import SCORES_SCHEMA
from evaltrace.evaluators.store.sides import SampleSide, SideScore, micros, sample_side


class Scored(Protocol):
    """A scorer result, as far as pairing it with its scorer goes."""

    @property
    def turn(self) -> int | None:
        """The turn (from 1) in a conversation, else `None`."""

    @property
    def scorer(self) -> str:
        """The scorer's name."""


class ScorerIdentity(NamedTuple):
    """What identifies a scorer's results across runs."""

    name: str
    version: int
    config_hash: str


class CaseRules(NamedTuple):
    """A case's repeat rule fields the scores table carries."""

    min_samples: int | None


class ScorerIndex:
    """Each entry's scorers (per turn) and repeat settings: from a spec, or the defaults for every trace."""

    def __init__(self, spec: LoadedSpec | None, defaults: Sequence[Scorer] = ()) -> None:
        self._spec = spec
        self._defaults = (tuple(defaults),)
        self._hashes: dict[int, ScorerIdentity] = {}
        self._min_samples = (
            {case.id: spec.spec.repeat_for(case).min_samples for case in spec.cases} if spec is not None else {}
        )

    def turns(self, case_id: str | None) -> tuple[tuple[Scorer, ...], ...]:
        """The scorers of each turn of the entry (one tuple for a single-turn case or a trace)."""
        if self._spec is None:
            return self._defaults
        return self._spec.case_scorers.get(case_id or "", ())

    def rules(self, case_id: str | None) -> CaseRules:
        """The case's `min_samples` (`None` without a spec)."""
        return CaseRules(self._min_samples.get(case_id or ""))

    def identities(self, case_id: str | None, scores: Sequence[Scored]) -> list[ScorerIdentity | None]:
        """The scorer behind each of a sample's results, in order (`None` where no scorer made it)."""
        turns = self.turns(case_id)
        position: dict[int | None, int] = {}
        found: list[ScorerIdentity | None] = []
        for score in scores:
            index = position[score.turn] = position.get(score.turn, -1) + 1
            turn = (score.turn or 1) - 1
            scorers = turns[turn] if turn < len(turns) else ()
            scorer = scorers[index] if index < len(scorers) and scorers[index].name == score.scorer else None
            scorer = scorer or next((s for s in scorers if s.name == score.scorer), None)
            found.append(None if scorer is None else self._identity(scorer))
        return found

    def _identity(self, scorer: Scorer) -> ScorerIdentity:
        # Hashed once per scorer object: a spec's global scorers are shared by all its cases.
        known = self._hashes.get(id(scorer))
        if known is None:
            known = self._hashes[id(scorer)] = ScorerIdentity(scorer.name, scorer.version, scorer.config_hash())
        return known


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
_SCORE_COLUMNS = ("trace_id", "turn", "scorer", "scorer_version", "config_hash", "passed", "value", "reason", "error")
_ROW_ORDER = (*_ENTRY_COLUMNS, *_SAMPLE_COLUMNS, *_SCORE_COLUMNS, "details")
"""The order rows are gathered in: an entry's values, then a sample's, then a result's (not the schema's)."""
_NO_SAMPLE = (None,) * len(_SAMPLE_COLUMNS)
_NO_RESULT = (None,) * (len(_SCORE_COLUMNS) + 1)

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
        """Of those, results where a scorer could not run."""

    def add_entry(self, entry_index: int, entry: EntryResult) -> Iterator[pa.RecordBatch]:
        """Add the entry's rows; yields a batch each time `batch_rows` rows are waiting."""
        return self.add_sides(entry_index, entry, [sample_side(sample) for sample in entry.samples])

    def add_sides(self, entry_index: int, head: EntryResult, samples: Sequence[SampleSide]) -> Iterator[pa.RecordBatch]:
        """`add_entry` from the entry without its samples (`head`) and its samples' values, in order."""
        rows = self._rows
        before = len(rows)
        rows.extend(self._rows_of(entry_index, head, samples))
        self.total += len(rows) - before
        while len(rows) >= self._batch_rows:
            yield self._batch(self._batch_rows)

    def _rows_of(self, entry_index: int, entry: EntryResult, samples: Sequence[SampleSide]) -> Iterator[Values]:
        head = self._entry_values(entry_index, entry)
        if not samples:
            yield head + _NO_SAMPLE + _NO_RESULT
        for sample_index, sample in enumerate(samples):
            start = (
                *head,
                *(sample_index, sample.conversation_id, sample.start_time, sample.duration_seconds),
                *(sample.input_tokens, sample.output_tokens, sample.cost_usd),
            )
            if not sample.scores:
                yield start + (sample.trace_id,) + _NO_RESULT[1:]
            identities = self._index.identities(entry.case_id, sample.scores)
            for score, identity in zip(sample.scores, identities, strict=True):
                self.errors += score.error is not None
                version, config_hash = (
                    (identity.version, identity.config_hash) if identity is not None else (None, None)
                )
                yield (
                    *start,
                    *(_trace_of(sample, score), score.turn, score.scorer, version, config_hash, score.passed),
                    *(score.value, score.reason, score.error, score.details),
                )

    def flush(self) -> pa.RecordBatch | None:
        """The rows still waiting, as one batch (`None` when there are none)."""
        return self._batch(len(self._rows)) if self._rows else None

    def _batch(self, size: int) -> pa.RecordBatch:
        """The first `size` waiting rows as a batch (they stop waiting)."""
        columns = zip(*self._rows[:size], strict=True)
        del self._rows[:size]
        # Not `pa.array`: see `arrays.py` (it would import pandas for the first batch).
        arrays = {
            name: column(values, SCORES_SCHEMA.field(name).type)
            for name, values in zip(_ROW_ORDER, columns, strict=True)
        }
        return pa.RecordBatch.from_arrays([arrays[name] for name in SCORES_SCHEMA.names], schema=SCORES_SCHEMA)

    def _entry_values(self, entry_index: int, entry: EntryResult) -> Values:
        min_samples = self._index.rules(entry.case_id).min_samples if entry.rule is not None else None
        return (
            *(self._run.run_id, self._started, entry_index, entry.case_id, entry.tier, tuple(entry.tags), entry.rule),
            *(min_samples, entry.status, entry.passed, entry.pass_rate),
        )


def _trace_of(sample: SampleSide, score: SideScore) -> str | None:
    """The trace a result was computed on: a turn's own trace in a conversation, else the sample's."""
    if score.turn is None or not sample.trace_ids:
        return sample.trace_id
    return sample.trace_ids[score.turn - 1] if score.turn <= len(sample.trace_ids) else None
