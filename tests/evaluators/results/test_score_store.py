"""The score store: real recorded runs scored into it, read back, and recomputed from the tables.

The engine still aggregates repeats and the gate itself; these tests hold the stored scores table
to the JSON report: every result, and each entry's outcome and the gate recomputed by a DuckDB
query over the Parquet files alone.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from report_runs import HOSTILE, PLUGIN, SPEC, record_runs, write_spec

from evaltrace.collector import ParquetSpanExporter, agent_run
from evaltrace.collector.errors import InputError
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.formats import FanOut
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.results.report.model import Report, load_report
from evaltrace.evaluators.results.store.reader import find_run, list_runs, read_scores
from evaltrace.evaluators.results.store.schema import RUNS_SCHEMA, SCORES_SCHEMA, STORE_SCHEMA_VERSION
from evaltrace.evaluators.results.store.writer import StoreWriter, open_store
from evaltrace.evaluators.scoring.scorers.registry import load_plugins
from evaltrace.evaluators.scoring.spec.loader import load_spec

ROOT = Path(__file__).resolve().parents[3]
SAMPLES = ROOT / "samples"

# Each entry's outcome and pass rate, and the gate, from the scores and runs tables only (the
# `entry_*` columns, the engine's own verdict, are not read). The rules are the report model's
# (evaluators/results/report/model.py) and the repeat rules' (evaluators/scoring/spec/model.py).
RECOMPUTE = """
WITH rows AS (
    SELECT * FROM read_parquet($scores)
), samples AS (
    SELECT entry_index, sample_index,
        CASE WHEN bool_or(error IS NOT NULL OR passed = false) THEN 'failed'
             WHEN bool_or(passed) THEN 'passed' ELSE 'not_applicable' END AS status
    FROM rows WHERE sample_index IS NOT NULL GROUP BY entry_index, sample_index
), entries AS (
    SELECT entry_index, any_value(rule) AS rule, coalesce(any_value(min_samples), 1) AS min_samples,
        CASE WHEN any_value(rule) LIKE 'pass@%' THEN CAST(split_part(any_value(rule), '@', 2) AS INTEGER) END AS k
    FROM rows GROUP BY entry_index
), tallies AS (
    SELECT e.entry_index, e.rule, e.min_samples,
        count(s.sample_index) AS n,
        count_if(s.status <> 'not_applicable' AND (e.k IS NULL OR s.sample_index < e.k)) AS scored,
        count_if(s.status = 'passed' AND (e.k IS NULL OR s.sample_index < e.k)) AS passed
    FROM entries e LEFT JOIN samples s USING (entry_index) GROUP BY ALL
), outcomes AS (
    SELECT entry_index,
        CASE WHEN n = 0 THEN 'missing' WHEN n < min_samples THEN 'failed'
             WHEN scored = 0 THEN 'failed'
             WHEN rule = 'majority' AND 2 * passed > scored THEN 'passed'
             WHEN rule LIKE 'pass@%' AND passed >= 1 THEN 'passed'
             WHEN coalesce(rule, 'all') IN ('all', 'mean') AND passed = scored THEN 'passed'
             ELSE 'failed' END AS status,
        CASE WHEN n < min_samples OR scored = 0 THEN 0.0
             WHEN rule = 'mean' THEN passed / scored
             WHEN rule = 'majority' THEN CAST(2 * passed > scored AS DOUBLE)
             WHEN rule LIKE 'pass@%' THEN CAST(passed >= 1 AS DOUBLE)
             ELSE CAST(passed = scored AS DOUBLE) END AS pass_rate
    FROM tallies
)
SELECT entry_index, status, pass_rate FROM outcomes ORDER BY entry_index
"""

GATE = """
SELECT avg(pass_rate) AS pass_rate, avg(pass_rate) + 1e-9 >= any_value(r.gate_confidence) AS passed
FROM outcomes_table, read_parquet($runs) r
"""

REPEATS_SPEC = """\
confidence: 0.6
cases:
  - {id: rome-mean, input: "And in Rome?", repeat: mean, expect: {output: {contains: ["21"]}}}
  - {id: rome-all, input: "And in Rome?", repeat: all, expect: {output: {contains: ["21"]}}}
  - {id: rome-majority, input: "And in Rome?", repeat: majority, expect: {output: {contains: ["21"]}}}
  - {id: rome-pass-1, input: "And in Rome?", repeat: "pass@1", expect: {output: {contains: ["21"]}}}
  - {id: rome-pass-2-wrong, input: "And in Rome?", repeat: "pass@2", expect: {output: {contains: ["21C in"]}}}
  - id: rome-too-few
    input: "And in Rome?"
    repeat: {rule: all, min_samples: 4}
    expect: {output: {contains: ["R"]}}
  - {id: paris, input: "What's the weather in Paris?", expect: {output: {contains: ["18"]}}}
  - {id: absent, input: "Never asked", expect: {output: {contains: ["x"]}}}
"""

MULTI_TURN_SPEC = """\
cases:
  - id: memory
    turns:
      - input: Hi, I am David
        expect: {output: {contains: ["Nice"]}}
      - input: What's my name?
        expect: {output: {contains: ["David"]}}
"""


@pytest.fixture
def plugin_scorers(isolated_registry: None) -> Iterator[None]:
    load_plugins([str(PLUGIN)])
    yield


def score_into(store: Path, runs: Path, spec_file: Path | None, out: Path, **batch: int) -> tuple[Report, str]:
    """Score `runs` as `evaltrace score` does, writing the JSON report and the store in one pass."""
    spec = load_spec(spec_file) if spec_file is not None else None
    store_writer = open_store(store, spec, **batch)
    sink = FanOut([ReportWriter(str(out)), store_writer])
    try:
        run = scoring.score([runs], spec, ScoreOptions(paths=(str(runs),), workers=1), sink)
        sink.finish(run.report)
    finally:
        sink.abort()
    return load_report(out), store_writer.run_id


def record_conversations(folder: Path) -> Path:
    """Two conversations of the `memory` case through the real SDK: a whole one and one missing turn 2."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(folder, run_id="store-test")))
    turns = [("c1", "Hi, I am David", "Nice to meet you"), ("c1", "What's my name?", "You are David.")]
    for conversation, text, answer in [*turns, ("c2", "Hi, I am David", "Hello")]:
        with agent_run("assistant", input=text, conversation_id=conversation, tracer_provider=provider) as run:
            run.output = answer
    provider.shutdown()
    return folder


def prepare(case: str, tmp_path: Path) -> tuple[Path, Path | None]:
    """The runs folder and spec of each scoring the recomputation is checked on."""
    if case == "samples":
        return SAMPLES / "runs", SAMPLES / "evals.yaml"
    if case == "samples-defaults":
        return SAMPLES / "runs", None
    if case == "multi-turn":
        return record_conversations(tmp_path / "runs"), write_spec(tmp_path, MULTI_TURN_SPEC)
    runs = record_runs(tmp_path / "runs")
    return runs, write_spec(tmp_path, SPEC if case == "report-runs" else REPEATS_SPEC)


@pytest.mark.parametrize("case", ["samples", "samples-defaults", "report-runs", "repeats", "multi-turn"])
def test_outcomes_and_gate_recomputed_from_the_tables_equal_the_report(
    case: str, tmp_path: Path, plugin_scorers: None
) -> None:
    runs, spec = prepare(case, tmp_path)
    report, run_id = score_into(tmp_path / "store", runs, spec, tmp_path / "report.json")
    scores = str(tmp_path / "store" / "scores" / f"{run_id}.parquet")
    con = duckdb.connect()
    recomputed = con.execute(RECOMPUTE, {"scores": scores}).fetchall()
    assert [(status, rate) for _, status, rate in recomputed] == [(e.status, e.pass_rate) for e in report.entries]
    if case in ("report-runs", "repeats"):  # every outcome is there to be got wrong
        assert {"passed", "failed", "missing"} <= {status for _, status, _ in recomputed}
    con.execute(f"CREATE TABLE outcomes_table AS {RECOMPUTE}", {"scores": scores})
    rate, passed = con.execute(GATE, {"runs": str(tmp_path / "store" / "runs" / f"{run_id}.parquet")}).fetchone()
    assert passed == report.passed
    assert rate == pytest.approx(report.pass_rate, abs=1e-12)


def test_every_result_of_the_report_is_a_row_with_its_scorer_version_and_config_hash(
    tmp_path: Path, plugin_scorers: None
) -> None:
    runs, spec = prepare("report-runs", tmp_path)
    report, run_id = score_into(tmp_path / "store", runs, spec, tmp_path / "report.json")
    table = read_scores(tmp_path / "store", run_id)
    assert table.schema.equals(SCORES_SCHEMA, check_metadata=False)
    rows = table.to_pylist()
    expected = [
        (index, entry.case_id, sample_index, s.scorer, s.passed, s.value, s.reason, s.error, s.details)
        for index, entry in enumerate(report.entries)
        for sample_index, sample in enumerate(entry.samples)
        for s in sample.scores
    ]
    found = [
        (r["entry_index"], r["case_id"], r["sample_index"], r["scorer"], r["passed"], r["value"], r["reason"])
        + (r["error"], json.loads(r["details"]) if r["details"] is not None else None)
        for r in rows
        if r["sample_index"] is not None
    ]
    assert found == expected
    # The hostile answer, quoted by t_report_echo's reason, comes back byte for byte.
    assert any(r["reason"] is not None and HOSTILE in r["reason"] for r in rows)
    known = {(s.name, s.version, s.config_hash) for s in report.scorers}
    stored = {(r["scorer"], r["scorer_version"], r["config_hash"]) for r in rows if r["scorer"]}
    # Every scorer that ran is known by its version and hash; the one left is the missing case's.
    assert stored <= known and len(known - stored) == 1
    (missing,) = [r for r in rows if r["case_id"] == "never-recorded"]
    assert (missing["sample_index"], missing["scorer"], missing["entry_status"]) == (None, None, "missing")
    rome = [r for r in rows if r["case_id"] == "rome"]
    assert [r["sample_index"] for r in rome] == [0, 1, 2] and {r["tier"] for r in rome} == {"full"}
    assert [r["entry_pass_rate"] for r in rome] == pytest.approx([2 / 3] * 3)


def test_the_run_row_holds_the_report_header(tmp_path: Path, plugin_scorers: None) -> None:
    runs, spec = prepare("report-runs", tmp_path)
    assert spec is not None
    report, run_id = score_into(tmp_path / "store", runs, spec, tmp_path / "report.json")
    (run,) = list_runs(tmp_path / "store")
    assert run.run_id == run_id and run.started_at <= run.finished_at == report.created_at
    assert (run.spec, run.spec_sha256) == (str(spec), hashlib.sha256(spec.read_bytes()).hexdigest())
    assert run.inputs == [str(runs)] and run.evaltrace_version == report.evaltrace_version
    assert (run.gate_passed, run.gate_pass_rate, run.gate_confidence) == (False, report.pass_rate, 0.5)
    assert run.gate_reason == report.gate_reason
    counts = report.counts
    assert (run.entries, run.entries_passed, run.entries_failed, run.entries_missing) == (
        counts.entries,
        counts.passed,
        counts.failed,
        counts.missing,
    )
    assert [s.model_dump() for s in run.scorers] == [s.model_dump() for s in report.scorers]
    assert run.score_rows == read_scores(tmp_path / "store", run_id).num_rows
    assert run.scorer_errors == 1  # t_report_boom
    assert (run.input_tokens, run.output_tokens) == (report.usage.input_tokens, report.usage.output_tokens)
    assert pq.read_schema(tmp_path / "store" / run.scores_file).metadata[b"evaltrace.store.schema_version"] == b"1"
    runs_file = tmp_path / "store" / "runs" / f"{run_id}.parquet"
    assert pq.read_schema(runs_file).equals(RUNS_SCHEMA, check_metadata=False)


def test_rows_are_written_in_bounded_row_groups(tmp_path: Path, plugin_scorers: None) -> None:
    runs, spec = prepare("report-runs", tmp_path)
    _, run_id = score_into(tmp_path / "store", runs, spec, tmp_path / "report.json", batch_rows=3)
    parquet = pq.ParquetFile(tmp_path / "store" / "scores" / f"{run_id}.parquet")
    sizes = [parquet.metadata.row_group(i).num_rows for i in range(parquet.num_row_groups)]
    assert len(sizes) > 2 and max(sizes) <= 3


def test_runs_are_appended_never_rewritten_and_listed_oldest_first(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _, first = score_into(store, SAMPLES / "runs", None, tmp_path / "a.json")
    before = {p: p.read_bytes() for p in store.rglob("*.parquet")}
    _, second = score_into(store, SAMPLES / "runs", SAMPLES / "evals.yaml", tmp_path / "b.json")
    assert {p: p.read_bytes() for p in before} == before
    assert [run.run_id for run in list_runs(store)] == [first, second]
    assert len(list(store.rglob("*.parquet"))) == 4


def test_two_scorings_at_once_both_land_and_an_unfinished_one_is_not_listed(tmp_path: Path) -> None:
    store = tmp_path / "store"
    spec = load_spec(SAMPLES / "evals.yaml")
    first, second, third = (open_store(store, spec) for _ in range(3))
    run = scoring.score([SAMPLES / "runs"], spec, ScoreOptions(workers=1), FanOut([first, second, third]))
    assert list_runs(store) == []  # three open, none finished
    second.finish(run.report)
    first.finish(run.report)
    assert [r.run_id for r in list_runs(store)] == sorted([first.run_id, second.run_id])
    third.abort()
    assert sorted(p.name for p in store.rglob("*")) == sorted(
        ["scores", "runs", *(f"{w.run_id}.parquet" for w in (first, second) for _ in range(2))]
    )  # the aborted run left no file, not even a temporary one


def test_run_ids_sort_by_time_and_may_be_given_by_a_unique_prefix(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ids = [score_into(store, SAMPLES / "runs", None, tmp_path / f"{n}.json")[1] for n in range(2)]
    assert ids == sorted(ids) and all(len(i) == 26 for i in ids)
    assert find_run(store, ids[1].lower()).run_id == ids[1]
    unique = next(n for n in range(1, 27) if ids[0][:n] != ids[1][:n])
    assert find_run(store, ids[0][:unique]).run_id == ids[0]
    with pytest.raises(InputError, match=r"names 2 scoring runs") as ambiguous:
        find_run(store, ids[0][: unique - 1])
    assert "\n" not in str(ambiguous.value)
    with pytest.raises(InputError) as unknown:
        read_scores(store, "NOPE")
    assert str(unknown.value) == f"{store}: no scoring run 'NOPE' (latest: {ids[1]}, {ids[0]})"


def test_reading_a_missing_store_or_a_foreign_file_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no score store here: the folder does not exist"):
        list_runs(tmp_path / "nowhere")
    (tmp_path / "store" / "runs").mkdir(parents=True)
    with pytest.raises(InputError, match=r"no scoring run is stored here yet"):
        find_run(tmp_path / "store", "01ABC")
    pq.write_table(pa.table({"x": [1]}), tmp_path / "store" / "runs" / "junk.parquet")
    with pytest.raises(InputError, match=r"junk.parquet: not a runs file of a score store"):
        list_runs(tmp_path / "store")
    (tmp_path / "store" / "runs" / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match=r"junk.parquet: cannot read the score store file"):
        list_runs(tmp_path / "store")


def test_a_newer_store_schema_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _, run_id = score_into(store, SAMPLES / "runs", None, tmp_path / "r.json")
    path = store / "runs" / f"{run_id}.parquet"
    table = pq.read_table(path)
    newer: dict[bytes, bytes] = {**table.schema.metadata, b"evaltrace.store.schema_version": b"99"}
    pq.write_table(table.replace_schema_metadata(newer), path)
    with pytest.raises(
        InputError, match=rf"store schema version '99'; this evaltrace reads up to {STORE_SCHEMA_VERSION}"
    ):
        list_runs(store)


@pytest.mark.parametrize("blocker", ["store", "scores"])
def test_a_store_that_cannot_be_written_is_refused_before_scoring(tmp_path: Path, blocker: str) -> None:
    store = tmp_path / "store"
    in_the_way = store if blocker == "store" else store / "scores"
    in_the_way.parent.mkdir(parents=True, exist_ok=True)
    in_the_way.write_text("a file where a folder should be")
    with pytest.raises(InputError) as refused:
        open_store(store, None)
    message = str(refused.value)
    assert message.startswith(f"{store}: cannot write the score store") and "\n" not in message
    assert "a file is in the way of a folder" in message


def test_a_writer_is_a_report_format(tmp_path: Path) -> None:
    from evaltrace.evaluators.results.report.writer import ReportFormat

    writer: ReportFormat = open_store(tmp_path / "store", None)
    assert isinstance(writer, StoreWriter)
    writer.abort()
    assert [p for p in (tmp_path / "store").rglob("*") if p.is_file()] == []
