"""`evaltrace replay` to a real Phoenix server on 127.0.0.1, over OTLP/HTTP and OTLP/gRPC.

A run is recorded locally first (no backend running), then replayed; Phoenix's REST API must then
hold every span under the same trace and span ids, with the same names, parents and attributes.
Phoenix takes no OTLP logs, so the log records stay behind (`--no-logs`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _phoenix import PhoenixServer, running_phoenix
from _send_fixtures import evaltrace, record_run

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans, split_signals


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_replayed_spans_are_in_phoenix_with_their_original_ids(
    phoenix: PhoenixServer, tmp_path: Path, protocol: str
) -> None:
    project = f"replay-{protocol.replace('/', '-')}"
    record_run(tmp_path / "runs", project=project)  # fresh ids per protocol: Phoenix keeps span ids unique
    span_files, _ = split_signals(resolve_paths([tmp_path / "runs"]))
    stored = list(read_spans(span_files))
    endpoint = phoenix.base_url if protocol == "http/protobuf" else phoenix.grpc_endpoint
    done = evaltrace("replay", tmp_path / "runs", "--endpoint", endpoint, "--protocol", protocol, "--no-logs")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sent 2 traces, 4 spans, 0 log records to ")
    everything = []
    for trace_id in {s.trace_id for s in stored}:
        expected = {s.span_id: (s.name, s.parent_span_id) for s in stored if s.trace_id == trace_id}
        got = phoenix.wait_for_spans(project, trace_id, count=len(expected))
        seen = {s["context"]["span_id"]: (s["name"], s["parent_id"]) for s in got}
        assert seen == expected, f"Phoenix holds {seen}. Log tail:\n{phoenix.log_tail()}"
        everything += got
        for span in got:
            assert span["context"]["trace_id"] == trace_id
            original = next(s for s in stored if s.span_id == span["context"]["span_id"])
            for key in ("gen_ai.request.model", "n", "gen_ai.operation.name"):
                if key in original.attributes:
                    assert span["attributes"][key] == original.attributes[key]
    tool = next(s for s in everything if s["name"] == "execute_tool get_weather")
    assert tool["status_code"] == "ERROR" and tool["status_message"] == "tool failed"


def test_phoenix_takes_no_logs_and_replay_says_what_to_do(phoenix: PhoenixServer, tmp_path: Path) -> None:
    record_run(tmp_path / "runs", project="replay-with-logs")
    done = evaltrace("replay", tmp_path / "runs", "--endpoint", phoenix.base_url)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --endpoint {phoenix.base_url}/v1/logs: the backend answered HTTP 405 Method Not Allowed; nothing "
        "sent (does the backend take OTLP logs? --no-logs sends spans only)"
    ]
