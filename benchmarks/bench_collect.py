"""Receiver benchmark: `evaltrace collect` throughput over OTLP/HTTP protobuf and OTLP/gRPC, against
the in-process exporter writing the same spans.

Run: `.venv/bin/python benchmarks/bench_collect.py [--traces N] [--clients C] [--repeats R]`

The workload is made once, outside every measured window: N agent-shaped traces (6 spans each:
an `invoke_agent` span, three `chat` spans with a 2 KB output attribute and an event, two
`execute_tool` spans) recorded by the real SDK, cut into export requests of 512 spans (the SDK
batch processor's size) and encoded by the SDK's own OTLP encoder.

- `in-process`: `ParquetSpanExporter.export()` of the same SDK spans in batches of 512, then
  `shutdown()` (files written): the baseline, in this process.
- `http`, `grpc`: `evaltrace collect` as a subprocess (the other listener off); C client threads
  in this process send the pre-encoded requests on kept-alive connections (HTTP) or one channel
  (gRPC), then the receiver is stopped with SIGTERM, so the measured time includes writing and
  closing every file. Client-side encoding is not measured: the SDK pays it in the app anyway.

Reported per mode: spans/s by wall time (first request sent to the receiver's exit), the
receiver's CPU seconds (from its rusage) and its peak RSS; every span is checked to be in the
files (the count must equal what was sent).
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

BATCH = 512
_ANNOUNCED = re.compile(r"OTLP/(HTTP|gRPC)  (?:http://)?(\S+)")


def make_spans(traces: int) -> list[Any]:
    """The workload's SDK spans (6 per trace)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "bench-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench", "1.0")
    output = "The weather in Paris is sunny with a light breeze. " * 40  # ~2 KB
    for n in range(traces):
        with tracer.start_as_current_span("invoke_agent weather") as root:
            root.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather", "case": n})
            for turn in range(3):
                with tracer.start_as_current_span("chat gpt-4o") as chat:
                    chat.set_attributes({"gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 120 + turn})
                    chat.set_attribute("gen_ai.output.messages", output)
                    chat.add_event("gen_ai.choice", {"index": 0})
                if turn < 2:
                    with tracer.start_as_current_span("execute_tool get_weather") as tool:
                        tool.set_attributes(
                            {"gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": f"call_{n}_{turn}"}
                        )
    return list(exporter.get_finished_spans())


def in_process(spans: list[Any], folder: Path) -> tuple[float, float]:
    """(wall s, CPU s) of exporting `spans` with ParquetSpanExporter and closing its files."""
    from evaltrace.collector.recorder.exporter import ParquetSpanExporter

    exporter = ParquetSpanExporter(folder, run_id="bench")
    wall, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(spans), BATCH):
        exporter.export(spans[start : start + BATCH])
    exporter.shutdown()
    return time.perf_counter() - wall, time.process_time() - cpu


def _start_receiver(folder: Path, protocol: str, extra: list[str]) -> tuple[subprocess.Popen[str], str]:
    http_arg, grpc_arg = ("127.0.0.1:0", "off") if protocol == "http" else ("off", "127.0.0.1:0")
    command = [sys.executable, "-m", "evaltrace.cli", "collect", "--dir", str(folder), "--run-id", "bench"]
    process = subprocess.Popen(
        [*command, "--http", http_arg, "--grpc", grpc_arg, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if (found := _ANNOUNCED.search(line)) is not None:
            return process, found.group(2)
    raise RuntimeError(f"collect did not start: {process.stderr.read() if process.stderr else ''}")


def _http_sender(address: str) -> Callable[[bytes], None]:
    host, port = address.rsplit(":", 1)
    local = threading.local()

    def send(body: bytes) -> None:
        if not hasattr(local, "connection"):
            local.connection = http.client.HTTPConnection(host, int(port), timeout=60)
        while True:
            local.connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
            response = local.connection.getresponse()
            response.read()
            if response.status != 503:
                break
            time.sleep(float(response.getheader("Retry-After") or 1))  # as the SDK's exporter does
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}")

    return send


def _grpc_sender(address: str) -> tuple[Callable[[bytes], None], Any]:
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    channel = grpc.insecure_channel(address)
    stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
    parsed: dict[int, Any] = {}

    def send(body: bytes) -> None:
        while True:
            try:
                stub.Export(parsed[id(body)], timeout=60)
                return
            except grpc.RpcError as error:
                if error.code() is not grpc.StatusCode.UNAVAILABLE:
                    raise
                time.sleep(1.0)  # the SDK's exporter backs off about as long

    def prepare(bodies: list[bytes]) -> None:  # parsed before timing, as an app holds messages
        for body in bodies:
            parsed[id(body)] = ExportTraceServiceRequest.FromString(body)

    send.prepare = prepare  # type: ignore[attr-defined]
    return send, channel


def over_otlp(
    bodies: list[bytes], folder: Path, protocol: str, clients: int, extra: list[str]
) -> tuple[float, float, int]:
    """(wall s, receiver CPU s, receiver peak RSS KB) of sending `bodies` to `evaltrace collect`."""
    process, address = _start_receiver(folder, protocol, extra)
    started_cpu = _cpu_seconds(process.pid)  # start-up (imports, binding) is not throughput
    channel = None
    if protocol == "http":
        send = _http_sender(address)
    else:
        send, channel = _grpc_sender(address)
        send.prepare(bodies)  # type: ignore[attr-defined]
    shares = [bodies[i::clients] for i in range(clients)]
    threads = [threading.Thread(target=lambda share=share: [send(b) for b in share]) for share in shares]
    wall = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    peak = _PeakWatch(process.pid)
    process.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - wall
    peak.stop()
    if channel is not None:
        channel.close()
    if status != 0:
        raise RuntimeError(f"collect exited with {status}")
    return elapsed, usage.ru_utime + usage.ru_stime - started_cpu, peak.kb


class _PeakWatch:
    """The receiver's peak RSS (VmHWM), read until it exits: its rusage's `ru_maxrss` would be this
    (large) process's, inherited through fork and exec."""

    def __init__(self, pid: int) -> None:
        self.kb = 0
        self._path = Path(f"/proc/{pid}/status")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(0.02):
            try:
                text = self._path.read_text()
            except OSError:  # exited
                return
            found = re.search(r"VmHWM:\s+(\d+)", text)
            if found is not None:
                self.kb = max(self.kb, int(found.group(1)))

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _count(folder: Path) -> int:
    return sum(pq.read_metadata(path).num_rows for path in folder.glob("*.parquet"))


def main() -> None:
    """Run every mode `--repeats` times and print the medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--queue-items", type=int, help="the receiver's --queue-items (default: its own)")
    args = parser.parse_args()
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    spans = make_spans(args.traces)
    bodies = [bytes(encode_spans(spans[i : i + BATCH]).SerializeToString()) for i in range(0, len(spans), BATCH)]
    print(f"{len(spans)} spans in {len(bodies)} requests of up to {BATCH}; load average {os.getloadavg()[0]:.1f}")
    results: dict[str, list[tuple[float, float, int]]] = {"in-process": [], "http": [], "grpc": []}
    for _ in range(args.repeats):
        for mode in results:
            with tempfile.TemporaryDirectory() as temp:
                folder = Path(temp)
                if mode == "in-process":
                    wall, cpu = in_process(spans, folder)
                    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                    results[mode].append((wall, cpu, rss))
                else:
                    extra = ["--queue-items", str(args.queue_items)] if args.queue_items else []
                    results[mode].append(over_otlp(bodies, folder, mode, args.clients, extra))
                written = _count(folder)
                if written != len(spans):
                    raise RuntimeError(f"{mode}: {written} spans written of {len(spans)}")
    print("| mode | wall s | CPU s | spans/s (wall) | peak RSS MB |")
    print("|---|---:|---:|---:|---:|")
    for mode, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        peak_mb = max(r[2] for r in runs) / 1024
        print(f"| {mode} | {wall:.2f} | {cpu:.2f} | {len(spans) / wall:,.0f} | {peak_mb:.0f} |")


if __name__ == "__main__":
    main()
