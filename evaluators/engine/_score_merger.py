"""Entry-level scores over a case's samples, merged in any order (see `ScoreMerger`).

`_aggregate.py` decides a case from its tally, of which these are the scores; both put samples in
report order by `SampleKey`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from operator import itemgetter
from typing import TypeVar

from pydantic import TypeAdapter

from evaltrace.evaluators.engine._numbers import ExactSum
from evaltrace.evaluators.results.report.model import ScoreResult
from evaltrace.evaluators.results.report.sample_row import ScoreRow, scores_json

_T = TypeVar("_T")

SampleKey = tuple[datetime, str]
"""Where a sample goes in its entry (`sample_order`): start time, then trace id."""

Keyed = tuple[SampleKey, _T]


def earlier(current: Keyed[_T] | None, candidate: Keyed[_T] | None) -> Keyed[_T] | None:
    """Of two keyed values, the one whose sample comes first (either may be missing)."""
    if current is None or (candidate is not None and candidate[0] < current[0]):
        return candidate
    return current


SCORES = TypeAdapter(list[ScoreResult])
"""A list of scores to and from JSON: kept as JSON while a case waits, and how an entry's scores are spliced."""


class ScoreMerger:
    """Entry-level scores over samples, added in any order and mergeable, without keeping the samples.

    One sample: its own scores. Several: one row per (scorer, turn, occurrence) with the number of
    passing samples, the first failure's reason, the first error and the mean value, "first" by
    `sample_order`; rows in the order they first appear in that order.
    """

    __slots__ = ("_samples", "_first", "_groups")

    def __init__(self) -> None:
        self._samples = 0
        self._first: tuple[SampleKey, bytes] | None = None
        """The earliest sample's scores as JSON: a case keeps them until the end of the run, and as
        models (details and all) they were a quarter of the objects the cyclic GC scanned."""
        self._groups: dict[tuple[str, int | None, int], _Merged] = {}
        """Every sample's scores once there are two or more; a lone sample's scores are the entry's
        (most cases have one), so it is grouped only when a second one comes."""

    def add(self, keys: Sequence[SampleKey], scores: Sequence[Sequence[ScoreRow]]) -> None:
        """Count the scores of the samples at `keys` (their `sample_order`), `scores[i]` the sample's at `keys[i]`."""
        if not keys:
            return
        before, self._samples = self._samples, self._samples + len(keys)
        if self._samples >= 2:
            if before == 1 and self._first is not None:
                self._group_json(self._first)
            self._group(keys, scores)
        first = min(range(len(keys)), key=keys.__getitem__)  # the earliest; of equal keys, the first given
        if self._first is None or keys[first] < self._first[0]:
            self._first = (keys[first], scores_json(scores[first]))

    def _group_json(self, first: tuple[SampleKey, bytes]) -> None:
        self._group([first[0]], [[ScoreRow.of(score) for score in SCORES.validate_json(first[1])]])

    def _group(self, keys: Sequence[SampleKey], scores: Sequence[Sequence[ScoreRow]]) -> None:
        """Group the samples' scores: by column where they share their scorers (a case's rows the warm path keeps)."""
        names = [(score.scorer, score.turn) for score in scores[0]]
        if any([(score.scorer, score.turn) for score in row] != names for row in scores[1:]):
            for key, row in zip(keys, scores, strict=True):
                self._group([key], [row])
            return
        occurrence: dict[tuple[str, int | None], int] = {}
        earliest = min(keys)
        for position, (group, column) in enumerate(zip(names, zip(*scores, strict=True), strict=True)):
            occurrence[group] = occurrence.get(group, 0) + 1
            merged = self._groups.get((*group, occurrence[group]))
            if merged is None:
                merged = self._groups[(*group, occurrence[group])] = _Merged(*group, (earliest, position))
            merged.add(keys, earliest, position, column)

    def merge(self, other: ScoreMerger) -> None:
        """Add the samples `other` counted."""
        if self._samples + other._samples >= 2:
            for side in (self, other):
                if side._samples == 1 and side._first is not None:  # a lone sample, not grouped yet
                    self._group_json(side._first)
        self._samples += other._samples
        self._first = earlier(self._first, other._first)
        if other._samples < 2:
            return
        for group, theirs in other._groups.items():
            ours = self._groups.get(group)
            if ours is None:
                self._groups[group] = theirs
            else:
                ours.merge(theirs)

    def result_json(self) -> bytes:
        """The entry-level scores as a JSON list (what `result` gives, dumped)."""
        if self._samples == 1 and self._first is not None:
            return self._first[1]
        return SCORES.dump_json(self.result())

    def result(self) -> list[ScoreResult]:
        """The entry-level scores."""
        if self._samples == 1 and self._first is not None:
            return SCORES.validate_json(self._first[1])
        ordered = sorted(self._groups.values(), key=lambda merged: merged.seen)
        return [merged.result(self._samples) for merged in ordered]


class _Merged:
    """One scorer's rows over samples (see `ScoreMerger`)."""

    def __init__(self, scorer: str, turn: int | None, seen: tuple[SampleKey, int]) -> None:
        self.scorer, self.turn = scorer, turn
        self.seen = seen
        """Where the row first appears: the earliest sample's key and the row's position in it."""
        self.applicable = self.failed = 0
        self.values = ExactSum()
        self.first_failure: tuple[SampleKey, str] | None = None
        self.error: tuple[SampleKey, str] | None = None

    def add(self, keys: Sequence[SampleKey], earliest: SampleKey, position: int, rows: Sequence[ScoreRow]) -> None:
        """Count this scorer's rows of the samples at `keys` (at `position` in each; `earliest`: the least key)."""
        self.seen = min(self.seen, (earliest, position))
        self.applicable += len(rows) - [row.passed for row in rows].count(None)
        # `str()`: as the report always formatted it, `None` included. Of equal keys, the first given is kept.
        failures = [(key, str(row.reason)) for key, row in zip(keys, rows, strict=True) if row.passed is False]
        if failures:
            self.failed += len(failures)
            self.first_failure = earlier(self.first_failure, min(failures, key=itemgetter(0)))
        for value, times in Counter([row.value for row in rows if row.value is not None]).items():
            self.values.add(value, times)  # a case's samples' values are mostly a few, alike
        errors = [(key, row.error) for key, row in zip(keys, rows, strict=True) if row.error is not None]
        if errors:
            self.error = earlier(self.error, min(errors, key=itemgetter(0)))

    def merge(self, other: _Merged) -> None:
        self.seen = min(self.seen, other.seen)
        self.applicable += other.applicable
        self.failed += other.failed
        self.values.merge(other.values)
        self.first_failure = earlier(self.first_failure, other.first_failure)
        self.error = earlier(self.error, other.error)

    def result(self, n_samples: int) -> ScoreResult:
        passed = None if not self.applicable else not self.failed
        reason = f"passed in {self.applicable - self.failed} of {n_samples} samples"
        if self.first_failure is not None:
            reason += f"; first failure: {self.first_failure[1]}"
        value = self.values.mean()
        error = self.error[1] if self.error else None
        return ScoreResult(scorer=self.scorer, passed=passed, value=value, reason=reason, error=error, turn=self.turn)
