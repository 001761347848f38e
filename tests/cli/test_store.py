"""`--store`, `--no-store` and `EVALTRACE_STORE` on `evaltrace score` and `evaltrace run`: real subprocesses.

The README's DuckDB query over the store is run here as written.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from cli_process import evaltrace
from readme_blocks import sql_block
from report_runs import HOSTILE, PLUGIN, record_runs, write_spec

from evaltrace.evaluators.results.store.reader import list_runs, read_scores

REPO = Path(__file__).resolve().parents[2]
SAMPLE_RUNS = REPO / "samples" / "runs"
SAMPLE_SPEC = REPO / "samples" / "evals.yaml"
STORED = re.compile(r"scores stored: ([0-9A-Z]{26}) in (.+)")

# The README's query: pass rate per scorer in every scoring run of the store, oldest run first.
README_QUERY = sql_block("/store/scores/**/*.parquet")
"""The README's pass-rate-per-scorer query over the score store, run as written there."""


def stored_run(stderr: str) -> tuple[str, str]:
    """The run id and store folder of the one 'scores stored' line on stderr."""
    lines = [line for line in stderr.splitlines() if line.startswith("scores stored: ")]
    assert len(lines) == 1, stderr
    match = STORED.fullmatch(lines[0])
    assert match is not None, lines[0]
    return match[1], match[2]


def test_score_adds_the_run_to_the_store_given(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = evaltrace(
        "score", SAMPLE_RUNS, "--spec", SAMPLE_SPEC, "--store", store, "--json", tmp_path / "r.json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    run_id, folder = stored_run(result.stderr)
    assert folder == str(store) and result.stderr.count("\n") == 1
    assert "scores stored" not in result.stdout  # stdout stays the summary
    report = json.loads((tmp_path / "r.json").read_text())
    (run,) = list_runs(store)
    assert (run.run_id, run.gate_passed, run.gate_pass_rate) == (run_id, report["passed"], report["pass_rate"])
    table = read_scores(store, run_id)
    results = [s for e in report["entries"] for sample in e["samples"] for s in sample["scores"]]
    assert table.num_rows == len(results) == run.score_rows
    assert table.column("reason").to_pylist() == [s["reason"] for s in results]


def test_the_default_store_is_under_the_current_folder_and_the_readme_query_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVALTRACE_STORE")
    reports = []
    # The third run forks: its scores are a folder of parts, which the query's glob must reach too.
    for n, spec in enumerate([[], ["--spec", str(SAMPLE_SPEC)], ["--spec", str(SAMPLE_SPEC), "--workers", "2"]]):
        result = evaltrace("score", SAMPLE_RUNS, *spec, "--json", f"r{n}.json", cwd=tmp_path)
        assert result.returncode in (0, 1), result.stderr
        assert stored_run(result.stderr)[1] == str(Path(".evaltrace") / "store")
        reports.append(json.loads((tmp_path / f"r{n}.json").read_text()))
    monkeypatch.chdir(tmp_path)
    rows = duckdb.sql(README_QUERY).fetchall()
    ids = [run.run_id for run in list_runs(tmp_path / ".evaltrace" / "store")]
    assert list((tmp_path / ".evaltrace" / "store" / "scores" / ids[2]).glob("part-*.parquet"))
    expected = [
        (run_id, count["scorer"], count["passed"], count["failed"])
        for run_id, report in zip(ids, reports, strict=True)
        for count in sorted(report["scorer_counts"], key=lambda c: c["scorer"])
    ]
    assert [(run_id, scorer, passed, failed) for _, run_id, scorer, passed, failed, *_ in rows] == expected
    rates = {(row[1], row[2]): row[-1] for row in rows}
    assert rates[(ids[1], "tool_call_validity")] == 1.0
    assert any(rate is not None and rate < 1 for rate in rates.values())  # the defaults fail some sample traces


def test_evaltrace_store_names_the_store_and_no_store_skips_it(tmp_path: Path) -> None:
    env_store = tmp_path / "from-env"
    result = evaltrace(
        "score", SAMPLE_RUNS, "--spec", SAMPLE_SPEC, cwd=tmp_path, env={"EVALTRACE_STORE": str(env_store)}
    )
    assert result.returncode == 0 and stored_run(result.stderr)[1] == str(env_store)
    assert len(list_runs(env_store)) == 1

    skipped = evaltrace("score", SAMPLE_RUNS, "--spec", SAMPLE_SPEC, "--no-store", cwd=tmp_path)
    assert skipped.returncode == 0 and skipped.stderr == ""
    assert len(list_runs(env_store)) == 1 and not (tmp_path / ".evaltrace").exists()

    both = evaltrace("score", SAMPLE_RUNS, "--store", env_store, "--no-store", cwd=tmp_path)
    assert (both.returncode, both.stderr) == (2, "Error: --store and --no-store: give one or the other\n")


@pytest.mark.parametrize("where", ["store", "store/runs"])
def test_a_file_in_the_way_of_the_store_is_one_error_line_before_scoring(tmp_path: Path, where: str) -> None:
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_text("not a folder")
    result = evaltrace("score", SAMPLE_RUNS, "--store", "store", "--json", "r.json", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "Error: store: cannot write the score store: a file is in the way of a folder\n"
    assert result.stdout == "" and not (tmp_path / "r.json").exists()


def test_run_refuses_an_unwritable_store_before_the_agent_runs(tmp_path: Path) -> None:
    (tmp_path / "store").write_text("not a folder")
    ran = evaltrace(
        "run", "--agent", "samples.agent:run", "--spec", SAMPLE_SPEC, "--out", tmp_path / "ran",
        "--store", tmp_path / "store", cwd=REPO,
    )  # fmt: skip
    assert ran.returncode == 2 and ran.stderr.startswith("Error: ") and ran.stderr.count("\n") == 1
    assert not (tmp_path / "ran").exists()  # the agent never ran


def test_run_adds_its_scoring_to_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ran = evaltrace(
        "run", "--agent", "samples.agent:run", "--spec", SAMPLE_SPEC, "--out", tmp_path / "ran",
        "--store", store, "--json", tmp_path / "r.json", cwd=REPO,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    run_id, _ = stored_run(ran.stderr)
    (run,) = list_runs(store)
    assert run.run_id == run_id and run.inputs == [str(tmp_path / "ran")] and run.entries == 6


def test_hostile_reasons_round_trip_unchanged(tmp_path: Path) -> None:
    record_runs(tmp_path / "runs")
    write_spec(tmp_path)
    result = evaltrace(
        "score", "runs", "--spec", "evals.yaml", "--plugin", PLUGIN, "--store", "store", "--json", "r.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    run_id, _ = stored_run(result.stderr)
    report = json.loads((tmp_path / "r.json").read_text())
    reasons = [s["reason"] for e in report["entries"] for sample in e["samples"] for s in sample["scores"]]
    stored = read_scores(tmp_path / "store", run_id)
    rows = stored.to_pylist()
    assert [r["reason"] for r in rows if r["sample_index"] is not None] == reasons
    assert any(HOSTILE in (reason or "") for reason in reasons)


def test_two_scorings_at_once_both_land(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "evaltrace.cli", "score", str(SAMPLE_RUNS), "--spec", str(SAMPLE_SPEC)]
    procs = [
        subprocess.Popen([*command, "--store", "store"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    ids = []
    for proc in procs:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        ids.append(stored_run(stderr.decode())[0])
    assert sorted(run.run_id for run in list_runs(tmp_path / "store")) == sorted(ids) and ids[0] != ids[1]
    assert not [p for p in (tmp_path / "store").rglob(".*")]  # no temporary file left
