"""`evaltrace collect` receives the real SDK's OTLP exports (HTTP and gRPC, separate processes) into
the same run files the in-process exporter writes.

The sender (`_receive_sender.py`) records each span and log record into both the SDK's OTLP
exporter (to the receiver) and evaltrace's Parquet exporters (in the sender's process, with the
same run id). The tables must be equal row for row. Columns that differ by design and are left
out of the comparison: `log_id` (each writer numbers its records under its own random writer id);
the file names and file metadata (writer id, host and pid) are the writers' own, too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from _receive_process import clean_env, rows, running_collector

SENDER = Path(__file__).with_name("_receive_sender.py")


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sdk_exports_become_the_in_process_exporters_files(tmp_path: Path, protocol: str) -> None:
    received, in_process = tmp_path / "received", tmp_path / "in-process"
    with running_collector(received, "--run-id", "run-7") as collector:
        endpoint = collector.http_url if protocol == "http" else f"http://{collector.grpc}"
        sent = subprocess.run(
            [sys.executable, str(SENDER), protocol, endpoint, str(in_process), "run-7"],
            capture_output=True,
            text=True,
            timeout=120,
            env=clean_env(),
        )
        assert sent.returncode == 0, sent.stderr
        assert "Failed to export" not in sent.stderr, sent.stderr
        assert collector.stop() == 0, collector.err
    assert "received 31 spans and 2 log records" in collector.stdout

    spans = rows(received)
    assert len(spans) == 31
    assert spans == rows(in_process)
    assert {s["run_id"] for s in spans} == {"run-7"}
    root = next(s for s in spans if s["name"] == "invoke_agent 0")
    assert root["dropped_attributes_count"] > 0 and root["large_attributes"]  # the checks above saw these too
    assert json.loads(root["links"][0]["attributes"]) == {"link.reason": "follows", "link.n": 0}

    logs = rows(received, logs=True, drop=("log_id",))
    assert len(logs) == 2
    assert logs == rows(in_process, logs=True, drop=("log_id",))
    assert {r["event_name"] for r in logs} == {"gen_ai.user.message", None}
