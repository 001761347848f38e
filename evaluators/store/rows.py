"""Report entries as rows of the scores table, gathered column by column in bounded batches.

A report's score result names its scorer but not the scorer's version or configuration hash;
a case's scorers do, and results come in their order (per turn in a conversation). `ScorerIndex`
pairs them up: the i-th result of a turn is the i-th scorer of that turn when the names agree,
else the first scorer of that name; results no scorer made (a conversation's missing turn) have
neither.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import pyarrow as pa

from evaltrace.evaluators.report.model import EntryResult, SampleResult, ScoreResult
from evaltrace.evaluators.scorers.base import Scorer
from evaltrace.evaluators.spec.loader import LoadedSpec
from evaltrace.evaluators.store.schema import SCORES_SCHEMA


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

    def identities(self, case_id: str | None, scores: Sequence[ScoreResult]) -> list[ScorerIdentity | None]:
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


class ScoreRows:
    """Rows of the scores table, gathered by column and handed out as Arrow batches of at most `batch_rows`."""

    def __init__(self, run: RunContext, index: ScorerIndex, batch_rows: int = 8192) -> None:
        self._run = run
        self._index = index
        self._batch_rows = batch_rows
        self._columns: dict[str, list[Any]] = {name: [] for name in SCORES_SCHEMA.names}
        self.total = 0
        """Rows added so far."""
        self.errors = 0
        """Of those, results where a scorer could not run."""

    def add_entry(self, entry_index: int, entry: EntryResult) -> Iterator[pa.RecordBatch]:
        """Add the entry's rows; yields a batch each time `batch_rows` rows are waiting."""
        base = self._entry_columns(entry_index, entry)
        if not entry.samples:
            yield from self._add(base, _empty_sample(), None, None)
        for sample_index, sample in enumerate(entry.samples):
            sample_columns = {**base, **_sample_columns(sample_index, sample)}
            if not sample.scores:
                yield from self._add(sample_columns, sample, None, None)
            identities = self._index.identities(entry.case_id, sample.scores)
            for score, identity in zip(sample.scores, identities, strict=True):
                yield from self._add(sample_columns, sample, score, identity)

    def flush(self) -> pa.RecordBatch | None:
        """The rows still waiting, as one batch (`None` when there are none)."""
        if not self._columns["run_id"]:
            return None
        batch = pa.RecordBatch.from_pydict(self._columns, schema=SCORES_SCHEMA)
        for values in self._columns.values():
            values.clear()
        return batch

    def _entry_columns(self, entry_index: int, entry: EntryResult) -> dict[str, Any]:
        return {
            "run_id": self._run.run_id,
            "run_started_at": self._run.started_at,
            "entry_index": entry_index,
            "case_id": entry.case_id,
            "tier": entry.tier,
            "tags": list(entry.tags),
            "rule": entry.rule,
            "min_samples": self._index.rules(entry.case_id).min_samples if entry.rule is not None else None,
            "entry_status": entry.status,
            "entry_passed": entry.passed,
            "entry_pass_rate": entry.pass_rate,
        }

    def _add(
        self, columns: dict[str, Any], sample: SampleResult, score: ScoreResult | None, scorer: ScorerIdentity | None
    ) -> Iterator[pa.RecordBatch]:
        row = {**columns, **_score_columns(score, scorer), "trace_id": _trace_of(sample, score)}
        for name, values in self._columns.items():
            values.append(row.get(name))
        self.total += 1
        self.errors += score is not None and score.error is not None
        if len(self._columns["run_id"]) >= self._batch_rows:
            batch = self.flush()
            if batch is not None:
                yield batch


def _empty_sample() -> SampleResult:
    return SampleResult(trace_id=None, status="not_applicable", passed=None, scores=[])


def _sample_columns(sample_index: int, sample: SampleResult) -> dict[str, Any]:
    return {
        "sample_index": sample_index,
        "conversation_id": sample.conversation_id,
        "sample_start_time": sample.start_time,
        "sample_duration_seconds": sample.duration_seconds,
        "sample_input_tokens": sample.usage.input_tokens,
        "sample_output_tokens": sample.usage.output_tokens,
        "sample_cost_usd": sample.cost_usd,
    }


def _score_columns(score: ScoreResult | None, scorer: ScorerIdentity | None) -> dict[str, Any]:
    if score is None:
        return {}
    return {
        "turn": score.turn,
        "scorer": score.scorer,
        "scorer_version": scorer.version if scorer is not None else None,
        "config_hash": scorer.config_hash if scorer is not None else None,
        "passed": score.passed,
        "value": score.value,
        "reason": score.reason,
        "error": score.error,
        "details": json.dumps(score.details, ensure_ascii=False, default=str) if score.details is not None else None,
    }


def _trace_of(sample: SampleResult, score: ScoreResult | None) -> str | None:
    """The trace a result was computed on: a turn's own trace in a conversation, else the sample's."""
    if score is None or score.turn is None or not sample.trace_ids:
        return sample.trace_id
    return sample.trace_ids[score.turn - 1] if score.turn <= len(sample.trace_ids) else None
