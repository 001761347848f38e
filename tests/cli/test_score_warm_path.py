"""A warm `evaltrace score` (the traces table read as columns, `engine/columnar_entries.py`) writes what
the per-trace path writes: the same JSON report, the same score-store rows, the same summary and exit code.

Each set is scored by real `evaltrace score` subprocesses four ways: per trace (`--no-cache` with the
table path switched off in that process, `PER_TRACE`: every trace rebuilt and scored by the reference
scorers), `--no-cache` (the table built from the span files, never written, and scored from its columns
as a first scoring is), a first scoring (each batch the cache writer writes decided from its columns, the
undecided traces scored trace by trace) and a warm one (the table read back: passing rows decided from
its columns, the rest decoded and scored trace by trace). The sets: the peer
benchmark's (a strict trajectory per case, by case id, ~10% planted failures), the scoring
benchmark's (seven scorers, cases matched by input and repeated, unmatched traces, a failing gate),
both generated small by the benchmarks' own generators, and the golden GenAI scenarios the
converter's tests record (a nested agent used as a tool, a failed call, old per-message events, an
unfinished root), scored against a spec written for them. An in-process run checks that the warm
scoring did take the columnar path and left only the failing rows to the decoder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_process import evaltrace
from genai_scenarios import old_events_no_agent, parallel_nested, sequential, unfinished_parent
from genai_spans import Recorder

from evaltrace.collector.traces import _cache_write, cache
from evaltrace.evaluators.engine import columnar_entries, scoring, shards
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.scoring.spec.loader import load_spec

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
_RUN_IDS = ("run_id", "run_started_at", "started_at", "finished_at", "scores_file")
"""Store columns that name or time the scoring run itself."""
PER_TRACE = """\
from evaltrace.evaluators.engine import columnar_entries
columnar_entries.applies = lambda router: False  # the route a run with a scorer without a form takes
from evaltrace.cli.main import run
run()
"""
"""`evaltrace` with the table path off: every trace decoded and scored by the reference scorers, the reference."""

SCENARIOS_SPEC = """\
confidence: 0.5
scorers: [tool_efficiency, tool_call_validity]
cases:
  - id: paris
    input: Weather in Paris?
    expect:
      tool_calls: [{name: get_weather, arguments: {city: Paris}}]
      trajectory: {mode: strict, arguments: {mode: exact}}
      output: {contains: ["18C"]}
  - id: rome
    input: Plan a Rome trip
    expect:
      tool_calls: [{name: research}, {name: get_time, arguments: {tz: CET}}]
      trajectory: superset
      output: {contains: [warm]}
  - id: sum
    input: 2+2?
    expect:
      tool_calls: [{name: add}]
      output: {equals: "4"}
  - id: greeting
    input: hi
    expect:
      output: {contains: [bye]}
  - id: never-recorded
    input: A question nobody asked
"""


def _bench_module(name: str) -> ModuleType:
    """One of the benchmarks' data generators (sibling scripts, not a package)."""
    sys.path.insert(0, str(BENCHMARKS))  # `_peer_data` imports `_scoring_data` as a sibling
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=["peer", "scoring", "scenarios"])
def run_set(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(span files, spec) of one set."""
    root = tmp_path_factory.mktemp(request.param)
    if request.param == "peer":
        _bench_module("_peer_data").generate(root, 160, 7)
        return root / "runs", root / "spec.json"
    if request.param == "scoring":
        data = _bench_module("_scoring_data")
        (root / "runs").mkdir()
        data.generate(root / "runs", 300, 7)
        data.write_spec(root / "spec.json", 7)
        return root / "runs", root / "spec.json"
    rec = Recorder(root / "runs")
    for scenario in (sequential, parallel_nested, sequential, old_events_no_agent, unfinished_parent, parallel_nested):
        scenario(rec)
    rec.close()
    (root / "spec.yaml").write_text(SCENARIOS_SPEC, encoding="utf-8")
    return root / "runs", root / "spec.yaml"


def _score(runs: Path, spec: Path, out: Path, cache: Path, *options: str, per_trace: bool = False) -> dict[str, Any]:
    """One `evaltrace score` subprocess: its exit code, summary, report (but its time) and store rows (but run ids).

    `per_trace`: by the per-trace path (`PER_TRACE`), with `--no-cache`.
    """
    out.mkdir()
    args = ("score", runs, "--spec", spec, "--json", out / "report.json", "--store", out / "store", *options)
    env = {"EVALTRACE_CACHE_DIR": str(cache)}
    if per_trace:
        command = [sys.executable, "-c", PER_TRACE, *map(str, args), "--no-cache"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, **env})
    else:
        done = evaltrace(*args, env=env, timeout=300)
    assert done.returncode in (0, 1), done.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    report.pop("created_at")
    store = {}
    for table in ("scores", "runs"):
        (path,) = (out / "store" / table).glob("*")  # a sharded run's scores: a folder of parts, read in order
        rows = pq.read_table(path)
        store[table] = rows.drop_columns([c for c in _RUN_IDS if c in rows.column_names]).to_pylist()
    return {"exit": done.returncode, "summary": done.stdout, "report": report, "store": store}


def test_a_warm_scoring_writes_what_the_per_trace_path_writes(run_set: tuple[Path, Path], tmp_path: Path) -> None:
    runs, spec = run_set
    cache = tmp_path / "cache"
    per_trace = _score(runs, spec, tmp_path / "per-trace", cache, per_trace=True)
    uncached = _score(runs, spec, tmp_path / "no-cache", cache, "--no-cache")
    assert not cache.exists()  # neither wrote a table
    first = _score(runs, spec, tmp_path / "first", cache)
    warm = _score(runs, spec, tmp_path / "warm", cache)
    assert warm == first == uncached == per_trace
    assert per_trace["report"]["counts"]["failed"] > 0 and per_trace["report"]["counts"]["passed"] > 0


def test_sharded_warm_workers_write_what_the_per_trace_workers_write(
    run_set: tuple[Path, Path], tmp_path: Path
) -> None:
    runs, spec = run_set
    cache = tmp_path / "cache"
    # Sharded, as the first scoring: a sharded run lists unmatched traces in shard order, not file order.
    per_trace = _score(runs, spec, tmp_path / "per-trace", cache, "--workers", "2", per_trace=True)
    uncached = _score(runs, spec, tmp_path / "no-cache", cache, "--no-cache", "--workers", "2")  # tables not kept
    first = _score(runs, spec, tmp_path / "first", cache, "--workers", "2")  # one table per worker's shard
    warm = _score(runs, spec, tmp_path / "warm", cache, "--workers", "2")  # each worker on its shard's table
    assert warm == first == uncached == per_trace
    # The store's rows, written by two processes as two parts, are a one-process run's rows.
    one = _score(runs, spec, tmp_path / "one", cache, "--workers", "1", per_trace=True)
    assert warm["store"]["scores"] == one["store"]["scores"] and len(one["store"]["scores"]) > 0


def test_a_small_warm_scoring_reads_a_sharded_first_scorings_tables_in_one_process(
    run_set: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, spec = run_set
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(shards, "AUTO_MIN_BYTES", 0)  # a first scoring of this small set forks two workers
    monkeypatch.setattr(shards, "available_cpus", lambda: 2)
    forked: list[int] = []
    sharded = shards.score_sharded
    monkeypatch.setattr(shards, "score_sharded", lambda *a, **k: forked.append(1) or sharded(*a, **k))
    reports = []
    per_trace, uncached = ScoreOptions(workers=2, cache=False, columnar=False), ScoreOptions(cache=False)
    for options in (per_trace, ScoreOptions(), ScoreOptions(), uncached):
        with ReportWriter(str(tmp_path / "report.json")) as writer:
            run = scoring.score([runs], load_spec(spec), options, writer)
            writer.finish(run.report)
        report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
        report.pop("created_at")
        reports.append(report)
    # The per-trace run, the first scoring and --no-cache (which never looks for tables); the warm one read both here.
    assert forked == [1, 1, 1]
    assert reports[3] == reports[2] == reports[1] == reports[0]


def rows_decided(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Per top-level row the columnar path asked about, in order: whether its sample was made from the columns."""
    decided: list[bool] = []
    scores = columnar_entries._Rows._scores

    def counted(self: Any, *args: Any) -> Any:
        found = scores(self, *args)  # per row asked, its scores or `None`
        decided.extend(verdict is not None for verdict in found)
        return found

    monkeypatch.setattr(columnar_entries._Rows, "_scores", counted)
    return decided


def test_the_warm_scoring_decides_the_passing_rows_from_columns(
    run_set: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, spec = run_set
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    decided = rows_decided(monkeypatch)
    options = ScoreOptions(paths=(str(runs),), workers=1)
    scoring.score([runs], load_spec(spec), options)
    first = decided[:]  # a first scoring decides the rows of each batch its cache writer writes
    decided.clear()
    run = scoring.score([runs], load_spec(spec), options)
    assert sorted(first) == sorted(decided)
    samples = [sample for entry in run.report.entries for sample in entry.samples]
    failed = [sample for sample in samples if sample.status == "failed"]
    passing = len(samples) - len(failed)
    # Most passing samples were made from their rows' columns (the rest: a pass a form cannot be sure
    # of, or a trace matching two cases' input), and failures whose every form grades them; on the peer
    # set every sample, its failures graded by the trajectory form (the reference's own code): none decoded.
    assert passing * 0.9 <= decided.count(True) <= len(samples)
    if "peer" in str(runs):
        assert decided.count(True) == len(samples) and failed and False not in decided


def test_a_first_scoring_whose_table_cannot_be_written_midway_reports_the_same(
    run_set: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table is abandoned (a full disk): every batch built is still decided from its columns."""
    runs, spec = run_set
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    reference = scoring.score(
        [runs], load_spec(spec), ScoreOptions(paths=(str(runs),), workers=1, cache=False, columnar=False)
    )
    decided = rows_decided(monkeypatch)
    write = pq.ParquetWriter.write_batch
    written = iter(range(sys.maxsize))

    def failing(self: Any, *args: Any, **kwargs: Any) -> None:
        if next(written) == 1:  # the second batch: the writer gives up, scoring goes on
            raise OSError("no space left on device")
        write(self, *args, **kwargs)

    monkeypatch.setattr(cache, "ROWS_PER_GROUP", 2)  # a batch written before the fault
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "clean"))
    scoring.score([runs], load_spec(spec), ScoreOptions(paths=(str(runs),), workers=1))
    asked, decided[:] = list(decided), []
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(pq.ParquetWriter, "write_batch", failing)
    first = scoring.score([runs], load_spec(spec), ScoreOptions(paths=(str(runs),), workers=1))
    assert any(decided) and decided == asked  # the rows after the fault too are decided from their columns
    assert not list((tmp_path / "cache").rglob("*.parquet"))  # no table left behind
    assert first.report.model_dump(exclude={"created_at"}) == reference.report.model_dump(exclude={"created_at"})


def test_a_first_scoring_whose_table_cannot_be_built_midway_reports_the_same(
    run_set: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch the table cannot hold (a value not JSON): the run is scored again per trace, from new tallies."""
    runs, spec = run_set
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    reference = scoring.score(
        [runs], load_spec(spec), ScoreOptions(paths=(str(runs),), workers=1, cache=False, columnar=False)
    )
    take = _cache_write.TableEncoder.take
    taken = iter(range(sys.maxsize))

    def failing(self: Any) -> Any:
        if next(taken) == 1:
            raise ValueError("cannot hold this")
        return take(self)

    monkeypatch.setattr(_cache_write.TableEncoder, "take", failing)
    monkeypatch.setattr(cache, "ROWS_PER_GROUP", 2)
    first = scoring.score([runs], load_spec(spec), ScoreOptions(paths=(str(runs),), workers=1))
    assert next(taken) > 2  # the per-trace path's writer took batches too (its table abandoned at the fault)
    assert first.report.model_dump(exclude={"created_at"}) == reference.report.model_dump(exclude={"created_at"})
