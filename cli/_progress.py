"""A progress bar on stderr for `score` and `run`, drawn only when stderr is a terminal.

When stderr is a pipe or a file (CI logs, `2>log`), nothing is drawn and rich is not even
imported. On a terminal the bar shows the count done of the total (when known), the time spent
and an estimate of the time left.

The bar is redrawn from the caller's thread, at most every `_REDRAW_S` seconds, never by a
refresh thread: scoring forks worker processes (`evaluators/engine/shards.py`), and a fork while another
thread holds the stderr lock could leave a worker waiting on it forever. A redraw costs well
under a millisecond and a count update a time check, so the bar does not slow scoring.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

_REDRAW_S = 0.2
"""Seconds between redraws: often enough to look live, rarely enough to cost nothing."""


class _Bar:
    """The count callback behind a drawn bar: records the count, redraws when it is time."""

    def __init__(self, progress: Progress, task: TaskID, total: int | None) -> None:
        self._progress = progress
        self._task = task
        self._total = total
        self._done = 0
        self._next_redraw = 0.0

    def __call__(self, done: int) -> None:
        """Take the count done so far (it only grows); redraw if the last redraw is old enough."""
        self._done = done
        now = time.monotonic()
        if now >= self._next_redraw:
            self._next_redraw = now + _REDRAW_S
            self.redraw()

    def redraw(self) -> None:
        """Draw the bar with the latest count."""
        # A total counted ahead (trace ids) can be passed when one recorded trace rebuilds as several.
        total = None if self._total is None else max(self._total, self._done)
        self._progress.update(self._task, completed=self._done, total=total, refresh=True)


def stderr_is_terminal() -> bool:
    """Whether stderr is a terminal that draws a bar (not a pipe, a file or a `TERM=dumb` one)."""
    try:
        interactive = sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced by an object without a file, or closed
        return False
    return interactive and os.environ.get("TERM", "") not in ("dumb", "unknown")


@contextmanager
def progress_bar(
    label: str, unit: str, total: Callable[[], int | None], *, shown: bool = True
) -> Iterator[Callable[[int], None] | None]:
    """A bar for `label` counting `unit` on stderr; yields its count callback, or `None` off a terminal.

    Args:
        label: what is being done (`scoring`).
        unit: what is counted, plural (`traces`).
        total: returns how many there will be (`None`: unknown); called only when a bar is drawn,
            so a count that costs a read is spent only on a terminal.
        shown: `False` draws no bar whatever stderr is (the caller's output shares the screen).
    """
    if not shown or not stderr_is_terminal():
        yield None
        return
    # Imported here: commands off a terminal never load rich.
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    expected = total()
    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        auto_refresh=False,  # no refresh thread: see the module docstring
        # stdout is the command's output: left alone. Lines printed on stderr meanwhile (a
        # logged warning) are printed above the bar instead of through it.
        redirect_stdout=False,
        redirect_stderr=True,
    )
    bar = _Bar(progress, progress.add_task(label, total=expected), expected)
    with progress:
        try:
            yield bar
        finally:
            bar.redraw()  # the final count, however little time passed since the last redraw
