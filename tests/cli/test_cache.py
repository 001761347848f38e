"""The traces cache through the real CLI: `evaltrace score` (subprocesses) writes it, reads it back on a
re-scoring, rebuilds after a file changes, skips it with `--no-cache`; `evaltrace clean --cache` empties it.

Every run points EVALTRACE_CACHE_DIR at the test's own folder.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from cli_process import evaltrace

SAMPLE_RUNS = Path(__file__).resolve().parents[2] / "samples" / "runs"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    for path in SAMPLE_RUNS.glob("*.parquet"):
        shutil.copy(path, folder)
    return folder


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "cache"


def _score(runs: Path, cache_dir: Path, report: Path, *extra: str) -> dict[str, Any]:
    done = evaltrace("score", runs, "--json", report, "--no-store", *extra, env={"EVALTRACE_CACHE_DIR": str(cache_dir)})
    assert done.returncode == 1, done.stderr  # the sample run has one failing trace
    assert "Error" not in done.stderr
    result: dict[str, Any] = json.loads(report.read_text())
    result.pop("created_at")
    return result


def _tables(cache_dir: Path) -> list[Path]:
    return sorted((cache_dir / "traces").glob("*.parquet"))


def test_a_rescoring_reads_the_cache_and_reports_the_same(runs: Path, cache_dir: Path, tmp_path: Path) -> None:
    first = _score(runs, cache_dir, tmp_path / "first.json")
    (table,) = _tables(cache_dir)
    written = table.stat().st_mtime_ns
    second = _score(runs, cache_dir, tmp_path / "second.json")
    assert second == first
    assert _tables(cache_dir) == [table]
    assert table.stat().st_mtime_ns >= written  # read (touched), not replaced by another build
    assert pq.read_metadata(table).num_rows == first["counts"]["traces"]


def test_the_rescoring_scores_what_the_table_holds(runs: Path, cache_dir: Path, tmp_path: Path) -> None:
    # Proof that the second scoring reads the table rather than the spans: plant a failure in it.
    _score(runs, cache_dir, tmp_path / "first.json")
    (table,) = _tables(cache_dir)
    planted = pq.read_table(table)
    failed = pa.array(["error"] * planted.num_rows)
    planted = planted.set_column(planted.schema.get_field_index("status"), planted.schema.field("status"), failed)
    error = pa.array(["planted failure"] * planted.num_rows)
    planted = planted.set_column(planted.schema.get_field_index("error"), planted.schema.field("error"), error)
    pq.write_table(planted, table)
    warm = _score(runs, cache_dir, tmp_path / "warm.json")
    assert warm["counts"]["failed"] == warm["counts"]["entries"] == 6
    reasons = [s["reason"] for e in warm["entries"] for s in e["scores"] if s["scorer"] == "outcome"]
    assert all("planted failure" in reason for reason in reasons)
    # --no-cache neither reads the planted table nor replaces it.
    uncached = _score(runs, cache_dir, tmp_path / "uncached.json", "--no-cache")
    assert uncached["counts"]["failed"] == 1
    assert pc.all(pc.equal(pq.read_table(table).column("status"), "error")).as_py()


def test_a_touched_file_is_rebuilt(runs: Path, cache_dir: Path, tmp_path: Path) -> None:
    first = _score(runs, cache_dir, tmp_path / "first.json")
    (span_file,) = runs.glob("*.parquet")
    stat = span_file.stat()
    os.utime(span_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert _score(runs, cache_dir, tmp_path / "second.json") == first
    assert len(_tables(cache_dir)) == 2  # a new key; the old table stays until cleaned


def test_no_cache_writes_nothing(runs: Path, cache_dir: Path, tmp_path: Path) -> None:
    _score(runs, cache_dir, tmp_path / "report.json", "--no-cache")
    assert not cache_dir.exists()


def test_a_damaged_cache_is_rebuilt_silently(runs: Path, cache_dir: Path, tmp_path: Path) -> None:
    first = _score(runs, cache_dir, tmp_path / "first.json")
    (table,) = _tables(cache_dir)
    table.write_bytes(table.read_bytes()[:100])
    assert _score(runs, cache_dir, tmp_path / "second.json") == first
    assert pq.read_metadata(table).num_rows == first["counts"]["traces"]  # written again, whole


def test_clean_cache_empties_it_and_says_how_much(runs: Path, cache_dir: Path, tmp_path: Path) -> None:
    _score(runs, cache_dir, tmp_path / "report.json")
    _score(runs, cache_dir, tmp_path / "report.json", "--workers", "2")  # one table per shard
    tables = _tables(cache_dir)
    assert len(tables) == 3
    size = sum(path.stat().st_size for path in tables)
    done = evaltrace("clean", "--cache", env={"EVALTRACE_CACHE_DIR": str(cache_dir)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == f"traces tables {cache_dir / 'traces'}: removed 3 entries, {size} bytes"
    assert _tables(cache_dir) == []
    again = evaltrace("clean", "--cache", env={"EVALTRACE_CACHE_DIR": str(cache_dir)})
    assert again.stdout.splitlines()[0] == f"traces tables {cache_dir / 'traces'}: removed 0 entries, 0 bytes"


def test_clean_without_a_path_or_cache_is_a_usage_error() -> None:
    done = evaltrace("clean")
    assert done.returncode == 2
    assert done.stderr.startswith("Error: ")
    assert "--cache" in done.stderr
    assert "Traceback" not in done.stderr


def test_sharded_rescoring_is_warm_and_the_same(runs: Path, cache_dir: Path, tmp_path: Path) -> None:
    single = _score(runs, cache_dir, tmp_path / "single.json", "--workers", "1")
    cold = _score(runs, cache_dir, tmp_path / "cold.json", "--workers", "2")
    tables = _tables(cache_dir)
    warm = _score(runs, cache_dir, tmp_path / "warm.json", "--workers", "2")
    assert _tables(cache_dir) == tables
    assert cold == warm
    assert [e["trace_id"] for e in warm["entries"]] == [e["trace_id"] for e in single["entries"]]
