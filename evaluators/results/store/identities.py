"""Which scorer made each result of a sample: its name, version and configuration hash.

A report's score result names its scorer but not the scorer's version or configuration hash;
a case's scorers do, and results come in their order (per turn in a conversation). `ScorerPairing`
pairs them up: the i-th result of a turn is the i-th scorer of that turn when the names agree,
else the first scorer of that name; results no scorer made (a conversation's missing turn) have
neither. The engine pairs a sample's results when it parks the sample (in the process that scored
it, so a sharded run hashes each scorer in a worker), the score store when it is given whole entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec


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


class ScorerPairing:
    """Each entry's scorers (per turn): from a spec, or the defaults for every trace."""

    def __init__(self, spec: LoadedSpec | None, defaults: Sequence[Scorer] = ()) -> None:
        self._spec = spec
        self._defaults = (tuple(defaults),)
        self._hashes: dict[int, ScorerIdentity] = {}
        """Per scorer object; a spec's scorers with the hashes it computed when it was compiled."""
        if spec is not None:
            self._known(spec)

    def _known(self, spec: LoadedSpec) -> None:
        for case_id, turns in spec.case_scorers.items():
            scorers = [scorer for turn in turns for scorer in turn]
            for scorer, row in zip(scorers, spec.case_rows[case_id], strict=True):
                self._hashes[id(scorer)] = ScorerIdentity(scorer.name, scorer.version, spec.scorer_rows[row][2])

    def __getstate__(self) -> dict[str, object]:
        # The identities are kept by object id, which means nothing in another process (a Ray
        # worker unpickling the router could meet an unrelated scorer at a kept id): dropped.
        return {**self.__dict__, "_hashes": {}}

    def turns(self, case_id: str | None) -> tuple[tuple[Scorer, ...], ...]:
        """The scorers of each turn of the entry (one tuple for a single-turn case or a trace)."""
        if self._spec is None:
            return self._defaults
        return self._spec.case_scorers.get(case_id or "", ())

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
            found.append(None if scorer is None else self.identity(scorer))
        return found

    def identity(self, scorer: Scorer) -> ScorerIdentity:
        """`scorer`'s name, version and configuration hash."""
        # Kept per scorer object: a spec's global scorers are shared by all its cases.
        known = self._hashes.get(id(scorer))
        if known is None:
            known = self._hashes[id(scorer)] = ScorerIdentity(scorer.name, scorer.version, scorer.config_hash())
        return known
