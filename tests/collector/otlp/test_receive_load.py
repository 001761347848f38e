"""`evaltrace collect` under load: back-pressure instead of unbounded buffering, nothing acknowledged lost.

- Back-pressure (in-process receiver on real loopback sockets, its writer held back): a full
  queue answers 503 with Retry-After over HTTP and UNAVAILABLE over gRPC; the SDK's exporter,
  told to retry, succeeds once the writer runs again.
- Load (bounded: 3 client processes for 3 seconds): the spans in the files are exactly the
  spans the clients' exporters had acknowledged, each once; the rate is printed.
- SIGTERM while clients are still sending: everything acknowledged before the receiver went
  away is in the files.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pyarrow.parquet as pq
import pytest
from _receive_process import NO_PROXY, Collector, clean_env, running_collector
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.collector.otlp.receive.config import Address, ReceiverConfig
from evaltrace.collector.otlp.receive.server import Receiver
from evaltrace.collector.recorder.exporter import ExporterSettings

CLIENT = Path(__file__).with_name("_receive_load_client.py")


def _spans(count: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for n in range(count):
        with provider.get_tracer("bp").start_as_current_span(f"span {n}"):
            pass
    return list(exporter.get_finished_spans())


def _post(address: Address, spans: list[ReadableSpan]) -> tuple[int, str | None, str | None]:
    connection = http.client.HTTPConnection(address.host, address.port, timeout=30)
    try:
        body = encode_spans(spans).SerializeToString()
        connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        response = connection.getresponse()
        response.read()
        return response.status, response.getheader("Retry-After"), response.getheader("Connection")
    finally:
        connection.close()


def _span_ids(folder: Path) -> list[str]:
    ids: list[str] = []
    for path in folder.glob("*.parquet"):
        ids.extend(pq.read_table(path, columns=["span_id"]).column("span_id").to_pylist())
    return ids


def test_a_full_queue_answers_retryable_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NO_PROXY", "no_proxy"):  # the SDK exporter below talks to loopback only
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    config = ReceiverConfig(
        http=Address("127.0.0.1", 0), grpc=Address("127.0.0.1", 0), queue_items=10, queue_wait_seconds=0.2
    )
    receiver = Receiver(config, ExporterSettings(directory=tmp_path, run_id="bp"))
    assert receiver.http is not None and receiver.grpc is not None
    receiver.http.start()
    receiver.grpc.start()  # the writer is not started: the queue only fills
    try:
        assert _post(receiver.http.address, _spans(8)) == (200, None, None)
        assert _post(receiver.http.address, _spans(5)) == (503, "1", "close")
        with grpc.insecure_channel(str(receiver.grpc.address), options=NO_PROXY) as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.RpcError) as error:
                stub.Export(encode_spans(_spans(5)), timeout=30)
            assert error.value.code() is grpc.StatusCode.UNAVAILABLE
        # The SDK's exporter retries a 503 after Retry-After; the writer starts meanwhile.
        exporter = OTLPSpanExporter(endpoint=f"http://{receiver.http.address}/v1/traces", timeout=20)
        results: list[Any] = []
        sender = threading.Thread(target=lambda: results.append(exporter.export(_spans(6))))
        sender.start()
        time.sleep(0.5)
        assert receiver.queue.items == 8  # still refused
        receiver.writer.start()
        sender.join(30)
        assert results == [SpanExportResult.SUCCESS]
    finally:
        summary = receiver.stop()
    assert (summary.counts.spans, summary.counts.refused_requests) == (14, 3)
    assert summary.written.spans == 14 and len(_span_ids(tmp_path)) == 14


def _start_clients(collector: Collector, protocols: list[str], seconds: float, batch: int, timeout: float) -> list[Any]:
    processes = []
    for protocol in protocols:
        endpoint = collector.http_url if protocol == "http" else f"http://{collector.grpc}"
        command = [sys.executable, str(CLIENT), protocol, endpoint, str(seconds), str(batch), str(timeout)]
        processes.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
        )
    return processes


def _results(processes: list[Any]) -> list[dict[str, int]]:
    found = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        found.append(json.loads(out.strip().splitlines()[-1]))
    return found


def test_load_from_several_clients_loses_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    with running_collector(folder, "--queue-items", "3000") as collector:
        started = time.monotonic()
        results = _results(_start_clients(collector, ["http", "http", "grpc"], 3, 200, 30))
        elapsed = time.monotonic() - started
        assert collector.stop() == 0, collector.err
    acked = sum(r["acked"] for r in results)
    assert [r["failed"] for r in results] == [0, 0, 0]
    ids = _span_ids(folder)
    assert len(ids) == acked == len(set(ids))
    assert acked >= 3 * 200  # every client got at least one batch through
    assert f"received {acked} spans" in collector.stdout
    print(f"\nload: {acked} spans from 3 clients in {elapsed:.1f} s: {acked / elapsed:.0f} spans/s acknowledged")


def test_sigterm_mid_stream_keeps_everything_acknowledged(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    with running_collector(folder) as collector:
        processes = _start_clients(collector, ["http", "http", "grpc"], 60, 100, 3)
        time.sleep(3)  # the clients are sending by now
        assert collector.stop() == 0, collector.err
        results = _results(processes)
    acked = sum(r["acked"] for r in results)
    assert all(r["failed"] > 0 for r in results)  # each was still sending when the receiver stopped
    assert acked > 0
    ids = _span_ids(folder)
    assert len(ids) == acked == len(set(ids))
