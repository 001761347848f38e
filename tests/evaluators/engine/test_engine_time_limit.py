"""Each scorer call runs under a time limit: a scorer that hangs fails its entry, the run goes on."""

from __future__ import annotations

import asyncio
import signal
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.model import Report
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec, load_spec


@register
class Spins(Scorer):
    """Never returns: a pure-Python busy loop."""

    name: ClassVar[str] = "t_limit_spins"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        while True:
            pass


RELEASE = threading.Event()


@register
class SpinsUntilReleased(Scorer):
    """A busy loop that the test ends: an abandoned call must not spin on through the rest of the suite."""

    name: ClassVar[str] = "t_limit_spins_until_released"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        while not RELEASE.is_set():
            pass
        return self.result(True)


@register
class Sleeps(Scorer):
    """Blocks in a system call for far longer than any limit of these tests."""

    name: ClassVar[str] = "t_limit_sleeps"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        time.sleep(60)
        return self.result(True)


@register
class AsyncSleeps(Scorer):
    """An async scorer that awaits far longer than any limit of these tests."""

    name: ClassVar[str] = "t_limit_async_sleeps"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        raise AssertionError("the engine awaits ascore")

    async def ascore(self, trace: Trace, case: Any | None = None) -> Score:
        await asyncio.sleep(60)
        return self.result(True)


@register
class Quick(Scorer):
    """Passes at once."""

    name: ClassVar[str] = "t_limit_quick"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.result(True, 1.0, "fine")


def spec(tmp_path: Path, scorers: list[str]) -> LoadedSpec:
    path = tmp_path / "evals.yaml"
    cases = "\n".join(f"  - {{id: c{i}, input: q{i}}}" for i in range(3))
    path.write_text(textwrap.dedent(f"scorers: [{', '.join(scorers)}]\ncases:\n{cases}\n"), encoding="utf-8")
    return load_spec(path)


def traces() -> list[Trace]:
    return [Trace(trace_id=f"{i:032x}", input=f"q{i}", output="ok", status="success") for i in range(3)]


def timed_scores(report: Report, name: str) -> list[Any]:
    return [s for entry in report.entries for sample in entry.samples for s in sample.scores if s.scorer == name]


@pytest.mark.parametrize("scorer", ["t_limit_spins", "t_limit_sleeps", "t_limit_async_sleeps"])
def test_a_hanging_scorer_fails_each_entry_with_an_error_naming_it_and_the_run_goes_on(
    tmp_path: Path, scorer: str
) -> None:
    started = time.monotonic()
    report = scoring.score(
        iter(traces()), spec(tmp_path, [scorer, "t_limit_quick"]), ScoreOptions(scorer_timeout=0.3)
    ).report
    assert time.monotonic() - started < 6  # 3 entries x 0.3 s, plus the watchdog's tick
    assert report.passed is False and [e.status for e in report.entries] == ["failed"] * 3
    for result in timed_scores(report, scorer):
        assert result.passed is False and result.error == "ScorerTimeout"
        assert result.reason == f"scorer {scorer!r} ran past its time limit of 0.3 s and was stopped (--scorer-timeout)"
        assert result.details == {"time_limit_seconds": 0.3}
    assert [s.passed for s in timed_scores(report, "t_limit_quick")] == [True] * 3


def test_scoring_from_another_thread_abandons_the_hanging_call(tmp_path: Path) -> None:
    loaded = spec(tmp_path, ["t_limit_spins_until_released", "t_limit_quick"])
    reports: list[Report] = []
    worker = threading.Thread(
        target=lambda: reports.append(scoring.score(iter(traces()), loaded, ScoreOptions(scorer_timeout=0.2)).report)
    )
    try:
        worker.start()
        worker.join(timeout=20)
    finally:
        RELEASE.set()  # the abandoned calls end
    assert not worker.is_alive() and len(reports) == 1
    assert [s.error for s in timed_scores(reports[0], "t_limit_spins_until_released")] == ["ScorerTimeout"] * 3
    assert [s.passed for s in timed_scores(reports[0], "t_limit_quick")] == [True] * 3


def test_the_previous_alarm_handler_is_chained_and_restored(tmp_path: Path) -> None:
    heard: list[int] = []

    def previous(signum: int, frame: Any) -> None:
        heard.append(signum)

    before = signal.signal(signal.SIGALRM, previous)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)  # someone else's alarm, going off while scoring

        @register
        class Waits(Scorer):
            name: ClassVar[str] = "t_limit_waits_a_bit"

            def score(self, trace: Trace, case: Any | None = None) -> Score:
                time.sleep(0.2)
                return self.result(True)

        report = scoring.score(iter(traces()[:1]), spec(tmp_path, ["t_limit_waits_a_bit"]), ScoreOptions()).report
        # The foreign alarm went to its own handler, and did not stop a scorer within its limit.
        assert [s.passed for s in timed_scores(report, "t_limit_waits_a_bit")] == [True]
        assert heard == [signal.SIGALRM]
        assert signal.getsignal(signal.SIGALRM) is previous
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def test_no_limit_and_a_bad_limit() -> None:
    assert ScoreOptions().scorer_timeout == 60.0
    assert ScoreOptions(scorer_timeout=None).scorer_timeout is None
    with pytest.raises(ValueError, match="scorer_timeout must be more than 0 seconds"):
        ScoreOptions(scorer_timeout=0)
