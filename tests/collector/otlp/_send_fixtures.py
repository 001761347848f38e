"""What the replay and send-results tests share: a run recorded by the real exporters, and an OTLP/HTTP receiver.

`record_run` writes two agent traces with the real OTel SDK through evaltrace's own span and
log-record exporters: two resources, two instrumentation scopes, every attribute type, a large
attribute (stored apart), events, links with attributes, an error status, dropped counts and a
GenAI log record with a map body emitted inside a span.

`OtlpReceiver` is a small OTLP/HTTP server on 127.0.0.1 that decodes each protobuf request with
the official `opentelemetry-proto` classes and keeps it with its path and headers; it answers
like a backend (200 with an empty response), or refuses requests lacking a required header.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from _serving import serving
from opentelemetry._logs import SeverityNumber
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.log_exporter import ParquetLogExporter

LARGE_TEXT = "the forecast says " + "sunny " * 400
"""Over the store's 1 KiB threshold: kept in the `large_attributes` column, merged back on reading."""


def record_run(folder: Path, project: str = "replay-test") -> None:
    """Record two traces (and one log record) into `folder` with the real SDK and evaltrace's exporters."""
    resource = Resource({"service.name": "replay-app", "openinference.project.name": project, "deploy.n": 3})
    other = Resource({"service.name": "tool-service", "openinference.project.name": project})
    spans = ParquetSpanExporter(folder, run_id="replayed")
    logs = ParquetLogExporter(folder, run_id="replayed")
    # A limit of 12 attributes makes the SDK drop some, so the dropped count is recorded too.
    providers = [TracerProvider(resource=r, span_limits=SpanLimits(max_span_attributes=12)) for r in (resource, other)]
    for provider in providers:
        provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    agent = providers[0].get_tracer("agent.lib", "1.2.3")
    tools = providers[1].get_tracer("tool.lib", "0.9", attributes={"scope.kind": "tools"})
    logger = logger_provider.get_logger("genai.events", "2.0")
    with agent.start_as_current_span("invoke_agent first", kind=SpanKind.SERVER) as first:
        first.set_attributes({"gen_ai.operation.name": "invoke_agent", "input.value": LARGE_TEXT})
        with agent.start_as_current_span("chat fake-model", kind=SpanKind.CLIENT) as chat:
            chat.set_attributes(
                {"gen_ai.request.model": "m", "n": 7, "ratio": 0.25, "ok": True, "tags": ["a", "b"], "ns": [1, 2]}
            )
            chat.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop"}, timestamp=1_700_000_000_123_456_789)
            logger.emit(
                event_name="gen_ai.user.message",
                timestamp=time.time_ns(),
                body={"content": "weather in Rome?", "role": "user"},
                attributes={"gen_ai.provider.name": "openai"},
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
            )
        first_context = first.get_span_context()
    with agent.start_as_current_span("invoke_agent second", links=[Link(first_context, {"link.why": "retry"})]):
        with tools.start_as_current_span("execute_tool get_weather") as tool:
            tool.set_attributes({f"extra.{i}": i for i in range(15)})  # 3 over the limit: dropped
            tool.set_status(Status(StatusCode.ERROR, "tool failed"))
    for provider in providers:
        provider.shutdown()
    logger_provider.shutdown()


def evaltrace(
    *args: str | Path, env: dict[str, str] | None = None, timeout: float = 120, python: str | Path = sys.executable
) -> subprocess.CompletedProcess[str]:
    """`python -m evaltrace.cli ARGS` as a subprocess, without inherited OTLP or proxy settings, plus `env`.

    `python` is the interpreter (another venv's, to run evaltrace on other OTel releases).
    """
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OTEL_") and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "grpc_proxy")
    }
    clean["NO_PROXY"] = clean["no_proxy"] = "127.0.0.1,localhost"
    return subprocess.run(
        [str(python), "-m", "evaltrace.cli", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**clean, **(env or {})},
    )


def any_value(value: AnyValue) -> Any:
    """An OTLP `AnyValue` as the Python value the store gives back (arrays as lists, maps as dicts)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    """OTLP key-values as a dict."""
    return {kv.key: any_value(kv.value) for kv in pairs}


@dataclass
class Received:
    """One request the receiver took."""

    path: str
    headers: dict[str, str]
    """Lower-case names."""
    body: Any
    """The decoded `ExportTraceServiceRequest` or `ExportLogsServiceRequest`."""


@dataclass
class OtlpReceiver:
    """An OTLP/HTTP receiver on 127.0.0.1 (see the module docstring)."""

    prefix: str = ""
    """Path before `/v1/traces` and `/v1/logs`, e.g. Langfuse's `/api/public/otel`."""
    required_header: tuple[str, str] | None = None
    """`(name, value)` every request must carry, else 401 (names are matched case-insensitively and kept lower case)."""
    serve_logs: bool = True
    """False: `/v1/logs` answers 404, as a traces-only backend (Phoenix) does."""
    redirect_to: str | None = None
    """A base URL: every request is answered 307 to it (plus the request's path), and not kept."""
    requests: list[Received] = field(default_factory=list)
    port: int = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"

    def spans(self) -> list[tuple[Any, Any, Any]]:
        """Every received span as `(resource_spans, scope_spans, span)`."""
        return [
            (rs, ss, span)
            for r in self.requests
            if isinstance(r.body, ExportTraceServiceRequest)
            for rs in r.body.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]

    def log_records(self) -> list[tuple[Any, Any, Any]]:
        """Every received log record as `(resource_logs, scope_logs, record)`."""
        return [
            (rl, sl, record)
            for r in self.requests
            if isinstance(r.body, ExportLogsServiceRequest)
            for rl in r.body.resource_logs
            for sl in rl.scope_logs
            for record in sl.log_records
        ]


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    kinds: dict[str, tuple[Any, Any]] = {
        f"{receiver.prefix}/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse)
    }
    if receiver.serve_logs:
        kinds[f"{receiver.prefix}/v1/logs"] = (ExportLogsServiceRequest, ExportLogsServiceResponse)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name http.server calls
            data = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                data = gzip.decompress(data)
            kind = kinds.get(self.path)
            required = receiver.required_header
            if receiver.redirect_to is not None:
                return self._answer(307, b"", location=receiver.redirect_to + self.path)
            if kind is None:
                return self._answer(404, b"")
            if required is not None and self.headers.get(required[0]) != required[1]:
                return self._answer(401, b"")
            body = kind[0].FromString(data)
            receiver.requests.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self._answer(200, kind[1]().SerializeToString())

        def _answer(self, code: int, payload: bytes, location: str | None = None) -> None:
            self.send_response(code)
            if location is not None:
                self.send_header("Location", location)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output to the assertions

    return Handler


@contextmanager
def running_receiver(receiver: OtlpReceiver) -> Iterator[OtlpReceiver]:
    """`receiver` listening on a free port of 127.0.0.1 until the block ends."""
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))) as port:
        receiver.port = port
        yield receiver
