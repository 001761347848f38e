"""The Ray engine's per-shard task body takes the columnar forms on a warm re-scoring, as a local worker does.

`ray_data.score_shard` is what a Ray task runs (the cluster tests in tests/evaluators/engine/ray run it on real
nodes); here it runs in this process, without Ray, on real span files recorded by the SDK and
exporter: first with an empty traces cache (the table is written, the reference scores
everything), then warm (the shard's table is read and the forms answer the checks that surely
pass). The scored samples must be byte for byte the same.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from _form_counts import count_form_answers
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.shard import Shard
from evaltrace.evaluators.engine.ray_data import ShardResult, score_shard
from evaltrace.evaluators.engine.scoring import ScoreOptions, new_run
from evaltrace.evaluators.results.report.writer import Parked
from evaltrace.evaluators.scoring.scorers.output import Output
from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory
from evaltrace.evaluators.scoring.spec.loader import load_spec

SPEC = """\
cases:
  - id: paris
    input: Weather in Paris?
    expect:
      tool_calls: [{name: get_weather, arguments: {city: Paris}}]
      trajectory: {mode: strict, arguments: {mode: exact}}
      output: {contains: ["18"]}
"""


def _turn(rec: Recorder, city: str, answer: str) -> None:
    with rec.span("invoke_agent helper", agent_attrs("helper")):
        user = ("user", [text("Weather in Paris?")])
        call = ("assistant", [tool_call(f"c-{rec.now}", "get_weather", {"city": city})])
        chat(rec, "gpt-4o", messages(user), messages(call), (50, 5), "tool_call")
        result = json.dumps({"sky": "sunny", "high_c": 18})
        with rec.span("execute_tool get_weather", tool_attrs("get_weather", None, json.dumps({"city": city}), result)):
            rec.tick(1)
        chat(rec, "gpt-4o", messages(user), messages(("assistant", [text(answer)])), (80, 9), "stop")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("ray-task")
    rec = Recorder(root / "runs")
    for index in range(10):
        _turn(rec, "Rome" if index % 3 == 0 else "Paris", "Sunny, 18 C." if index % 4 else "Sunny.")
    rec.close()
    (root / "spec.yaml").write_text(SPEC, encoding="utf-8")
    return root / "runs", root / "spec.yaml"


def _task(runs: Path, spec: Path) -> ShardResult:
    """One task's body, shard 2 of 2 (the traces it keeps are those the Ray engine would give it)."""
    files = resolve_paths([runs])
    options = ScoreOptions(paths=(str(runs),))
    router, stats = new_run(load_spec(spec), options)
    return score_shard(files, Shard(1, 2), False, router, stats, options)


def test_a_warm_task_takes_the_forms_and_scores_the_same(
    recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    answered = count_form_answers(monkeypatch, (Trajectory, Output))
    runs, spec = recorded
    cold = _task(runs, spec)
    assert cold.input_error is None and cold.rows
    # The table is written as the task rebuilds the traces, each batch before its traces are scored.
    first = dict(answered)
    answered.clear()
    warm = _task(runs, spec)
    assert warm.input_error is None
    assert [row[3] for row in warm.rows] == [row[3] for row in cold.rows]  # each sample's scored JSON
    # One scored sample each: its SampleResult JSON, parked beside the score store's values.
    samples = json.loads(b"[" + Parked.of([row[3] for row in warm.rows]).json() + b"]")
    passed = Counter(s["scorer"] for sample in samples for s in sample["scores"] if s["passed"] is True)
    scored = Counter(s["scorer"] for sample in samples for s in sample["scores"])
    assert answered["trajectory"] == scored["trajectory"] > passed["trajectory"] > 0  # failures graded there too
    assert answered["output"] == scored["output"] > passed["output"] > 0  # every answer recorded: failures graded too
    assert first == dict(answered)  # the first scoring took the forms as the re-scoring did


def _damage_tables(cache: Path) -> int:
    """Zero the second half of every cached traces table: its footer stays, its pages do not."""
    damaged = 0
    for table in cache.rglob("*.parquet"):
        data = bytearray(table.read_bytes())
        half = len(data) // 2
        data[half // 2 : half] = bytes(half - half // 2)
        table.write_bytes(bytes(data))
        damaged += 1
    return damaged


def test_a_task_whose_cached_table_is_damaged_scores_per_trace_the_same(
    recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A cached table whose pages are damaged (its footer intact, so it is taken up) sends the task
    # back to the per-trace path, which gives the cold task's samples and tallies.
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    runs, spec = recorded
    cold = _task(runs, spec)
    assert _damage_tables(tmp_path / "cache") > 0
    with caplog.at_level("INFO", logger="evaltrace"):
        again = _task(runs, spec)
    assert any("traces cache unusable" in record.getMessage() for record in caplog.records)
    assert again.input_error is None
    # The same samples; parked in another order (the columnar path parks a batch's decided rows
    # before its undecided ones), which the report does not see: it orders samples by start time.
    assert sorted(row[3] for row in again.rows) == sorted(row[3] for row in cold.rows)
    assert again.router is not None and cold.router is not None
    assert {k: t.verdicts() for k, t in again.router.tallies.items()} == {
        k: t.verdicts() for k, t in cold.router.tallies.items()
    }
    assert again.router.scorer_tally.rows() == cold.router.scorer_tally.rows()
    assert again.stats is not None and cold.stats is not None
    assert again.stats.traces == cold.stats.traces


def test_a_table_failing_after_its_first_batch_leaves_no_tally_behind(
    recorded: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The read fails once a batch has been routed and tallied: the per-trace rescoring must start
    # from the task's state before the attempt, or that batch's cases would count twice.
    from evaltrace.evaluators.engine import columnar_entries

    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    runs, spec = recorded
    cold = _task(runs, spec)
    real = columnar_entries.table_batches

    def failing_after_one(*args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch] | None:
        batches = real(*args, **kwargs)
        if batches is None:
            return None

        def gen() -> Iterator[pa.RecordBatch]:
            yield next(batches)
            raise OSError("the disk went away")

        return gen()

    monkeypatch.setattr(columnar_entries, "table_batches", failing_after_one)
    again = _task(runs, spec)
    assert again.input_error is None and again.router is not None and cold.router is not None
    assert sorted(row[3] for row in again.rows) == sorted(row[3] for row in cold.rows)
    assert {k: t.verdicts() for k, t in again.router.tallies.items()} == {
        k: t.verdicts() for k, t in cold.router.tallies.items()
    }
    assert again.router.scorer_tally.rows() == cold.router.scorer_tally.rows()
    assert again.stats is not None and cold.stats is not None and again.stats.traces == cold.stats.traces
