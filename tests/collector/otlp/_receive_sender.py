"""A separate process recording spans and log records with the real OTel SDK, for the receiver tests.

`python _receive_sender.py PROTOCOL ENDPOINT PARQUET_DIR RUN_ID` records the same telemetry into
two exporters at once: the SDK's own OTLP exporter (`http` = OTLP/HTTP protobuf, `grpc`) sending
to ENDPOINT, and evaltrace's in-process Parquet exporters writing PARQUET_DIR with RUN_ID. So the
files `evaltrace collect` writes can be compared with the in-process exporter's for the very same
spans. What is recorded exercises every stored field: two resources, scopes with versions and
attributes, every attribute type (bytes included), a payload over the large-attribute threshold,
events, links with attributes, every kind, an error status, a remote parent, dropped counts, and
GenAI log records (a map body inside a span, a text body outside any).
"""

from __future__ import annotations

import sys
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.log_exporter import ParquetLogExporter

LARGE = "the forecast says " + "sunny " * 400
REMOTE = SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0x00F067AA0BA902B7, True, TraceFlags(1))


def exporters(protocol: str, endpoint: str) -> tuple[Any, Any]:
    """The SDK's OTLP span and log exporters for `protocol`."""
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        return GrpcSpans(endpoint=endpoint, insecure=True), GrpcLogs(endpoint=endpoint, insecure=True)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces"), OTLPLogExporter(endpoint=f"{endpoint}/v1/logs")


def record_trace(tracer: trace.Tracer, n: int) -> None:
    """One agent trace with every kind of field."""
    parent = trace.set_span_in_context(NonRecordingSpan(REMOTE))
    link = Link(REMOTE, {"link.reason": "follows", "link.n": n})
    with tracer.start_as_current_span(f"invoke_agent {n}", parent, kind=SpanKind.SERVER, links=[link]) as root:
        root.set_attributes({"gen_ai.operation.name": "invoke_agent", "s": "tëxt", "b": True, "i": 2**40, "f": 0.5})
        root.set_attributes({"ss": ["a", "b"], "ii": [1, 2], "ff": [1.5], "bb": [True], "raw": b"\x00\xffbytes"})
        root.set_attribute("gen_ai.output.messages", LARGE)
        for extra in range(10):  # over the limit: dropped and counted
            root.set_attribute(f"extra.{extra}", extra)
        root.add_event("gen_ai.choice", {"index": 0, "finish": ["stop"]})
        with tracer.start_as_current_span("execute_tool get_weather", kind=SpanKind.CLIENT) as tool:
            tool.set_attribute("gen_ai.tool.name", "get_weather")
            tool.set_status(Status(StatusCode.ERROR, "tool timed out"))
        for kind in (SpanKind.INTERNAL, SpanKind.PRODUCER, SpanKind.CONSUMER):
            with tracer.start_as_current_span(f"step {kind.name}", kind=kind) as step:
                step.set_status(Status(StatusCode.OK))


def record_logs(provider: LoggerProvider, tracer: trace.Tracer) -> None:
    """GenAI log records: one inside a span (map body), one outside any span (text body)."""
    logger = provider.get_logger("genai.events", "0.2", attributes={"lib": "x"})
    with tracer.start_as_current_span("chat"):
        logger.emit(
            body={"role": "user", "parts": [{"type": "text", "content": "weather?"}], "n": None},
            event_name="gen_ai.user.message",
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            attributes={"gen_ai.system": "openai", "nested": {"k": [1, "two"]}},
        )
    token = otel_context.attach(otel_context.Context())
    try:
        logger.emit(body="plain text", attributes={"i": 7}, timestamp=1_700_000_000_000_000_001)
    finally:
        otel_context.detach(token)


def main(protocol: str, endpoint: str, parquet_dir: str, run_id: str) -> None:
    """Record into both exporters and flush them."""
    otlp_spans, otlp_logs = exporters(protocol, endpoint)
    parquet_spans = ParquetSpanExporter(parquet_dir, run_id=run_id)
    limits = SpanLimits(max_span_attributes=20)
    providers = []
    for resource in (Resource({"service.name": "agent", "deploy.n": 3}), Resource({"service.name": "tools"})):
        provider = TracerProvider(resource=resource, span_limits=limits)
        provider.add_span_processor(BatchSpanProcessor(otlp_spans))
        provider.add_span_processor(SimpleSpanProcessor(parquet_spans))
        providers.append(provider)
        tracer = provider.get_tracer("agent.framework", "1.2.3", attributes={"scope.attr": "yes"})
        for n in range(3):
            record_trace(tracer, n)
    log_provider = LoggerProvider(resource=Resource({"service.name": "agent"}))
    log_provider.add_log_record_processor(BatchLogRecordProcessor(otlp_logs))
    log_provider.add_log_record_processor(SimpleLogRecordProcessor(ParquetLogExporter(parquet_dir, run_id=run_id)))
    record_logs(log_provider, providers[0].get_tracer("chat"))
    for provider in providers:
        provider.force_flush()
    log_provider.force_flush()
    for provider in providers:
        provider.shutdown()
    log_provider.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:5])
