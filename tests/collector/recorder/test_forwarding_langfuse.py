"""The README's Langfuse forwarding example, run as written, against a local OTLP/HTTP receiver.

Langfuse takes OTLP over HTTP at `<host>/api/public/otel/v1/traces`, authenticated by HTTP Basic
auth with the project's public and secret keys. The receiver here answers as an OTLP/HTTP server
does and keeps what it was sent, so the test checks the path, the Authorization header and that
the spans sent are the spans recorded locally, id for id.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fake_llm import FakeLLM, call, text_turn, tool_turn
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from readme_blocks import bash_block, recipes, run_lines, user_env

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans

PUBLIC, SECRET = "pk-lf-test-1234", "sk-lf-test-5678"


@dataclass
class Received:
    """One request the receiver got."""

    path: str
    authorization: str | None
    ingestion_version: str | None
    span_ids: list[str] = field(default_factory=list)


class _Receiver(BaseHTTPRequestHandler):
    received: list[Received]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        request = ExportTraceServiceRequest.FromString(body)
        ids = [s.span_id.hex() for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        version = self.headers.get("x-langfuse-ingestion-version")
        self.received.append(Received(self.path, self.headers.get("Authorization"), version, ids))
        reply = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def langfuse() -> Iterator[tuple[str, list[Received]]]:
    received: list[Received] = []
    handler = type("Handler", (_Receiver,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


def test_readme_langfuse_example_sends_spans_with_basic_auth(
    langfuse: tuple[str, list[Received]], tmp_path: Path
) -> None:
    host, received = langfuse
    (tmp_path / "app.py").write_text(recipes()["openai"].app, encoding="utf-8")
    with FakeLLM([tool_turn(call("get_weather", {"city": "Paris"})), text_turn("18C in Paris.")]) as llm:
        env = user_env(llm, LANGFUSE_HOST=host, LANGFUSE_PUBLIC_KEY=PUBLIC, LANGFUSE_SECRET_KEY=SECRET)
        (done,) = run_lines([bash_block("# Langfuse:")], tmp_path, env)
    assert done.stdout.strip() == "18C in Paris."
    assert received, f"nothing reached the receiver:\n{done.stderr}"
    expected_auth = "Basic " + base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()
    assert {r.path for r in received} == {"/api/public/otel/v1/traces"}
    assert {r.authorization for r in received} == {expected_auth}
    assert {r.ingestion_version for r in received} == {"4"}  # Langfuse's real-time ingestion asks for it
    local = {s.span_id for s in read_spans(resolve_paths([tmp_path / "runs"]))}
    assert sorted(i for r in received for i in r.span_ids) == sorted(local)
    assert PUBLIC not in done.stderr and SECRET not in done.stderr
