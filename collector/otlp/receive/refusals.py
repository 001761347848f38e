"""Refused requests, counted by kind (`HTTP 401`, `gRPC INVALID_ARGUMENT`, ...) and said while running.

A receiver that only answers its refusals leaves whoever runs it blind: an app sending with the
wrong token, content type or size loses every span and nothing on the terminal says so. Each kind
is said on the first refusal, then at most once per `every` seconds with the number of refusals
of that kind since the line before, so a client retrying in a loop cannot flood the terminal. The
reason quoted may hold what a client sent (a content type): it goes through `inline`, never raw.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from evaltrace.collector.terminal import inline

logger = logging.getLogger("evaltrace")

EVERY_SECONDS = 10.0
"""At most one line per kind in this many seconds."""
_WHY_CHARS = 200
"""A reason longer than this (a decoder's message quoting a request) is cut."""


def _log(line: str) -> None:
    logger.warning("%s", line)


@dataclass
class _Kind:
    said_at: float
    unsaid: int = 0
    """Refusals of this kind since its last line."""


class RefusalLog:
    """Thread-safe counts of refused requests by kind; `say` gets the rate-limited lines."""

    def __init__(
        self,
        say: Callable[[str], None] | None = None,
        every: float = EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._say = say or _log
        self._every = every
        self._clock = clock
        self._counts: dict[str, int] = {}
        self._kinds: dict[str, _Kind] = {}
        self._lock = threading.Lock()

    def note(self, kind: str, why: str) -> None:
        """Count one refusal of `kind` (e.g. `HTTP 413`) and say it, unless said less than `every` seconds ago."""
        now = self._clock()
        with self._lock:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            state = self._kinds.get(kind)
            if state is not None and now - state.said_at < self._every:
                state.unsaid += 1
                return
            before = state.unsaid if state is not None else 0
            self._kinds[kind] = _Kind(now)
        more = f" (and {before} more since the last such line)" if before else ""
        self._say(f"evaltrace collect: refused a request: {kind}: {inline(why[:_WHY_CHARS])}{more}")

    def counts(self) -> dict[str, int]:
        """Refusals so far by kind, in the order the kinds first occurred."""
        with self._lock:
            return dict(self._counts)


def summary(counts: dict[str, int]) -> str:
    """`HTTP 401 x3, gRPC INVALID_ARGUMENT x1`, sorted by kind; empty when nothing was refused."""
    return ", ".join(f"{kind} x{count}" for kind, count in sorted(counts.items()))
