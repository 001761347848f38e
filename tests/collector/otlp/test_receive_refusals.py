"""A refused request's answer reaches the client although it was answered before its body was read.

The receiver answers 413 (declared length over the limit), 404, 405, 415, 501 and the like as
soon as it has the headers, and closes. Closing a socket with unread bytes makes the kernel reset
the connection: the client's send fails, and it may lose the answer; so the receiver shuts its
sending side and reads and discards what the client still sends ("lingering close"), within a
time and a byte bound. One receiver (a subprocess, 1 MB request limit) takes:

- raw-socket clients that send a whole body of several MB without reading first, then read:
  each gets the complete answer, never a reset (20 times each, the race depends on timing);
- the same for a 401 (no bearer token) and a 503 with Retry-After (the receiver stopping), on an
  in-process receiver;
- the OTel SDK's OTLP/HTTP span exporter exporting a batch over the limit: its export fails
  with the 413 (logged as such, the answer names the limit), not with a connection error. (On
  Linux over loopback urllib3 read the 413 even before the lingering close: it ignores the failed
  send and the kernel keeps the answer readable ahead of the reset; this is the end-to-end check.)
- clients that never stop sending, send slowly or go silent (in-process, to see the server's
  threads): each is cut off within the bound, the receiver answers other requests meanwhile, and
  the connection threads end.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from _receive_process import Collector, running_collector
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from evaltrace.collector.otlp.receive.config import Address, ReceiverConfig
from evaltrace.collector.otlp.receive.server import Receiver
from evaltrace.collector.recorder.exporter import ExporterSettings

LIMIT = 1024 * 1024
BODY = 4 * LIMIT
"""What the raw clients send after the headers: several times the limit, far more than the
receiver's socket buffers take without being read."""
CUT_OFF = 15.0
"""A generous upper bound (the receiver's own is a few seconds) for a client to be cut off."""


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with running_collector(tmp_path_factory.mktemp("refusals") / "runs", "--max-request-mb", "1") as running:
        yield running


def _address(collector: Collector) -> tuple[str, int]:
    host, port = str(collector.http).rsplit(":", 1)
    return host, int(port)


def _head(path: str, content_type: str, length: int, method: str = "POST") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: test", f"Content-Type: {content_type}", f"Content-Length: {length}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_answer(sock: socket.socket, *, until_closed: bool = True) -> tuple[int, dict[str, str], bytes]:
    """One answer: status, headers, body (checked complete); then, `until_closed`, the receiver's end."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536) or _ended(data)
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    while len(body) < int(headers["content-length"]):
        body += sock.recv(65536) or _ended(data + body)
    if until_closed:
        assert sock.recv(65536) == b"", "more than one answer"  # a reset raises here
    return int(status_line.split()[1]), headers, body


def _ended(data: bytes) -> bytes:
    raise AssertionError(f"the connection ended in the middle of the answer: {data[:300]!r}")


def _send_body_then_read(address: tuple[str, int], head: bytes) -> tuple[int, dict[str, str], bytes]:
    """Headers, then the whole body in chunks without reading anything, then the answer."""
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(head)
        chunk = bytes(64 * 1024)
        for _ in range(BODY // len(chunk)):
            sock.sendall(chunk)  # a reset from the receiver fails the test here
        return _read_answer(sock)


@pytest.mark.parametrize(
    ("method", "path", "content_type", "code", "message"),
    [
        ("POST", "/v1/traces", "application/x-protobuf", 413, f"the body of {BODY} bytes is over the limit of {LIMIT}"),
        ("POST", "/v1/metrics", "application/x-protobuf", 404, "no such path"),
        ("POST", "/v1/traces", "text/plain", 415, "content type 'text/plain'"),
        ("PUT", "/v1/traces", "application/x-protobuf", 405, "use POST"),
        ("TRACE", "/v1/traces", "application/x-protobuf", 501, "Unsupported method ('TRACE')"),  # the stdlib's
    ],
)
def test_a_body_sent_before_reading_gets_the_complete_answer(
    collector: Collector, method: str, path: str, content_type: str, code: int, message: str
) -> None:
    head = _head(path, content_type, BODY, method)
    for _ in range(20):
        status, headers, body = _send_body_then_read(_address(collector), head)
        assert (status, headers["connection"]) == (code, "close")
        if headers["content-type"] == "application/x-protobuf":
            assert message in status_pb2.Status.FromString(body).message
        else:
            assert message in body.decode()


@contextmanager
def _in_process(folder: Path, token: str | None = None) -> Iterator[tuple[Receiver, tuple[str, int]]]:
    """A receiver in this process (HTTP only, 1 MB limit), and its address."""
    secret = SecretStr(token) if token else None
    config = ReceiverConfig(http=Address("127.0.0.1", 0), grpc=None, token=secret, max_body_bytes=LIMIT)
    receiver = Receiver(config, ExporterSettings(directory=folder, run_id="refusals"))
    receiver.start()
    try:
        assert receiver.http is not None
        yield receiver, (receiver.http.address.host, receiver.http.address.port)
    finally:
        receiver.stop()


def test_a_refused_token_and_a_stopping_receiver_answer_completely(tmp_path: Path) -> None:
    # In-process, its `stopping` set by hand (as stop() does first): 401, then 503 with Retry-After.
    with _in_process(tmp_path, token="t0ken") as (receiver, address):
        head = _head("/v1/traces", "application/x-protobuf", BODY)
        for _ in range(20):
            status, headers, body = _send_body_then_read(address, head)
            assert (status, headers["www-authenticate"]) == (401, "Bearer")
            assert status_pb2.Status.FromString(body).message == "a valid bearer token is required"
        receiver.stopping.set()
        for _ in range(20):
            status, headers, body = _send_body_then_read(address, head)
            assert (status, headers["retry-after"], headers["connection"]) == (503, "1", "close")
            assert status_pb2.Status.FromString(body).message == "the receiver is shutting down"


def _big_spans(count: int) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for n in range(count):
        with provider.get_tracer("refusals").start_as_current_span(f"big {n}") as span:
            span.set_attribute("payload", "x" * 1000)
    return list(exporter.get_finished_spans())


def test_the_sdk_exporter_gets_the_413_not_a_connection_error(
    collector: Collector, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("NO_PROXY", "no_proxy"):  # the exporter talks to loopback only
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    spans = _big_spans(3000)
    size = len(encode_spans(spans).SerializeToString())
    assert size > 2 * LIMIT
    answers: list[requests.Response] = []
    session = requests.Session()
    session.hooks["response"].append(lambda response, *args, **kwargs: answers.append(response))
    exporter = OTLPSpanExporter(endpoint=f"{collector.http_url}/v1/traces", session=session, timeout=20)
    caplog.set_level(logging.WARNING, logger="opentelemetry")
    for attempt in range(5):
        caplog.clear()
        started = time.monotonic()
        assert exporter.export(spans) is SpanExportResult.FAILURE
        assert time.monotonic() - started < 10  # no retries with back-off after connection errors
        (record,) = [r for r in caplog.records if r.name.startswith("opentelemetry.exporter")]
        assert record.getMessage().startswith("Failed to export spans batch code: 413"), record.getMessage()
        assert len(answers) == attempt + 1  # one request, answered (a reset leaves no response)
        status = status_pb2.Status.FromString(answers[-1].content)
        assert f"the body of {size} bytes is over the limit of {LIMIT}" in status.message
    exporter.shutdown()  # type: ignore[no-untyped-call]


def _connection_threads(before: set[threading.Thread]) -> int:
    """Threads serving a connection (socketserver names them so) started since `before` was taken.

    Other tests' servers in this process (an idle keep-alive connection holds its thread for up to
    30 s) must not count: only the threads this test's clients made are.
    """
    return sum("process_request_thread" in t.name and t not in before for t in threading.enumerate())


def _until_cut_off(sock: socket.socket, pause: float, size: int) -> float:
    """Send `size` bytes every `pause` seconds until the receiver cuts the connection off; seconds taken."""
    started = time.monotonic()
    chunk = bytes(size)
    try:
        while time.monotonic() - started < 60:
            sock.sendall(chunk)
            time.sleep(pause)
    except OSError:  # reset by the receiver (or closed by the test on its way out)
        return time.monotonic() - started
    raise AssertionError("the receiver kept reading for a minute")


def _post_small(address: tuple[str, int]) -> tuple[int, float]:
    body = encode_spans(_big_spans(1)).SerializeToString()
    started = time.monotonic()
    with socket.create_connection(address, timeout=30) as sock:
        sock.sendall(_head("/v1/traces", "application/x-protobuf", len(body)) + body)
        return _read_answer(sock, until_closed=False)[0], time.monotonic() - started


def test_clients_that_keep_sending_or_stall_are_cut_off(tmp_path: Path) -> None:
    with _in_process(tmp_path) as (_, address):
        _cut_off_while_answering_others(address)


def _cut_off_while_answering_others(address: tuple[str, int]) -> None:
    head = _head("/v1/traces", "application/x-protobuf", 10**9)
    before = set(threading.enumerate())
    taken: dict[str, float] = {}
    clients = {"endless": (0.0, 65536), "slow": (0.05, 100)}  # the byte bound, the time bound
    sockets = [socket.create_connection(address, timeout=30) for _ in range(3)]
    threads = []
    try:
        for (name, (pause, size)), sock in zip(clients.items(), sockets, strict=False):
            sock.sendall(head)
            work = lambda n=name, s=sock, p=pause, b=size: taken.update({n: _until_cut_off(s, p, b)})  # noqa: E731
            threads.append(threading.Thread(target=work, daemon=True))
            threads[-1].start()
        silent = sockets[2]  # reads its answer (up to the receiver's FIN), then neither sends nor closes
        silent.sendall(head)
        assert _read_answer(silent)[0] == 413
        assert _connection_threads(before) >= 2  # the slow and the silent clients' connections linger
        status, seconds = _post_small(address)
        assert status == 200 and seconds < 5  # the receiver answers others meanwhile
        for thread in threads:
            thread.join(CUT_OFF)
        assert set(taken) == set(clients) and all(s < CUT_OFF for s in taken.values()), taken
        deadline = time.monotonic() + CUT_OFF
        while _connection_threads(before) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _connection_threads(before) == 0  # all ended, the silent client's socket still open
    finally:
        for sock in sockets:
            sock.close()
