"""What the OTLP file tests share: the same spans written as run files and as OTLP files, by real exporters.

`Writers(folder)` attaches, to one SDK provider, evaltrace's own exporters (Parquet run files in
`folder/parquet`) and the official OTLP JSON file exporters (`folder/traces.jsonl`,
`folder/logs.jsonl`), plus `ProtoFileExporter`s writing the OpenTelemetry Collector's `file`
exporter layout for `format: proto` (each request as a 4-byte big-endian length and its protobuf
bytes; the requests are made by the SDK's own OTLP protobuf encoder). Every span and log record
thus goes to every file, so what evaltrace reads from the OTLP files can be compared with what
its exporter wrote.

`record_rich` records spans with every field the store keeps: two resources (one with a schema
URL), scopes with versions and attributes, every attribute type (bytes included), a payload over
the large-attribute threshold, events, links with attributes, kinds, an error status, dropped
counts, and GenAI log records inside and outside a span.
"""

from __future__ import annotations

import gzip
import shutil
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.exporter.otlp.json.file._log_exporter import FileLogExporter
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.log_exporter import ParquetLogExporter

LARGE_TEXT = "the forecast says " + "sunny " * 400
"""Over the store's 1 KiB threshold: stored in the `large_attributes` column."""


class ProtoFileExporter(SpanExporter, LogRecordExporter):
    """Writes each export as the Collector's file exporter does with `format: proto`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _write(self, data: bytes) -> None:
        with self.path.open("ab") as out:
            out.write(struct.pack(">I", len(data)) + data)

    def export(self, batch: Sequence[Any]) -> Any:  # type: ignore[override]
        if batch and isinstance(batch[0], ReadableSpan):
            self._write(encode_spans(batch).SerializeToString())
            return SpanExportResult.SUCCESS
        self._write(encode_logs(list(batch)).SerializeToString())
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class Writers:
    """Span and log-record processors writing the same items to run files and OTLP files (see above)."""

    def __init__(self, folder: Path, run_id: str = "original") -> None:
        self.folder = folder
        self.parquet = folder / "parquet"
        self.traces_json, self.logs_json = folder / "traces.jsonl", folder / "logs.jsonl"
        self.traces_proto, self.logs_proto = folder / "traces.pb", folder / "logs.pb"
        self.span_exporters: list[Any] = [
            ParquetSpanExporter(self.parquet, run_id=run_id),
            FileSpanExporter(str(self.traces_json)),
            ProtoFileExporter(self.traces_proto),
        ]
        self.log_exporters: list[Any] = [
            ParquetLogExporter(self.parquet, run_id=run_id),
            FileLogExporter(str(self.logs_json)),
            ProtoFileExporter(self.logs_proto),
        ]

    def tracer_provider(self, resource: Resource, **kwargs: Any) -> TracerProvider:
        provider = TracerProvider(resource=resource, **kwargs)
        for exporter in self.span_exporters:
            provider.add_span_processor(SimpleSpanProcessor(exporter))
        return provider

    def logger_provider(self, resource: Resource) -> LoggerProvider:
        provider = LoggerProvider(resource=resource)
        for exporter in self.log_exporters:
            provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        return provider


def record_rich(folder: Path) -> Writers:
    """Record the rich traces (see the module docstring) to every writer in `folder`."""
    writers = Writers(folder)
    resource = Resource({"service.name": "otlp-app", "deploy.n": 3, "deploy.ok": True}, schema_url="https://s/1.0")
    other = Resource({"service.name": "tool-service"})
    providers = [
        writers.tracer_provider(resource, span_limits=SpanLimits(max_span_attributes=12)),
        writers.tracer_provider(other),
    ]
    logs = writers.logger_provider(resource)
    agent = providers[0].get_tracer("agent.lib", "1.2.3", schema_url="https://scope/1")
    tools = providers[1].get_tracer("tool.lib", "0.9", attributes={"scope.kind": "tools"})
    logger = logs.get_logger("genai.events", "2.0")
    with agent.start_as_current_span("invoke_agent first", kind=SpanKind.SERVER) as first:
        first.set_attributes({"gen_ai.operation.name": "invoke_agent", "input.value": LARGE_TEXT})
        with agent.start_as_current_span("chat model", kind=SpanKind.CLIENT) as chat:
            chat.set_attributes(
                {"gen_ai.request.model": "m", "n": 7, "ratio": 0.25, "ok": True, "tags": ["a", "b"], "ns": [1, 2]}
            )
            chat.set_attribute("blob", b"\x00\xffraw")
            chat.set_attribute("big", 2**62 + 1)
            chat.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop"}, timestamp=1_700_000_000_123_456_789)
            logger.emit(
                event_name="gen_ai.user.message",
                timestamp=1_700_000_000_000_000_001,
                observed_timestamp=1_700_000_000_000_000_002,
                body={"content": "weather in Rome?", "role": "user", "n": [1, 2.5]},
                attributes={"gen_ai.provider.name": "openai"},
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
            )
        context = first.get_span_context()
    with agent.start_as_current_span("invoke_agent second", links=[Link(context, {"link.why": "retry", "k": 2})]):
        with tools.start_as_current_span("execute_tool get_weather", kind=SpanKind.INTERNAL) as tool:
            tool.set_attributes({f"extra.{i}": i for i in range(15)})  # over the limit of 12: dropped, counted
            tool.set_status(Status(StatusCode.ERROR, "tool failed"))
        logger.emit(body="plain text body", severity_number=SeverityNumber.WARN, timestamp=1_700_000_000_000_000_003)
    logger.emit(event_name="outside", body=None, timestamp=1_700_000_000_000_000_004)  # no span
    for provider in providers:  # shuts the shared exporters down too: every file is complete
        provider.shutdown()
    logs.shutdown()
    return writers


def gzipped(path: Path) -> Path:
    """A gzip copy of `path` next to it (`<name>.gz`)."""
    target = path.with_name(path.name + ".gz")
    with path.open("rb") as source, gzip.open(target, "wb") as out:
        shutil.copyfileobj(source, out)
    return target
