"""A time limit on each scorer call, so one runaway scorer cannot hang a run.

Rule scorers are synchronous Python called inline on the scoring thread, and a thread cannot
stop another one. On platforms with POSIX signals (Linux, macOS), when scoring runs on the main
thread, a watchdog thread checks the call in progress every tick and, once it has run past the
limit, sends SIGALRM to the main thread; the handler raises `ScorerTimeout` there, which
unwinds the scorer. The hot path pays two assignments and one clock read per call (setting an
interval timer around each call costs a system call each way, several times more). Python code
is stopped at the next bytecode; a call blocked inside C code that does not check for signals
is stopped when it returns. The handler chains to any SIGALRM handler installed before it
(pytest-timeout, an application's own), and the previous handler is restored when scoring ends.

Elsewhere (Windows, or scoring from a thread other than the main one) each call runs on a
helper thread that the scoring thread waits for up to the limit; a call past it is abandoned
there, still running, and scoring goes on with a fresh helper. That costs a thread hand-off per
call and, for a scorer that never returns, a thread spinning until the process exits.

Async scorers are awaited under `asyncio.wait_for` by the engine; one that blocks its event
loop without awaiting cannot be interrupted that way. Judge scorers are bounded by the judge's
own request timeout instead (their calls include waiting for a slot under the judge's
concurrency limit, which is not the scorer's time).
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_SCORER_TIMEOUT = 60.0
"""Seconds one scorer may take on one entry by default (rule scorers take micro- to milliseconds)."""


class ScorerTimeout(BaseException):
    """Raised inside a scorer that ran past its time limit.

    A `BaseException`, so that the `except Exception` of a scorer (or of `run_scorer`) does not
    swallow it: the engine turns it into the scorer's error result.
    """


class Limiter:
    """Runs scorer calls under a time limit (see the module docstring for how)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def call(self, fn: Callable[[], T]) -> T:
        """`fn()`, or `ScorerTimeout` once it has run `seconds`."""
        raise NotImplementedError


class _SignalLimiter(Limiter):
    """Main-thread calls, interrupted by SIGALRM sent by a watchdog thread."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self._started: float | None = None
        """Monotonic start of the call in progress, `None` between calls."""
        self._raised = False
        """Whether the call in progress was already interrupted (once per call)."""
        self._stop = threading.Event()
        self._main = threading.main_thread().ident
        self._previous: Any = None

    def call(self, fn: Callable[[], T]) -> T:
        self._raised = False
        self._started = time.monotonic()
        try:
            return fn()
        finally:
            self._started = None

    def start(self) -> None:
        self._previous = signal.signal(signal.SIGALRM, self._on_alarm)
        tick = min(max(self.seconds / 20, 0.01), 0.5)
        threading.Thread(target=self._watch, args=(tick,), name="evaltrace-scorer-watchdog", daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        signal.signal(signal.SIGALRM, self._previous)

    def _overdue(self) -> bool:
        started = self._started
        return started is not None and not self._raised and time.monotonic() - started >= self.seconds

    def _watch(self, tick: float) -> None:
        signalled: float | None = None  # the start time of the call last signalled
        while not self._stop.wait(tick):
            started = self._started
            if started is not None and started != signalled and self._overdue() and self._main is not None:
                signalled = started
                signal.pthread_kill(self._main, signal.SIGALRM)

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        if self._overdue():
            self._raised = True
            raise ScorerTimeout
        if callable(self._previous):  # not ours: someone else's alarm
            self._previous(signum, frame)


class _ThreadLimiter(Limiter):
    """Calls on a helper thread, abandoned past the limit."""

    def __init__(self, seconds: float) -> None:
        super().__init__(seconds)
        self._jobs: queue.SimpleQueue[Callable[[], None]] | None = None

    def call(self, fn: Callable[[], T]) -> T:
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = queue.SimpleQueue()
            threading.Thread(target=_serve, args=(jobs,), name="evaltrace-scorer", daemon=True).start()
        done = threading.Event()
        outcome: list[Any] = []

        def job() -> None:
            try:
                outcome.append((True, fn()))
            except BaseException as exc:  # handed back to the caller as it is
                outcome.append((False, exc))
            done.set()

        jobs.put(job)
        if not done.wait(self.seconds):
            self._jobs = None  # that thread is stuck in the call: the next call gets a new one
            raise ScorerTimeout
        ok, value = outcome[0]
        if not ok:
            raise value
        result: T = value
        return result


def _serve(jobs: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        jobs.get()()


_LIMITER: ContextVar[Limiter | None] = ContextVar("evaltrace_scorer_limiter", default=None)


def current_limiter() -> Limiter | None:
    """The limiter of the scoring run in progress (`None`: no limit)."""
    return _LIMITER.get()


@contextlib.contextmanager
def scorer_time_limit(seconds: float | None) -> Iterator[Limiter | None]:
    """Put scorer calls made inside the block under a limit of `seconds` (`None`: no limit)."""
    if seconds is None:
        token = _LIMITER.set(None)
        try:
            yield None
        finally:
            _LIMITER.reset(token)
        return
    usable = hasattr(signal, "SIGALRM") and hasattr(signal, "pthread_kill")
    if usable and threading.current_thread() is threading.main_thread():
        limiter: Limiter = _SignalLimiter(seconds)
    else:
        limiter = _ThreadLimiter(seconds)
    if isinstance(limiter, _SignalLimiter):
        limiter.start()
    token = _LIMITER.set(limiter)
    try:
        yield limiter
    finally:
        _LIMITER.reset(token)
        if isinstance(limiter, _SignalLimiter):
            limiter.stop()


def timeout_message(name: str, seconds: float) -> str:
    """What the error result of a scorer stopped at its limit says."""
    return f"scorer {name!r} ran past its time limit of {seconds:g} s and was stopped (--scorer-timeout)"
