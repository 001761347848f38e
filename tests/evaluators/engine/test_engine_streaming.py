"""Streaming scoring: entries go to a sink in report order, memory does not grow with the run."""

from __future__ import annotations

import gc
import json
import textwrap
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _engine_scorers import Boom, NotApplicable, OutputHas, SeesCase  # noqa: F401 - registers the test scorers

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.engine import _spill, scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.results.report.model import SampleResult, load_report
from evaltrace.evaluators.results.report.terminal import render_summary
from evaltrace.evaluators.results.report.writer import ReportEntry
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec, load_spec

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


MIXED = """\
confidence: 0.5
cases:
  - id: mean
    input: q-mean
    repeat: mean
    expect: {t_engine_output_has: {text: good}}
  - id: all
    input: q-all
    repeat: all
    expect: {t_engine_output_has: {text: good}}
  - id: pass-at-2
    input: q-k
    repeat: {rule: "pass@k", k: 2}
    expect: {t_engine_output_has: {text: good}}
  - id: boom
    input: q-boom
    expect: {t_engine_boom: {}}
  - id: never-seen
    input: q-missing
    expect: {t_engine_output_has: {text: good}}
  - id: too-few
    input: q-few
    repeat: {rule: all, min_samples: 3}
    expect: {t_engine_output_has: {text: good}}
  - id: chat
    turns:
      - {input: Hi, expect: {t_engine_sees_case: {}}}
      - {input: Again, expect: {t_engine_output_has: {text: good}}}
"""


def trace(n: int, text: str | None, output: str, *, start: float, conversation: str | None = None) -> Trace:
    begin = T0 + timedelta(seconds=start)
    return Trace(
        trace_id=f"{n:032x}",
        input=text,
        output=output,
        status="success",
        conversation_id=conversation,
        start_time=begin,
        end_time=begin + timedelta(seconds=1 + n % 7),
    )


def mixed_traces() -> list[Trace]:
    outputs = ["good", "bad", "good", "good", "bad"]
    # Arrival order is not start order, and two samples of `mean` share a start time (ties by trace id).
    traces = [trace(10 + i, "q-mean", out, start=50 - 10 * i) for i, out in enumerate(outputs)]
    traces += [trace(20, "q-mean", "good", start=10)]
    traces += [trace(30 + i, "q-all", "good", start=i) for i in range(3)]
    traces += [trace(40, "q-k", "bad", start=0), trace(41, "q-k", "good", start=5), trace(42, "q-k", "bad", start=9)]
    traces += [trace(50, "q-boom", "x", start=0), trace(60, "q-few", "good", start=0)]
    traces += [trace(70, "nobody asked", "x", start=0)]
    traces += [
        trace(81, "Again", "good", start=5, conversation="c1"),
        trace(80, "Hi", "hey", start=0, conversation="c1"),
    ]
    return traces


def load(tmp_path: Path, text: str) -> LoadedSpec:
    path = tmp_path / "evals.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_spec(path)


def without_time(data: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in data.items() if key != "created_at"}


def test_streamed_report_has_the_in_memory_reports_content(tmp_path: Path) -> None:
    spec = load(tmp_path, MIXED)
    options = ScoreOptions(paths=("runs",))
    in_memory = scoring.score(iter(mixed_traces()), spec, options).report
    target = tmp_path / "out" / "report.json"
    with ReportWriter(str(target)) as writer:
        run = scoring.score(iter(mixed_traces()), spec, options, writer)
        writer.finish(run.report)
    streamed = json.loads(target.read_text(encoding="utf-8"))
    assert without_time(streamed) == without_time(json.loads(in_memory.to_json()))
    assert list(tmp_path.joinpath("out").iterdir()) == [target]  # the temporary file was renamed
    # The content itself: every kind of entry is there, samples in start order.
    status = {e["case_id"]: e["status"] for e in streamed["entries"]}
    assert status == {
        "mean": "failed",
        "all": "passed",
        "pass-at-2": "passed",
        "boom": "failed",
        "never-seen": "missing",
        "too-few": "failed",
        "chat": "passed",
    }
    mean = streamed["entries"][0]
    assert [s["trace_id"][-2:] for s in mean["samples"]] == ["0e", "14", "0d", "0c", "0b", "0a"]
    assert mean["pass_rate"] == pytest.approx(4 / 6) and streamed["unmatched"][0]["trace_id"].endswith("46")
    assert load_report(target).counts.entries == 7
    assert render_summary(run.report, run.digest) == render_summary(in_memory)


def test_streamed_report_without_a_spec_is_ordered_by_start_time(tmp_path: Path) -> None:
    traces = [trace(n, "q", "ok", start=float(-n)) for n in range(1, 6)]
    in_memory = scoring.score(iter(traces), None).report
    target = tmp_path / "report.json"
    with ReportWriter(str(target)) as writer:
        run = scoring.score(iter(traces), None, None, writer)
        writer.finish(run.report)
    streamed = json.loads(target.read_text(encoding="utf-8"))
    assert without_time(streamed) == without_time(json.loads(in_memory.to_json()))
    assert [e["trace_id"][-1] for e in streamed["entries"]] == ["5", "4", "3", "2", "1"]


def test_report_streams_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = load(tmp_path, MIXED)
    with ReportWriter("-") as writer:
        run = scoring.score(iter(mixed_traces()), spec, None, writer)
        writer.finish(run.report)
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is run.report.passed and len(data["entries"]) == 7
    assert data["counts"] == run.report.counts.model_dump()


def many(count: int) -> Iterator[Trace]:
    """`count` synthetic traces, built one at a time (a generator, like the reader)."""
    for n in range(count):
        yield trace(n, "q-mean" if n % 3 else "q-all", "good" if n % 5 else "bad", start=float(n % 97))


class LiveSamples:
    """A sink counting the scored samples alive in memory when the entries start coming out."""

    def __init__(self) -> None:
        self.alive: int | None = None

    def add(self, entry: ReportEntry) -> None:
        if self.alive is None:
            gc.collect()
            self.alive = sum(1 for o in gc.get_objects() if isinstance(o, SampleResult))
        entry.json_bytes()


def peak_while_scoring(spec: LoadedSpec, count: int) -> tuple[int, int]:
    sink = LiveSamples()
    gc.collect()
    tracemalloc.start()
    try:
        scoring.score(many(count), spec, None, sink)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sink.alive is not None
    return peak, sink.alive


def test_memory_does_not_grow_with_the_number_of_traces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The spill holds up to 2 MB of results before writing them (by case): here, 64 KB, which both runs exceed.
    monkeypatch.setattr(_spill, "_HELD", 64 << 10)
    spec = load(tmp_path, MIXED)
    small_peak, small_alive = peak_while_scoring(spec, 300)
    large_peak, large_alive = peak_while_scoring(spec, 1200)
    # Every sample's result is on disk once scored (but the last 64 KB): none of the 300 or 1,200 is held in memory.
    assert (small_alive, large_alive) == (0, 0)
    # 900 more traces may add their index rows and durations (a few hundred bytes each), not their
    # results (several KB each, which is what the whole run used to keep).
    assert large_peak - small_peak < 900 * 600, (small_peak, large_peak)
