"""`evaltrace collect` says what it refuses while it runs, and its summary counts every kind.

A receiver that only answered its refusals left the user blind: an app with the wrong token or
content type lost every span and the terminal showed nothing until the exit summary, which left
401, 413, 415 and 503 out. Each kind now gets a line on stderr (at most one per kind per 10 s, the
next saying how many were not shown), with any client-sent text escaped, and the summary counts
every kind, HTTP statuses and gRPC codes. A gRPC message that is not an export request is
INVALID_ARGUMENT with the decoder's reason (it was INTERNAL, a server fault clients may retry).
"""

from __future__ import annotations

import socket
from pathlib import Path

import grpc
import pytest
from _receive_process import NO_PROXY, Collector, rows, running_collector
from test_receive_requests import PROTOBUF, _body, post

from evaltrace.collector.otlp.receive.refusals import RefusalLog, summary

_SERVICES = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_one_line_per_kind_per_interval_with_the_count_not_shown() -> None:
    said: list[str] = []
    clock = _Clock()
    log = RefusalLog(said.append, every=10.0, clock=clock)
    for _ in range(5):
        log.note("HTTP 401", "a valid bearer token is required")
    log.note("HTTP 415", "content type 'text/plain': use application/x-protobuf")
    clock.now += 10.0
    log.note("HTTP 401", "a valid bearer token is required")
    assert said == [
        "evaltrace collect: refused a request: HTTP 401: a valid bearer token is required",
        "evaltrace collect: refused a request: HTTP 415: content type 'text/plain': use application/x-protobuf",
        "evaltrace collect: refused a request: HTTP 401: a valid bearer token is required (and 4 more since the "
        "last such line)",
    ]
    assert log.counts() == {"HTTP 401": 6, "HTTP 415": 1}
    assert summary(log.counts()) == "HTTP 401 x6, HTTP 415 x1"


def test_a_reason_quoting_a_client_is_inert_and_short() -> None:
    said: list[str] = []
    RefusalLog(said.append).note("HTTP 400", "bad JSON near '\x1b]0;owned\x07\n::error::x'" + "y" * 500)
    assert len(said) == 1 and "\x1b" not in said[0] and "\n" not in said[0] and "\x07" not in said[0]
    assert "\n::error::" not in said[0] and len(said[0]) < 300


def _grpc_garbage(collector: Collector, signal: str, metadata: tuple[tuple[str, str], ...] = ()) -> grpc.RpcError:
    with grpc.insecure_channel(str(collector.grpc), options=NO_PROXY) as channel:
        export = channel.unary_unary(_SERVICES[signal], request_serializer=None, response_deserializer=None)
        with pytest.raises(grpc.RpcError) as error:
            export(b"\xff\xff\xff\xffnot protobuf", timeout=30, metadata=metadata)
    return error.value


def _raw_post(collector: Collector, content_type: bytes) -> bytes:
    host, port = str(collector.http).rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: t\r\nContent-Type: " + content_type + b"\r\n")
        sock.sendall(b"Content-Length: 2\r\n\r\nxx")
        return sock.recv(100)


def test_refusals_are_said_once_per_kind_and_counted_in_the_summary(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    with running_collector(folder, "--max-request-mb", "0.01") as collector:
        for _ in range(3):
            assert _raw_post(collector, b"text/\x1b[2Jevil").startswith(b"HTTP/1.1 415")
        assert post(collector, "/nowhere", b"x", PROTOBUF)[0] == 404
        assert post(collector, "/v1/traces", b"x", PROTOBUF, method="GET")[0] == 405
        assert post(collector, "/v1/traces", b"\xff\xff\xff", PROTOBUF)[0] == 400
        assert post(collector, "/v1/traces", bytes(20_000), PROTOBUF)[0] == 413
        for signal in ("traces", "logs"):
            error = _grpc_garbage(collector, signal)
            assert error.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert error.details().startswith(f"not a valid OTLP protobuf {signal} request")
        assert post(collector, "/v1/traces", _body(2, "fine"), PROTOBUF)[0] == 200
        assert collector.stop() == 0, collector.err
    lines = collector.err.splitlines()
    said = [line.split(": ")[2] for line in lines if line.startswith("evaltrace collect: refused a request: ")]
    assert sorted(said) == ["HTTP 400", "HTTP 404", "HTTP 405", "HTTP 413", "HTTP 415", "gRPC INVALID_ARGUMENT"]
    assert "\x1b" not in collector.err and "\\x1b" in collector.err
    assert (
        "  9 requests refused: HTTP 400 x1, HTTP 404 x1, HTTP 405 x1, HTTP 413 x1, HTTP 415 x3, "
        "gRPC INVALID_ARGUMENT x2"
    ) in collector.stdout.splitlines()
    assert sorted(r["name"] for r in rows(folder)) == ["fine 0", "fine 1"]


def test_unauthenticated_requests_are_said_and_counted(tmp_path: Path) -> None:
    token = "h8-refusal-token"
    with running_collector(tmp_path / "runs", env={"EVALTRACE_COLLECT_TOKEN": token}) as collector:
        for _ in range(2):
            assert post(collector, "/v1/traces", _body(1, "no token"), PROTOBUF)[0] == 401
        assert _grpc_garbage(collector, "traces").code() is grpc.StatusCode.UNAUTHENTICATED
        # With the token, the garbage reaches the decoder: INVALID_ARGUMENT, not UNAUTHENTICATED.
        authorized = (("authorization", f"Bearer {token}"),)
        assert _grpc_garbage(collector, "logs", authorized).code() is grpc.StatusCode.INVALID_ARGUMENT
        assert collector.stop() == 0, collector.err
    assert "3 requests refused" not in collector.stdout
    assert "4 requests refused: HTTP 401 x2, gRPC INVALID_ARGUMENT x1, gRPC UNAUTHENTICATED x1" in collector.stdout
    assert sum("refused a request: HTTP 401" in line for line in collector.err.splitlines()) == 1
    assert token not in collector.stdout + collector.err
