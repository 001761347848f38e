"""OTLP/JSON against protobuf, the same spans: a receiver's request decoding and an OTLP file import.

Run: `.venv/bin/python benchmarks/bench_otlp_json.py [--requests 20] [--repeats 5]`

Spans are recorded by the real OTel SDK (agent traces: `invoke_agent`, `chat` spans with ~1.5 KB
of messages and token counts, `execute_tool` spans, an event and a link here and there), then
encoded by the SDK's own encoders: protobuf (`opentelemetry-exporter-otlp-proto-common`, what the
OTLP/HTTP protobuf exporter sends) and OTLP/JSON (`opentelemetry-exporter-otlp-json-common`, the
JSON exporters' encoding). Each request holds 512 spans (the `BatchSpanProcessor`'s batch).

- ingest: one request body -> the SDK spans the receiver queues (`receive.handling.parse_body`
  with the SDK's limits, then for protobuf the limits and `decode.decode_spans` as
  `Intake.accept` does). Also, for reference, the way OTLP/JSON was read before (hex ids
  rewritten, `json_format.ParseDict` into the protobuf request, then the protobuf path).
- import: the requests written as an OTLP JSON lines file and as a length-prefixed protobuf file
  (the Collector's file exporter layouts), each imported into run files (`import_otlp`), spans/s.

Times are process CPU seconds, the least of `--repeats` rounds with the ways interleaved (all of it
CPU-bound work; the least is the one least disturbed by other load on a shared machine).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans as json_encode_spans
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind

from evaltrace.collector.otlp.files.framing import OtlpFormat
from evaltrace.collector.otlp.files.importer import ImportTarget, import_otlp
from evaltrace.collector.otlp.receive.handling import parse_body
from evaltrace.collector.otlp.receive.workqueue import Signal
from evaltrace.collector.otlp.wire import decode, limits

SPANS_PER_REQUEST = 512
_WORDS = "the forecast shows mild temperatures light wind rain order shipped city paris tool result".split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def record(count: int, seed: int = 7) -> list[ReadableSpan]:
    """`count` spans of agent traces, recorded by the SDK."""
    rng = random.Random(seed)
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "agent", "deployment.environment": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench.agent", "1.0")
    while len(exporter.get_finished_spans()) < count:
        with tracer.start_as_current_span("invoke_agent weather", kind=SpanKind.INTERNAL) as root:
            root.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"})
            for turn in range(3):
                messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": _text(rng, 200)}]}])
                link = [Link(root.get_span_context(), {"turn": turn})] if turn == 2 else []
                with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, links=link) as chat:
                    chat.set_attributes(
                        {
                            "gen_ai.operation.name": "chat",
                            "gen_ai.request.model": "gpt-4o",
                            "gen_ai.input.messages": messages,
                            "gen_ai.usage.input_tokens": rng.randrange(10_000),
                            "gen_ai.usage.output_tokens": rng.randrange(1_000),
                            "gen_ai.request.temperature": 0.2,
                            "gen_ai.response.finish_reasons": ("tool_call",),
                        }
                    )
                    chat.add_event("gen_ai.choice", {"index": 0})
                with tracer.start_as_current_span("execute_tool get_weather") as tool:
                    tool.set_attributes({"gen_ai.tool.name": "get_weather", "gen_ai.tool.call.result": _text(rng, 30)})
    provider.shutdown()
    return list(exporter.get_finished_spans())[:count]


def _old_json_path(body: bytes) -> list[ReadableSpan]:
    """OTLP/JSON as it was read before: hex ids -> base64, `json_format.ParseDict`, the protobuf path."""
    document = json.loads(body)
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for item in (span, *span.get("links", ())):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if item.get(key):
                            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()
    request = json_format.ParseDict(document, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    limits.hold_span_limits(request, SpanLimits())
    return decode.decode_spans(request).items


def _protobuf_ingest(body: bytes) -> list[ReadableSpan]:
    request = parse_body(Signal.TRACES, body, False, SpanLimits())
    assert isinstance(request, ExportTraceServiceRequest)
    limits.hold_span_limits(request, SpanLimits())
    return decode.decode_spans(request).items


def _json_ingest(body: bytes) -> list[ReadableSpan]:
    decoded = parse_body(Signal.TRACES, body, True, SpanLimits())
    assert isinstance(decoded, decode.Decoded)
    return decoded.items


def best(repeats: int, runs: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Per run, the least process CPU time of `repeats` rounds (the runs interleaved), in seconds."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            started = time.process_time()
            run()
            times[name].append(time.process_time() - started)
    return {name: min(found) for name, found in times.items()}


def _write_files(bodies: list[tuple[bytes, bytes]], folder: Path) -> tuple[Path, Path]:
    jsonl, proto = folder / "spans.jsonl", folder / "spans.pb"
    with jsonl.open("wb") as lines, proto.open("wb") as frames:
        for pb, js in bodies:
            lines.write(js + b"\n")
            frames.write(struct.pack(">I", len(pb)) + pb)
    return jsonl, proto


def _import(path: Path, fmt: OtlpFormat, out: Path, expected: int) -> None:
    done = import_otlp(path, fmt, ImportTarget(out / str(time.perf_counter_ns()), "bench", "w"))
    assert done.spans == expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20, help="512-span requests in each file")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    spans = record(SPANS_PER_REQUEST * args.requests)
    chunks = [spans[i : i + SPANS_PER_REQUEST] for i in range(0, len(spans), SPANS_PER_REQUEST)]
    bodies = [
        (encode_spans(c).SerializeToString(), json.dumps(json_encode_spans(c).to_dict()).encode()) for c in chunks
    ]
    pb, js = bodies[0]
    assert len(_json_ingest(js)) == len(_protobuf_ingest(pb)) == len(_old_json_path(js)) == SPANS_PER_REQUEST
    print(
        f"python {sys.version.split()[0]}; {SPANS_PER_REQUEST}-span request: protobuf {len(pb):,} B, JSON {len(js):,} B"
    )
    ingest = best(
        args.repeats,
        {
            "protobuf": lambda: _protobuf_ingest(pb),
            "JSON": lambda: _json_ingest(js),
            "JSON, before (ParseDict)": lambda: _old_json_path(js),
        },
    )
    print(f"\ningest (one {SPANS_PER_REQUEST}-span request -> SDK spans), CPU, best of {args.repeats}:")
    for name, seconds in ingest.items():
        print(f"  {name:26} {seconds * 1000:8.1f} ms  {seconds / ingest['protobuf']:5.2f}x protobuf")
    with tempfile.TemporaryDirectory() as tmp:
        jsonl, proto = _write_files(bodies, Path(tmp))
        runs: dict[str, Callable[[], Any]] = {}
        for name, path, fmt in (("protobuf", proto, OtlpFormat.PROTO), ("JSON", jsonl, OtlpFormat.JSON)):
            runs[name] = partial(_import, path, fmt, Path(tmp) / f"out-{name}", len(spans))
        _import(proto, OtlpFormat.PROTO, Path(tmp) / "warm-up", len(spans))  # modules loaded, caches warm
        imported = best(args.repeats, runs)
        sizes = f"{jsonl.stat().st_size:,} B JSON lines, {proto.stat().st_size:,} B protobuf"
        print(f"\nimport, CPU, best of {args.repeats} ({len(spans):,} spans; {sizes}):")
        for name, seconds in imported.items():
            rate = len(spans) / seconds
            print(
                f"  {name:26} {seconds:8.2f} s  {rate:9,.0f} spans/s  {seconds / imported['protobuf']:5.2f}x protobuf"
            )


if __name__ == "__main__":
    main()
