"""Round trip through evaltrace's own receiver: a recorded run, replayed to `evaltrace collect`, comes back identical.

The run is recorded by the in-process exporters, replayed (a subprocess) over OTLP/HTTP and over
OTLP/gRPC to `evaltrace collect` (another subprocess), and the run files the receiver writes must
hold the same rows as the originals, column for column: ids, parents, times, kinds, statuses,
attributes (the large one included), events, links, resources, scopes, dropped counts and the
log record. Only what names the writer differs: the run id, and each log record's `log_id`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _otlp_file_fixtures import record_rich
from _receive_process import rows, running_collector
from _send_fixtures import evaltrace, record_run


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_a_replayed_run_is_collected_into_identical_run_files(tmp_path: Path, protocol: str) -> None:
    record_run(tmp_path / "runs")
    with running_collector(tmp_path / "collected", "--run-id", "collected") as collector:
        endpoint = collector.http_url if protocol == "http/protobuf" else f"http://{collector.grpc}"
        done = evaltrace("replay", tmp_path / "runs", "--endpoint", endpoint, "--protocol", protocol)
        assert done.returncode == 0, done.stderr
        assert collector.stop() == 0, collector.err
    original = rows(tmp_path / "runs", drop=("run_id",))
    assert len(original) == 4
    assert rows(tmp_path / "collected", drop=("run_id",)) == original
    original_logs = rows(tmp_path / "runs", logs=True, drop=("run_id", "log_id"))
    assert len(original_logs) == 1
    assert rows(tmp_path / "collected", logs=True, drop=("run_id", "log_id")) == original_logs


def test_otlp_json_files_replay_like_the_run_files_recorded_beside_them(tmp_path: Path) -> None:
    # The same telemetry written by the official OTLP JSON file exporters and by evaltrace's own:
    # replaying the JSON files must deliver what the run files hold (log records outside a span,
    # a plain-text body and bytes attributes included).
    (tmp_path / "recorded").mkdir()
    writers = record_rich(tmp_path / "recorded")
    with running_collector(tmp_path / "collected", "--run-id", "collected") as collector:
        done = evaltrace("replay", writers.traces_json, writers.logs_json, "--endpoint", collector.http_url)
        assert done.returncode == 0, done.stderr
        assert collector.stop() == 0, collector.err
    assert done.stdout.startswith("sent 2 traces, 4 spans, 3 log records to ")
    assert rows(tmp_path / "collected", drop=("run_id",)) == rows(writers.parquet, drop=("run_id",))
    logs = ("run_id", "log_id")
    assert rows(tmp_path / "collected", logs=True, drop=logs) == rows(writers.parquet, logs=True, drop=logs)
