"""How fast `evaltrace replay` reads a run and sends it to an OTLP/HTTP receiver on 127.0.0.1.

Records TRACES agent-shaped traces (an agent span, three chat spans with a large attribute and an
event, two tool spans: 6 spans a trace) with the real SDK and evaltrace's exporter, then runs, as
subprocesses, `evaltrace replay --dry-run` (reading and rebuilding SDK spans only) and `evaltrace
replay --endpoint` against a receiver thread in this process that decodes every request and counts
the spans (so the count is checked: nothing lost). Prints wall and CPU seconds, spans/s and the
children's peak RSS.

    .venv/bin/python benchmarks/bench_replay.py [TRACES]   # default 3000 (18,000 spans)
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from evaltrace.collector.recorder.exporter import ParquetSpanExporter

RECEIVED = {"spans": 0, "requests": 0}


def record(folder: Path, traces: int) -> None:
    provider = TracerProvider(resource=Resource({"service.name": "bench-replay"}))
    provider.add_span_processor(BatchSpanProcessor(ParquetSpanExporter(folder, run_id="bench"), max_queue_size=100_000))
    tracer = provider.get_tracer("bench", "1")
    payload = "tokens " * 300
    for n in range(traces):
        with tracer.start_as_current_span("invoke_agent bench", attributes={"gen_ai.operation.name": "invoke_agent"}):
            for turn in range(3):
                with tracer.start_as_current_span("chat m") as chat:
                    chat.set_attributes({"gen_ai.request.model": "m", "gen_ai.output.messages": payload, "n": n})
                    chat.add_event("gen_ai.choice", {"index": turn})
                if turn < 2:
                    with tracer.start_as_current_span("execute_tool t", attributes={"gen_ai.tool.name": "t"}):
                        pass
    provider.shutdown()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        request = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
        RECEIVED["spans"] += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        RECEIVED["requests"] += 1
        body = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def timed(args: list[str]) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    done = subprocess.run([sys.executable, "-m", "evaltrace.cli", *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout.strip()


def main() -> None:
    traces = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        record(runs, traces)
        spans = traces * 6
        size = sum(p.stat().st_size for p in runs.glob("*.parquet")) / 1e6
        print(f"{traces} traces, {spans} spans, {size:.1f} MB of span files")
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        for label, args in (
            ("dry run", ["replay", str(runs), "--dry-run"]),
            ("replay", ["replay", str(runs), "--endpoint", endpoint]),
        ):
            wall, cpu, out = timed(args)
            print(f"{label:8} wall {wall:6.2f} s  cpu {cpu:6.2f} s  {spans / wall:8.0f} spans/s  | {out}")
        server.shutdown()
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(
            f"received {RECEIVED['spans']} spans in {RECEIVED['requests']} requests; children's peak RSS {peak:.0f} MB"
        )
        assert RECEIVED["spans"] == spans, "spans were lost"


if __name__ == "__main__":
    main()
