"""A proxy named by the environment never sees the headers `replay` sends to a loopback or plain-HTTP backend.

OTLP headers carry keys (Langfuse's Basic auth, Phoenix's API key). The HTTP exporter's session
and the gRPC channel use the environment's proxies only for HTTPS to another host: a plain-HTTP
request hands a proxy its headers in clear, and a loopback backend behind a proxy is the proxy's
machine. Here every proxy variable names a proxy that refuses everything: the replay must reach
the backend directly, with its header, and the proxy must have been asked nothing.
"""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from _receive_process import rows, running_collector
from _send_fixtures import OtlpReceiver, evaltrace, record_run, running_receiver
from recording_proxy import recording_proxy

SECRET = base64.b64encode(b"pk-lf-public:sk-lf-proxy-test").decode()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("proxy") / "runs"
    record_run(folder)
    return folder


def test_http_replay_to_loopback_skips_the_proxy_and_keeps_its_header(runs: Path) -> None:
    receiver = OtlpReceiver(required_header=("Authorization", f"Basic {SECRET}"))
    with recording_proxy() as proxy, running_receiver(receiver):
        env = {**proxy.environment(), "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Basic%20{SECRET}"}
        done = evaltrace("replay", runs, "--endpoint", receiver.endpoint, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("sent 2 traces, 4 spans"), done.stdout
    assert receiver.requests and all(r.headers["authorization"] == f"Basic {SECRET}" for r in receiver.requests)
    assert proxy.requests == []


def test_grpc_replay_to_loopback_skips_the_proxy_and_keeps_its_header(runs: Path, tmp_path: Path) -> None:
    with recording_proxy() as proxy, running_collector(tmp_path / "collected", "--run-id", "c") as collector:
        env = {**proxy.environment(), "OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Basic%20{SECRET}"}
        endpoint = f"http://{collector.grpc}"
        done = evaltrace("replay", runs, "--endpoint", endpoint, "--protocol", "grpc", "--timeout", "5", env=env)
        assert done.returncode == 0, done.stderr
        assert collector.stop() == 0, collector.err
    assert len(rows(tmp_path / "collected", drop=("run_id",))) == 4
    assert proxy.requests == []
