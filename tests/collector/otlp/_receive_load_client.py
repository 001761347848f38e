"""A load-test client process: `python _receive_load_client.py PROTOCOL ENDPOINT SECONDS BATCH TIMEOUT`.

Records batches of BATCH spans with the real SDK (a tracer whose spans go to a list) and exports
each batch through the SDK's OTLP exporter (`http` or `grpc`) itself, so every acknowledgement
is seen: the exporter returns SUCCESS only when the receiver answered OK (after its own retries
on 503 / UNAVAILABLE, within TIMEOUT seconds). It stops after SECONDS, or at the first batch that
was not acknowledged (the receiver went away), and prints {"acked": N, "failed": M} as JSON.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class _Collect(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def _exporter(protocol: str, endpoint: str, timeout: float) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        return GrpcSpans(endpoint=endpoint, insecure=True, timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=timeout)


def main(protocol: str, endpoint: str, seconds: str, batch: str, timeout: str) -> None:
    """Send batches until the time is up or one fails; print the counts."""
    sink = _Collect()
    provider = TracerProvider(resource=Resource({"service.name": f"load-{protocol}"}))
    provider.add_span_processor(SimpleSpanProcessor(sink))
    tracer = provider.get_tracer("load")
    exporter = _exporter(protocol, endpoint, float(timeout))
    acked = failed = 0
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        sink.spans.clear()
        with tracer.start_as_current_span("request") as root:
            root.set_attribute("gen_ai.operation.name", "invoke_agent")
            for n in range(int(batch) - 1):
                with tracer.start_as_current_span("tool") as span:
                    span.set_attributes({"gen_ai.tool.name": "lookup", "n": n, "text": "some result text " * 4})
        result = exporter.export(list(sink.spans))
        if result is not SpanExportResult.SUCCESS:
            failed += len(sink.spans)
            break
        acked += len(sink.spans)
    print(json.dumps({"acked": acked, "failed": failed}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:6])
