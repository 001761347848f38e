"""`evaltrace runs` and `evaltrace clean` through real subprocesses on real recorded files."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import evaltrace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from evaltrace.collector.recorder.exporter import ParquetSpanExporter


def _spans(service: str, shape: list[int], error_in: int | None = None) -> list[list[ReadableSpan]]:
    """One list of finished spans per trace; trace k has a root and shape[k] - 1 children."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    traces = []
    for k, size in enumerate(shape):
        memory.clear()
        with tracer.start_as_current_span(f"{service} root {k}"):
            for i in range(size - 1):
                with tracer.start_as_current_span(f"step {i}") as span:
                    if k == error_in and i == 0:
                        span.set_status(Status(StatusCode.ERROR, "failed"))
        traces.append(list(memory.get_finished_spans()))
    return traces


def _record(folder: Path, run_id: str, files: list[list[ReadableSpan]]) -> None:
    exporter = ParquetSpanExporter(folder, run_id=run_id, flush_interval=3600)
    for spans in files:
        exporter.export(spans)
        assert exporter.force_flush()
    exporter.shutdown()


@pytest.fixture()
def runs_folder(tmp_path: Path) -> Path:
    """3 traces of 4, 2 and 6 spans (run a, service agent) + 1 of 3 spans (run b, service tools).

    The 6-span trace is split over two files and one file is written twice (a fork duplicate).
    """
    folder = tmp_path / "runs"
    t4, t2, t6 = _spans("agent", [4, 2, 6], error_in=0)
    (t3,) = _spans("tools", [3])
    _record(folder, "run-a", [t4 + t2, t6[:3], t6[3:], t2])
    _record(folder, "run-b", [t3])
    return folder


def test_runs_shows_the_right_counts(runs_folder: Path) -> None:
    result = evaltrace("runs", runs_folder)

    assert result.returncode == 0, result.stderr
    lines = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    assert lines["files"].strip() == "5"
    assert lines["spans"].strip() == "15 (2 duplicate rows ignored)"
    assert lines["traces"].strip() == "4"
    assert lines["spans/trace"].strip() == "min 2, median 3.5, max 6"
    assert lines["error spans"].strip() == "1"
    assert lines["services"].strip() == "agent (12), tools (3)"
    assert lines["run ids"].strip() == "run-a (12), run-b (3)"
    assert "time range" in lines and "stale" not in result.stdout


def test_runs_json_and_traces_table(runs_folder: Path) -> None:
    result = evaltrace("runs", f"{runs_folder}/*.parquet", "--json", "--traces")

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["spans"], data["duplicate_spans"], data["traces"]) == (15, 2, 4)
    assert data["spans_per_trace"] == {"min": 2, "median": 3.5, "max": 6}
    assert sorted((t["root"], t["spans"], t["errors"]) for t in data["trace_list"]) == [
        ("agent root 0", 4, 1),
        ("agent root 1", 2, 0),
        ("agent root 2", 6, 0),
        ("tools root 0", 3, 0),
    ]
    assert data["start_time"] <= data["end_time"]

    table = evaltrace("runs", runs_folder, "--traces").stdout
    assert sum(1 for line in table.splitlines() if " agent root " in line or " tools root " in line) == 4


def test_runs_notes_stale_inflight_and_clean_removes_only_dead_ones(runs_folder: Path) -> None:
    dead_proc = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_proc.wait()
    host = socket.gethostname()
    dead = runs_folder / f".inflight-{host}-{dead_proc.pid}-0a1b2c3d.parquet.tmp"
    live = runs_folder / f".inflight-{host}-{os.getpid()}-0a1b2c3e.parquet.tmp"
    dead.write_bytes(b"partial")
    live.write_bytes(b"partial")

    listing = evaltrace("runs", runs_folder)
    assert "stale in-flight files: 1" in listing.stdout

    cleaned = evaltrace("clean", runs_folder)
    assert cleaned.returncode == 0, cleaned.stderr
    assert cleaned.stdout.splitlines() == [f"removed {dead}"]
    assert live.exists() and not dead.exists()
    assert evaltrace("clean", runs_folder).stdout.strip() == "no stale in-flight files"


@pytest.mark.parametrize(
    ("make", "fragment"),
    [
        pytest.param(lambda d: f"{d}/*.parquet", "no files match", id="empty-glob"),
        pytest.param(lambda d: d / "missing.parquet", "missing.parquet: no such file", id="missing"),
        pytest.param(lambda d: _bad(d, b""), "empty.parquet: not a readable Parquet file", id="zero-bytes"),
        pytest.param(lambda d: _bad(d, os.urandom(2048)), "empty.parquet: not a readable Parquet file", id="random"),
    ],
)
def test_bad_input_exits_2_with_one_error_line(tmp_path: Path, make: object, fragment: str) -> None:
    assert callable(make)
    result = evaltrace("runs", make(tmp_path))

    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert fragment in lines[0]
    assert "Traceback" not in result.stderr


def test_clean_of_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    result = evaltrace("clean", tmp_path / "nope")
    assert result.returncode == 2
    assert result.stderr.strip() == f"Error: {tmp_path / 'nope'}: no such folder"


def _bad(folder: Path, content: bytes) -> Path:
    path = folder / "empty.parquet"
    path.write_bytes(content)
    return path
