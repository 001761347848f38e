"""Hostile HTTP clients against `evaltrace collect`: each case of issue 28 (items 1, 2, 4, 6, 7).

- a chunk size of `-1` is a malformed body (400 at once), not "read to the end of the connection";
- a gzip body of many empty members decodes in linear time (2 MB of them took 24 s before), and
  a body of several members still decodes to all of them;
- a client sending its headers slowly is cut off after the header deadline, and connections
  beyond the cap are answered 503 at once (150 slow clients were all kept, a thread each);
- `Content-Length: ²` (a digit to `isdigit()`, not to `int()`) and a 5,000-digit length get a 400,
  and the receiver writes no traceback;
- a body trickling in is answered 408 at its deadline;
- a client sending `Expect: 100-continue` while every request permit is taken gets its 503 before
  any `100 Continue`, so it never sends the body into a closing connection.

Everything runs on 127.0.0.1; each test is bounded in time even against a receiver without the fix.
"""

from __future__ import annotations

import gzip
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _receive_process import Collector, rows, running_collector
from google.rpc import status_pb2
from test_receive_refusals import _head, _read_answer
from test_receive_requests import _body

from evaltrace.collector.otlp.receive.config import Address, ReceiverConfig
from evaltrace.collector.otlp.receive.server import Receiver
from evaltrace.collector.recorder.exporter import ExporterSettings


@contextmanager
def _receiver(folder: Path, **fields: Any) -> Iterator[tuple[str, int]]:
    """An in-process receiver (HTTP only) with `fields` as settings, and its address."""
    config = ReceiverConfig(http=Address("127.0.0.1", 0), grpc=None, **fields)
    receiver = Receiver(config, ExporterSettings(directory=folder, run_id="hostile"))
    receiver.start()
    try:
        assert receiver.http is not None
        yield receiver.http.address.host, receiver.http.address.port
    finally:
        receiver.stop()


def _address(collector: Collector) -> tuple[str, int]:
    host, port = str(collector.http).rsplit(":", 1)
    return host, int(port)


def _message(body: bytes) -> str:
    return str(status_pb2.Status.FromString(body).message)


def test_a_negative_chunk_size_is_refused_at_once(tmp_path: Path) -> None:
    # Before: int("-1", 16) == -1, then read(-1) read until the client closed (400 MB took 904 MB).
    head = "POST /v1/traces HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-protobuf\r\n"
    head += "Transfer-Encoding: chunked\r\n\r\n"
    with _receiver(tmp_path) as address, socket.create_connection(address, timeout=5) as sock:
        sock.sendall(head.encode() + b"-1\r\n" + bytes(256 * 1024))  # and the connection stays open
        status, headers, body = _read_answer(sock, until_closed=False)  # a timeout before the fix
    assert (status, headers["connection"]) == (400, "close")
    assert _message(body) == "malformed chunked body"


def _empty_members(size: int) -> bytes:
    member = gzip.compress(b"", mtime=0)
    return member * (size // len(member))


def _post(address: tuple[str, int], body: bytes, headers: str = "", timeout: float = 10) -> tuple[int, bytes]:
    head = f"POST /v1/traces HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-protobuf\r\n{headers}"
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
        status, _, answer = _read_answer(sock, until_closed=False)
    return status, answer


def test_gzip_members_decode_in_linear_time(tmp_path: Path) -> None:
    bomb = _empty_members(4 * 1024 * 1024)  # ~200,000 empty members: over 30 s before (quadratic)
    whole = _body(6, "members")
    several = b"".join(gzip.compress(whole[i : i + 40]) for i in range(0, len(whole), 40))
    with _receiver(tmp_path) as address:
        started = time.monotonic()
        assert _post(address, bomb, "Content-Encoding: gzip\r\n", timeout=8)[0] == 200  # an empty request
        assert time.monotonic() - started < 4
        assert _post(address, several, "Content-Encoding: gzip\r\n")[0] == 200
    assert sorted(r["name"] for r in rows(tmp_path)) == [f"members {n}" for n in range(6)]


def test_the_decoded_size_of_many_members_is_bounded(tmp_path: Path) -> None:
    # Many members, each under the limit, whose sum is over it: refused once the sum passes.
    members = gzip.compress(bytes(300 * 1024)) * 8
    with _receiver(tmp_path, max_body_bytes=1024 * 1024) as address:
        status, answer = _post(address, members, "Content-Encoding: gzip\r\n")
    assert status == 413 and "once decompressed" in _message(answer)


@pytest.mark.parametrize(
    "length",
    [b"\xb2", "\u0661".encode(), b"0" * 5000, b"12345678901234567890123"],
    ids=["superscript-two", "arabic-indic-one", "5000-digits", "23-digits"],
)
def test_a_content_length_that_is_not_ascii_digits_is_a_400(tmp_path: Path, length: bytes) -> None:
    # Header bytes are read as Latin-1: b"\xb2" is "²", a digit to `isdigit()` that int() refuses;
    # before, no answer and a traceback per request (and int() refuses 5,000 digits too). More than
    # 18 digits is no length a request can have (the limit is far below), so it is malformed too.
    with running_collector(tmp_path / "runs") as collector:
        with socket.create_connection(_address(collector), timeout=10) as sock:
            head = b"POST /v1/traces HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-protobuf\r\n"
            sock.sendall(head + b"Content-Length: " + length + b"\r\n\r\n")
            status, _, body = _read_answer(sock, until_closed=False)
        assert collector.stop() == 0
    assert (status, _message(body)) == (400, "Content-Length is not a number (ASCII digits, at most 18)")
    # One line says the request was refused (with the receiver's reason, not the request's bytes).
    assert collector.err.splitlines() == [
        "evaltrace collect: refused a request: HTTP 400: Content-Length is not a number (ASCII digits, at most 18)",
        "evaltrace collect: stopping: writing what was received...",
    ], collector.err


def test_expect_100_continue_gets_its_503_before_any_100(tmp_path: Path) -> None:
    body = _body(2, "expect")
    expecting = _head("/v1/traces", "application/x-protobuf", len(body))[:-2] + b"Expect: 100-continue\r\n\r\n"
    with _receiver(tmp_path, max_concurrent_requests=1) as address:
        with socket.create_connection(address, timeout=10) as holder:
            holder.sendall(_head("/v1/traces", "application/x-protobuf", 1000) + b"x" * 10)  # holds the permit
            time.sleep(0.3)
            with socket.create_connection(address, timeout=10) as sock:
                sock.sendall(expecting)  # and waits, as a client expecting 100 does
                status, headers, answer = _read_answer(sock)  # before: "100 Continue", then the body sent
            assert (status, headers["retry-after"]) == (503, "1")
            assert _message(answer) == "too many requests in progress"
        # With a permit free: 100 Continue, then the body, then 200. The holder's permit is freed by
        # the receiver's thread after it sees the close, so a request sent at once may still get the 503:
        # ask again (a 503 answered before any 100, as above) until the permit is back, within 5 s.
        deadline = time.monotonic() + 5.0
        while True:
            with socket.create_connection(address, timeout=10) as sock:
                sock.sendall(expecting)
                first = sock.recv(1024)
                if first.startswith(b"HTTP/1.1 503") and time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                assert first == b"HTTP/1.1 100 Continue\r\n\r\n"
                sock.sendall(body)
                assert _read_answer(sock, until_closed=False)[0] == 200
                break
    assert sorted(r["name"] for r in rows(tmp_path)) == ["expect 0", "expect 1"]


SLOW_CLIENTS = 150
CONNECTION_CAP = 128  # ReceiverConfig.max_connections' default
HEADER_SECONDS = 10.0  # ReceiverConfig.header_seconds' default


def test_slow_header_senders_are_cut_off_and_connections_capped(tmp_path: Path) -> None:
    # 150 clients each send a request line and then a header line every 2 s (before: all kept,
    # a thread each, for as long as they liked).
    with running_collector(tmp_path / "runs") as collector:
        address = _address(collector)
        socks = [socket.create_connection(address, timeout=10) for _ in range(SLOW_CLIENTS)]
        try:
            started = time.monotonic()
            for sock in socks:
                sock.sendall(b"POST /v1/traces HTTP/1.1\r\n")
            time.sleep(1.0)
            refused = [s for s in socks if _answer_now(s).startswith(b"HTTP/1.1 503")]
            assert len(refused) == SLOW_CLIENTS - CONNECTION_CAP
            open_ = [s for s in socks if s not in refused]
            while open_ and time.monotonic() - started < HEADER_SECONDS + 15:
                open_ = [s for s in open_ if _still_sending(s)]
                time.sleep(2.0)
            assert not open_, f"{len(open_)} slow clients still connected"
            assert time.monotonic() - started < HEADER_SECONDS + 8
        finally:
            for sock in socks:
                sock.close()
        status, _ = _post(address, _body(1, "after"))
        assert status == 200  # the slots were given back


def _answer_now(sock: socket.socket) -> bytes:
    sock.settimeout(0.5)
    try:
        return sock.recv(4096)
    except TimeoutError:
        return b""


def _still_sending(sock: socket.socket) -> bool:
    try:
        sock.sendall(b"X-Slow: 1\r\n")
        sock.settimeout(0.01)
        sock.recv(4096)  # the receiver's end (or any answer) shows the cut
        return False
    except TimeoutError:
        return True
    except OSError:
        return False


def test_a_body_sent_slowly_is_cut_off_at_its_deadline(tmp_path: Path) -> None:
    # A byte every 0.2 s never meets the 30 s idle timeout; the body's own deadline ends it.
    with _receiver(tmp_path, body_seconds=1.0) as address, socket.create_connection(address, timeout=10) as sock:
        sock.sendall(_head("/v1/traces", "application/x-protobuf", 1000))
        started = time.monotonic()
        answer = b""
        while not answer and time.monotonic() - started < 10:
            sock.sendall(b"x")
            answer = _answer_now(sock) if time.monotonic() - started > 0.9 else b""
            time.sleep(0.2)
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert time.monotonic() - started < 4


_SMUGGLED = b"POST /v1/logs HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"


@pytest.mark.parametrize(
    "framing",
    [
        # Both lengths: a proxy in front reading Content-Length takes the smuggled request for body.
        f"Content-Length: {5 + len(_SMUGGLED)}\r\nTransfer-Encoding: chunked\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",  # chunked not alone: the length cannot be trusted
        "Transfer-Encoding: identity\r\nContent-Length: 5\r\n",
        f"Content-Length: 5\r\nContent-Length: {5 + len(_SMUGGLED)}\r\n",  # two lengths
    ],
)
def test_ambiguous_request_framing_is_a_400_that_closes(tmp_path: Path, framing: str) -> None:
    # RFC 9112 6.3: such a request is refused (or at least its connection closed), so bytes one
    # party takes for body are never read as the next request by the other.
    head = f"POST /v1/traces HTTP/1.1\r\nHost: t\r\nContent-Type: application/x-protobuf\r\n{framing}\r\n"
    with _receiver(tmp_path) as address, socket.create_connection(address, timeout=5) as sock:
        sock.sendall(head.encode() + b"0\r\n\r\n" + _SMUGGLED)
        status, headers, body = _read_answer(sock, until_closed=True)  # one answer, then closed
    assert (status, headers["connection"]) == (400, "close")
    assert "Transfer-Encoding" in _message(body) or "Content-Length" in _message(body)
