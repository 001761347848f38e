"""The engine takes the columnar path on a warm traces cache, and the report is the reference's.

Real span files (written by the real SDK and exporter), scored through `scoring.score` four ways:
per trace (`columnar=False`: every trace rebuilt and scored by the reference scorers), without the
cache (the table built and scored, never written), with a cold cache (the table is written, each batch
handed to the columnar path before its traces are scored) and with the warm cache (the table is read
back): the columnar path answers the passing trajectories. All reports must be equal but for their timestamp.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call

from evaltrace.evaluators.engine import columnar_entries, scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.scoring import columns as forms
from evaltrace.evaluators.scoring.columns import RowCalls
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory, trajectory_form
from evaltrace.evaluators.scoring.spec.loader import load_spec

SPEC = """\
confidence: 0.5
scorers: [tool_errors]
cases:
  - id: weather
    input: Weather in Paris?
    expect:
      tool_calls: [{name: get_weather, arguments: {city: Paris}}, {name: get_time, arguments: {city: Paris}}]
      trajectory: {mode: strict, arguments: {mode: exact}}
  - id: loose
    input: Weather in Rome?
    expect:
      tool_calls: [{name: get_weather}]
"""


def _turn(rec: Recorder, prompt: str, cities: list[str]) -> None:
    with rec.span("invoke_agent helper", agent_attrs("helper")):
        user = ("user", [text(prompt)])
        for tool, city in zip(("get_weather", "get_time"), cities, strict=False):
            call_id = f"c-{rec.now}"
            call = ("assistant", [tool_call(call_id, tool, {"city": city})])
            chat(rec, "gpt-4o", messages(user), messages(call), (50, 5), "tool_call")
            with rec.span(f"execute_tool {tool}", tool_attrs(tool, call_id, json.dumps({"city": city}), "ok")):
                rec.tick(1)
        chat(rec, "gpt-4o", messages(user), messages(("assistant", [text("done")])), (80, 9))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("columnar")
    rec = Recorder(root / "runs")
    for index in range(24):
        _turn(rec, "Weather in Paris?", ["Paris", "Paris"] if index % 3 else ["Paris", "Rome"])
        _turn(rec, "Weather in Rome?", ["Rome"] if index % 4 else ["Rome", "Rome"])
    rec.close()
    spec = root / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    return root / "runs", spec


def _score(runs: Path, spec: Path, out: Path, *, cache: bool, columnar: bool = True) -> dict[str, Any]:
    with ReportWriter(str(out)) as writer:
        options = ScoreOptions(paths=(str(runs),), cache=cache, workers=1, columnar=columnar)
        run = scoring.score([runs], load_spec(spec), options, writer)
        writer.finish(run.report)
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    report.pop("created_at")
    return report


def test_warm_scoring_takes_the_columnar_path_with_the_reference_report(
    run_dir: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    answered: list[Score] = []

    def counted(scorer: Trajectory, row: RowCalls) -> Score | None:
        found = trajectory_form(scorer, row)
        if found is not None:
            answered.append(found)
        return found

    key: type[Scorer] = Trajectory
    monkeypatch.setitem(forms.FORMS, key, counted)
    runs, spec = run_dir
    reference = _score(runs, spec, tmp_path / "none.json", cache=False, columnar=False)
    assert not answered  # the per-trace path: the reference scored everything
    uncached = _score(runs, spec, tmp_path / "uncached.json", cache=False)
    assert len(answered) == 48 and not list(tmp_path.rglob("*.parquet"))  # the table built, scored, not written
    answered.clear()
    cold = _score(runs, spec, tmp_path / "cold.json", cache=True)
    # The table is written as the traces are rebuilt, each batch before its traces are scored:
    # 16 exact weather runs pass on the columnar path, and the 24 Rome runs (extra calls allowed); the 8
    # others fail, graded there too by the reference's own code
    assert len(answered) == 48 and [score.passed for score in answered].count(True) == 16 + 24
    answered.clear()
    warm = _score(runs, spec, tmp_path / "warm.json", cache=True)
    assert len(answered) == 48  # the table read back
    assert warm == cold == uncached == reference
    outcomes = [s["passed"] for e in warm["entries"] for x in e["samples"] for s in x["scores"]]
    assert outcomes.count(False) > 0 and outcomes.count(True) > 16 + 24


def test_each_scorer_is_asked_once_a_batch_and_alike_passes_are_one_score(
    run_dir: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forms are asked per batch, one call per scorer class: each case's own `trajectory` object, one call."""
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    runs, spec = run_dir
    reference = _score(runs, spec, tmp_path / "none.json", cache=False, columnar=False)
    _score(runs, spec, tmp_path / "cold.json", cache=True)
    asked: list[tuple[str, int, list[Score | None]]] = []
    batches: set[int] = set()
    objects: set[int] = set()
    ask = columnar_entries.ask_rows

    def counted(scorers: list[Scorer], batch: forms.BatchCalls, rows: list[int]) -> list[Score | None]:
        found = ask(scorers, batch, rows)
        asked.append((scorers[0].name, len(rows), found))
        batches.add(id(batch))
        objects.update(id(scorer) for scorer in scorers if scorer.name == "trajectory")
        return found

    monkeypatch.setattr(columnar_entries, "ask_rows", counted)
    assert _score(runs, spec, tmp_path / "warm.json", cache=True) == reference
    assert len(asked) == 2 * len(batches)  # tool_errors, and trajectory: once per batch, not per row nor per case
    assert len(objects) == 2  # the trajectory call held both cases' rows, each with its case's scorer
    assert [sum(count for name, count, _ in asked if name == scorer) for scorer in ("tool_errors", "trajectory")] == [
        48,
        48,
    ]
    errors = [score for name, _, found in asked if name == "tool_errors" for score in found if score is not None]
    assert len(errors) == 48  # every row passes; one Score object per count of calls (1 or 2) and batch
    assert (
        len({id(score) for score in errors})
        == len({score.reason for score in errors}) * len(batches)
        == 2 * len(batches)
    )


def test_sharded_workers_take_the_columnar_path_too(
    run_dir: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    runs, spec = run_dir
    one = _score(runs, spec, tmp_path / "one.json", cache=False, columnar=False)
    outputs = []
    for name in ("cold", "warm"):
        with ReportWriter(str(tmp_path / f"{name}.json")) as writer:
            run = scoring.score([runs], load_spec(spec), ScoreOptions(paths=(str(runs),), workers=2), writer)
            writer.finish(run.report)
        report = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))
        report.pop("created_at")
        outputs.append(report)
    for report in outputs:
        assert report["entries"] == one["entries"]
        assert report["counts"] == one["counts"]


def test_a_failing_form_leaves_the_verdict_to_the_reference(
    run_dir: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[str] = []

    def broken(scorer: Trajectory, row: RowCalls) -> Score | None:
        calls.append(scorer.name)
        raise RecursionError("a form tripped over a deeply nested value")

    key: type[Scorer] = Trajectory
    runs, spec = run_dir
    reference = _score(runs, spec, tmp_path / "none.json", cache=False, columnar=False)
    _score(runs, spec, tmp_path / "cold.json", cache=True)
    monkeypatch.setitem(forms.FORMS, key, broken)
    warm = _score(runs, spec, tmp_path / "warm.json", cache=True)

    assert len(calls) == 48  # the form was asked for every trace, and failed every time
    assert warm == reference


def test_a_slow_form_is_held_to_the_scorer_time_limit(
    run_dir: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))

    def spinning(scorer: Trajectory, row: RowCalls) -> Score | None:
        while True:  # a pattern backtracking on a hostile answer, as far as the engine can tell
            pass

    key: type[Scorer] = Trajectory
    runs, spec = run_dir
    _score(runs, spec, tmp_path / "cold.json", cache=True)
    monkeypatch.setitem(forms.FORMS, key, spinning)
    with ReportWriter(str(tmp_path / "warm.json")) as writer:
        options = ScoreOptions(paths=(str(runs),), scorer_timeout=0.05, workers=1)
        run = scoring.score([runs], load_spec(spec), options, writer)
        writer.finish(run.report)

    report = json.loads((tmp_path / "warm.json").read_text(encoding="utf-8"))
    results = [s for e in report["entries"] for x in e["samples"] for s in x["scores"] if s["scorer"] == "trajectory"]
    assert len(results) == 48
    assert all(s["error"] == "ScorerTimeout" and s["passed"] is False for s in results)
