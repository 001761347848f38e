"""How often the cyclic garbage collector runs during a bulk job (a scoring run, a rebuild).

CPython starts a young-generation collection every 700 net container allocations. A scoring run
allocates millions of short-lived, acyclic objects (records, scores, JSON values) that reference
counting frees on its own, so those collections find almost nothing, yet each one scans the young
objects, and every tenth promotes survivors towards the full collections that walk everything
alive (the spec's ~30 objects a case among them). Measured on 10,000 traces with one strict
trajectory each: a warm one-process scoring spent ~0.8 s of ~5.5 s CPU in them; with collections
every 50,000 allocations the same run took ~4.7 s, its peak memory unchanged (any cycle is still
collected, later).

The threshold is raised for the block only and restored after it, so a program that scores from
Python keeps its own setting; a program that disabled collections (threshold 0) or set a higher
threshold is left as it is. Forked workers inherit the setting.

Inside a run, the steps that make many objects and no cycles (decoding a batch of spans, rebuilding
a trace, decoding a batch of the traces table, loading a spec, writing the entries) pause
collections altogether (`collections_paused`): their passes over the new objects found nothing
and took more time than making them (3-5x when decoding 2,000 traces). The steps whose objects
outlive them (a decoded batch, the spec, the report) `settle` them too: moved to the oldest
generation unscanned. Left young, the first allocation after the pause would scan them all, a
middle collection again, and having survived both they counted towards full collections, each a
scan of everything alive (the 10,000-case spec's ~800,000 objects): 4 of them took 1.9 s of a warm
10,000-trace scoring. In the oldest generation they are still freed by their reference counts; a
cycle made meanwhile waits for the next full collection.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

BULK_YOUNG_THRESHOLD: Final = 50_000
"""Net container allocations between young collections inside a bulk job (CPython's default: 700)."""


@contextmanager
def collections_paused(*, settle: bool = False) -> Iterator[None]:
    """No cyclic collection inside the block (see the module docstring); the caller's state is restored.

    `settle`: what the block allocated and kept moves to the oldest generation after it (`freeze`
    then `unfreeze`: two list splices), skipped when the program froze objects itself, which
    `unfreeze` would release.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if settle and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


@contextmanager
def bulk_collections(young: int = BULK_YOUNG_THRESHOLD) -> Iterator[None]:
    """Young collections every `young` allocations inside the block (unless the program's are rarer)."""
    before = gc.get_threshold()
    if before[0] == 0 or before[0] >= young:
        yield
        return
    gc.set_threshold(young, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
