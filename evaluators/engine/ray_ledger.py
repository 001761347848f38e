"""The judge pool's ledger on Ray: the run's request budget and the judge actors' counters.

One small actor (`RunLedger`) per run, never restarted. It keeps two things a judge actor must
not lose when its process dies and Ray restarts it (`ray_judges.JudgeWorker`):

- the request budget (`max_requests`): a token per request, retries included, for the whole
  cluster. A restarted budget would start full and let the run exceed `--judge-max-requests`, so
  if the ledger itself dies, every later request fails with a budget error (an error result per
  entry), never an unbounded run;
- each judge actor incarnation's counters (requests, retries, tokens, cache hits and misses,
  errors), pushed by the actor whenever one changes (`LedgeredSession`). At the end of the run
  the driver sums the live actors' final counters with the last counters of the dead ones, so the
  requests a dead actor sent, and their tokens, still count. The questions it had in flight are
  asked again of the restarted actor: their cache hits or misses (and their requests) count twice.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

from evaltrace.evaluators.scoring.judge import verdict as verdicts
from evaltrace.evaluators.scoring.judge.session import JudgeSession, JudgeStats
from evaltrace.evaluators.scoring.judge.settings import JudgeSettings

LEDGER_NAME = "evaltrace-judge-ledger"
_COUNTED = frozenset({"_errors", "_hits", "_misses"})
"""The session's own counters (the request counters are in its `Counters`, watched apart)."""


class RunLedger:
    """The run's budget and the judge actors' last counters; a sync actor: one call at a time."""

    def __init__(self, limit: int | None, pool: tuple[int, dict[str, Any]]) -> None:
        self.left = limit
        self.facts = pool
        self.counters: dict[str, JudgeStats] = {}

    def pool(self) -> tuple[int, dict[str, Any]]:
        """The judge pool's size and key-free settings, for the tasks that look the pool up."""
        return self.facts

    def take(self) -> bool:
        """Take one request; `False` once the budget is spent."""
        if self.left is None:
            return True
        if self.left <= 0:
            return False
        self.left -= 1
        return True

    def record(self, incarnation: str, stats: JudgeStats) -> None:
        """Keep a judge actor incarnation's latest counters (each actor sends them in order)."""
        self.counters[incarnation] = stats

    def recorded(self) -> dict[str, JudgeStats]:
        """Every incarnation's last counters, by incarnation."""
        return self.counters


class RemoteBudget:
    """A judge client's view of the ledger's budget (`None`: it died); a dead ledger is a spent budget, said so."""

    def __init__(self, ledger: Any, limit: int) -> None:
        self.ledger, self.limit = ledger, limit
        self.lost = False

    async def take(self) -> bool:
        """Take a token from the ledger.

        Raises:
            JudgeBudgetError: the ledger's process died: the budget is unknown, no request is sent.
        """
        from ray.exceptions import RayActorError

        try:
            if self.ledger is not None:
                allowed: bool = await self.ledger.take.remote()
                return allowed
        except RayActorError:
            pass
        self.lost = True
        raise verdicts.JudgeBudgetError(
            f"judge request budget lost: the Ray actor counting the {self.limit} requests of "
            "--judge-max-requests died, so no more requests are sent; this entry was not judged"
        )


class _WatchedCounters:
    """The session's request `Counters`, telling the session when one changes."""

    def __init__(self, counters: Any, changed: Callable[[], None]) -> None:
        object.__setattr__(self, "_inner", counters)
        object.__setattr__(self, "_changed", changed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)
        self._changed()


class LedgeredSession(JudgeSession):
    """A judge actor's session whose counters reach the ledger as they change.

    Pushes are sent one at a time, each with the counters of its moment, so the ledger holds this
    incarnation's counters up to the last change before the process died. The counters are plain
    attributes the session and its client assign in many places: watching the assignments catches
    every change without a hook in `JudgeSession` itself.
    """

    def __init__(self, settings: JudgeSettings, ledger: Any, budget: RemoteBudget | None) -> None:
        super().__init__(settings, budget)
        self.ledger = ledger
        self.incarnation = uuid.uuid4().hex
        self.remote_budget = budget
        self._dirty = False
        self._pushing: asyncio.Task[None] | None = None
        self._counters = _WatchedCounters(self._counters, self._changed)  # type: ignore[assignment]

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _COUNTED:
            self._changed()

    def final_stats(self) -> JudgeStats:
        """The counters, the budget marked spent when the ledger died under it."""
        stats = self.stats()
        lost = self.remote_budget is not None and self.remote_budget.lost
        return stats.model_copy(update={"budget_exhausted": stats.budget_exhausted or lost})

    def _changed(self) -> None:
        if not hasattr(self, "_pushing") or self.ledger is None:
            return  # still in __init__ (nothing counted yet), or no ledger to tell
        self._dirty = True
        if self._pushing is None or self._pushing.done():
            self._pushing = asyncio.get_running_loop().create_task(self._push())

    async def _push(self) -> None:
        from ray.exceptions import RayActorError

        while self._dirty:
            self._dirty = False
            try:
                await self.ledger.record.remote(self.incarnation, self.final_stats())
            except RayActorError:
                return  # the ledger died: this incarnation's counters still come from `finish`


def dead_incarnations(recorded: dict[str, JudgeStats], finished: set[str]) -> list[JudgeStats]:
    """The last counters of the incarnations that did not finish the run (killed, then restarted)."""
    return [stats for incarnation, stats in recorded.items() if incarnation not in finished]


def find_ledger() -> Any | None:
    """The run's ledger, by name (a handle argument would make Ray warn at every restart); `None`: it died."""
    import ray

    try:
        return ray.get_actor(LEDGER_NAME)
    except ValueError:
        return None
