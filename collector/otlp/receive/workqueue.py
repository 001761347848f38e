"""The bounded queue between request handling and the writer, counted in decoded objects.

Each request weighs its spans with their events and links, or its log records (`Work.weight`).

Handlers `offer` decoded work and wait a moment for room when the queue holds `capacity` items
(slowing a fast sender down, as a full socket would); when there is still no room the request is
refused (the caller answers with a retryable status) rather than buffered, so memory stays
bounded however fast clients send: at most the queue plus one decoded request per handler. A
request larger than the whole capacity is still taken when the queue is empty, so no valid
request is refused forever. After `close()` offers are refused and `take` returns what is left,
then None.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import Any


class Signal(Enum):
    """What a request carries."""

    TRACES = "traces"
    LOGS = "logs"


@dataclass(frozen=True)
class Work:
    """Decoded items of one accepted request."""

    signal: Signal
    items: list[Any]
    weight: int
    """What it holds in the queue: its items, with their events and links."""


class WorkQueue:
    """Accepted work waiting for the writer, at most `capacity` items (one oversized request aside)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._works: deque[Work] = deque()
        self._items = 0
        self._closed = False
        self._cond = threading.Condition()

    @property
    def items(self) -> int:
        """Items waiting now."""
        return self._items

    def offer(self, work: Work, wait: float = 0.0) -> bool:
        """Queue `work` once there is room (or the queue is empty), waiting up to `wait` seconds for it.

        False when there was no room in time, or the queue is closed.
        """
        with self._cond:
            self._cond.wait_for(lambda: self._closed or self._has_room(work.weight), timeout=wait)
            if self._closed or not self._has_room(work.weight):
                return False
            self._works.append(work)
            self._items += work.weight
            self._cond.notify_all()
            return True

    def _has_room(self, count: int) -> bool:
        return not self._works or self._items + count <= self.capacity

    def take(self, max_items: int) -> list[Work] | None:
        """Wait for work and take it (whole requests, about `max_items` items); None once closed and empty."""
        with self._cond:
            while not self._works and not self._closed:
                self._cond.wait()
            if not self._works:
                return None
            taken = [self._works.popleft()]
            count = taken[0].weight
            while self._works and count + self._works[0].weight <= max_items:
                taken.append(self._works.popleft())
                count += taken[-1].weight
            self._items -= count
            self._cond.notify_all()  # room for the handlers waiting in `offer`
            return taken

    def close(self) -> None:
        """Refuse further offers; the writer takes what is left."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
