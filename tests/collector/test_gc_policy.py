"""The scoring run's garbage-collection policy: raised inside the block, restored after it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evaltrace.collector.gc_policy import BULK_YOUNG_THRESHOLD, bulk_collections, collections_paused
from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "runs"


@pytest.fixture
def default_threshold() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield gc.get_threshold()
    gc.set_threshold(*before)


def test_young_threshold_raised_in_the_block_and_restored(default_threshold: tuple[int, int, int]) -> None:
    with bulk_collections():
        assert gc.get_threshold() == (BULK_YOUNG_THRESHOLD, 10, 10)
    assert gc.get_threshold() == default_threshold


def test_restored_when_the_block_raises(default_threshold: tuple[int, int, int]) -> None:
    with pytest.raises(RuntimeError), bulk_collections():
        raise RuntimeError("boom")
    assert gc.get_threshold() == default_threshold


@pytest.mark.parametrize("setting", [(0, 10, 10), (200_000, 5, 5)])
def test_a_programs_own_rarer_setting_is_kept(setting: tuple[int, int, int]) -> None:
    before = gc.get_threshold()
    gc.set_threshold(*setting)
    try:
        with bulk_collections():
            assert gc.get_threshold() == setting
        assert gc.get_threshold() == setting
    finally:
        gc.set_threshold(*before)


@pytest.mark.parametrize("enabled", [True, False])
def test_collections_paused_in_the_block_and_the_callers_state_restored(enabled: bool) -> None:
    before = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        with pytest.raises(RuntimeError), collections_paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if before else gc.disable)()


class _Kept:
    """A container the tests look for among each generation's objects."""


def _generation_of(item: object) -> int | None:
    return next((g for g in range(3) if any(o is item for o in gc.get_objects(generation=g))), None)


@pytest.fixture
def no_collections() -> Iterator[None]:
    """No automatic collection while a test looks at generations (one would move objects itself)."""
    before = gc.isenabled()
    gc.disable()
    yield
    (gc.enable if before else gc.disable)()


@pytest.mark.usefixtures("no_collections")
def test_settled_objects_move_to_the_oldest_generation_unscanned() -> None:
    with collections_paused():
        young = _Kept()
    assert _generation_of(young) == 0  # plain pause: left where it was made
    with collections_paused(settle=True):
        kept = _Kept()
    assert _generation_of(kept) == 2
    assert gc.get_freeze_count() == 0  # moved, not left frozen


@pytest.mark.usefixtures("no_collections")
def test_settling_leaves_a_programs_own_frozen_objects_frozen() -> None:
    frozen = _Kept()
    gc.freeze()
    try:
        with collections_paused(settle=True):
            kept = _Kept()
        # `unfreeze` would have released every frozen object (the count would be 0); the count
        # itself may drop meanwhile, as frozen objects are still freed by their reference counts.
        assert gc.get_freeze_count() > 0
        assert _generation_of(frozen) is None and _generation_of(kept) == 0
    finally:
        gc.unfreeze()


def test_a_scoring_run_scores_under_the_policy(
    default_threshold: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scorer running inside `scoring.score` sees the raised threshold; the caller's is back after."""
    from evaltrace.evaluators.engine import scoring

    seen: list[int] = []

    class Probe(Scorer):
        name: ClassVar[str] = "t_gc_probe"

        def score(self, trace: Trace, case: Any | None = None) -> Score:
            seen.append(gc.get_threshold()[0])
            return self.result(True, 1.0, "probe")

    monkeypatch.setattr(scoring, "default_scorers", lambda: (Probe(),))
    run = scoring.score([SAMPLES], None, scoring.ScoreOptions(cache=False, workers=1))
    assert run.report.counts.traces > 0
    assert seen and set(seen) == {BULK_YOUNG_THRESHOLD}
    assert gc.get_threshold() == default_threshold
