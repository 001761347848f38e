"""OTLP/HTTP: POST /v1/traces and /v1/logs, protobuf or JSON bodies, gzip or not.

Answers follow the OTLP specification: 200 with the export response (a partial success when
items were rejected) in the request's encoding; 400 with a `google.rpc.Status` for a body that
cannot be read; 503 with Retry-After (retryable) when the queue is full or the receiver is
stopping; 401 without the configured bearer token; 404, 405, 411, 413 (checked on the declared
length, on the bytes read and on the decompressed size, so a gzip bomb never grows past the
limit) and 415 for what is not an OTLP request. A request whose body was not read closes its
connection, so the unread bytes are never taken for the next request.

Refusals are answered as soon as the headers show them (a 413 on the declared length, 401, 404,
415, 503), often while the client is still sending the body. Closing a socket with unread bytes
makes the kernel reset the connection: the client's send fails and it may never read the answer
(and a 503's Retry-After). So a connection closed after an error answer closes gracefully
("lingering close"): the answer is sent, the sending side shut (the client sees its end), and what
the client still sends is read and discarded until it closes, for at most `wire.LINGER_SECONDS`
and `_LINGER_BYTES` (or the request limit, if larger), then the socket is closed. 200 answers and
kept-alive connections never linger.

Slow and many clients are bounded before any other check: at most `max_connections` connections
have a thread (one more is answered 503 at once and closed), a request's headers must arrive
within `header_seconds` of its first bytes, and a silent connection is closed after
`_IDLE_SECONDS`; a body must arrive within `body_seconds` (408 beyond). A client sending
`Expect: 100-continue` gets its `100 Continue` only once the request has passed every check and
holds a request permit; otherwise it gets the refusal (a 503 when every permit is taken) before
it sends the body.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.receive.config import Address, ReceiverConfig, bearer_matches
from evaltrace.collector.otlp.receive.handling import Intake, Refused, parse_body
from evaltrace.collector.otlp.receive.wire import (
    CHUNKED,
    DeadlineReader,
    Malformed,
    TooLarge,
    chunk_size,
    content_length,
    framing,
    gunzip,
    linger_close,
)
from evaltrace.collector.otlp.receive.workqueue import Signal

logger = logging.getLogger("evaltrace")

ROUTES = {"/v1/traces": Signal.TRACES, "/v1/logs": Signal.LOGS}
_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"
_IDLE_SECONDS = 30.0
"""A connection silent this long (between requests, or in the middle of a body) is closed."""
_LINGER_BYTES = 8 * 1024 * 1024
"""At most this much (or the request limit, if larger) is read and discarded after a refusal, so a
batch a little over the limit can be sent to its end, but nobody makes the receiver read gigabytes
(discarded 64 KB at a time: no memory is held)."""
_TRAILER_LINES = 32
"""Trailer lines read after a chunked body's last chunk; more is a malformed request."""


class HttpError(Exception):
    """An answer other than 200: status, message, and whether the connection must close."""

    def __init__(self, status: int, message: str, *, close: bool = False, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.close, self.headers = status, close, headers or {}


@dataclass
class HttpContext:
    """What every request handler shares."""

    config: ReceiverConfig
    intake: Intake
    permits: threading.BoundedSemaphore
    stopping: threading.Event


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the listen backlog: a burst of connections waits for accept()

    def __init__(self, address: Address, context: HttpContext) -> None:
        self.address_family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
        self.context = context
        self._slots = threading.BoundedSemaphore(context.config.max_connections)
        status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="too many connections")
        self._full = _answer(503, status.SerializeToString(), {"Retry-After": str(context.config.retry_after_seconds)})
        super().__init__((address.host, address.port), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A thread for the connection if under the cap; otherwise a 503 from this (accepting) thread."""
        if not self._slots.acquire(blocking=False):
            self.context.intake.refusals.note("HTTP 503", "too many connections")
            _refuse(request, self._full)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One log line, not the standard library's traceback on stderr (a client's reset, or a bug)."""
        logger.debug("evaltrace collect: a connection from %s failed", client_address[0], exc_info=True)


def _answer(status: int, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Content-Type: application/x-protobuf"]
    lines += [f"Content-Length: {len(body)}", "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _refuse(sock: socket.socket, answer: bytes) -> None:
    # A small answer fits the new socket's send buffer: no wait. What the client already sent is
    # read first (without waiting), so closing does not reset the connection over the answer.
    try:
        sock.setblocking(False)
        sock.sendall(answer)
        while sock.recv(65536):
            pass
    except OSError:  # nothing more to read now (BlockingIOError), or the client is gone
        pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "evaltrace-collect"
    sys_version = ""  # the Server header names no Python version
    timeout = _IDLE_SECONDS
    server: _Server

    linger = False
    """Set when an error answer closes the connection, its body possibly unread."""
    reader: DeadlineReader

    def setup(self) -> None:
        """Reads through a `DeadlineReader`, so a request's headers have a deadline."""
        super().setup()
        self.rfile.close()  # the standard library's reader (it holds a reference to the socket)
        self.reader = DeadlineReader(self.connection, _IDLE_SECONDS)
        self.rfile = io.BufferedReader(self.reader)

    def handle_one_request(self) -> None:
        """One request, its headers due within `header_seconds` of its first bytes."""
        self.reader.arm(self.server.context.config.header_seconds)
        super().handle_one_request()

    def parse_request(self) -> bool:
        try:
            return super().parse_request()
        finally:
            self.reader.disarm()  # the body is read under the idle timeout

    def handle_expect_100(self) -> bool:
        """No `100 Continue` yet: it is sent once the request is accepted for reading (`_continue`)."""
        return True

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("evaltrace collect: %s " + format, self.client_address[0], *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own error answers (malformed request, unknown method) linger too."""
        self.server.context.intake.refusals.note(f"HTTP {code}", message or HTTPStatus(code).phrase)
        super().send_error(code, message, explain)
        self.linger = True

    def finish(self) -> None:
        """After the last answer is flushed: a lingering close if a refusal left a body unread."""
        super().finish()
        if self.linger:
            linger_close(self.connection, max(_LINGER_BYTES, self.server.context.config.max_body_bytes))

    def do_POST(self) -> None:
        """One export request."""
        is_json = _media_type(self.headers.get("Content-Type")) == _JSON
        try:
            signal, is_json = self._check()
            self._send_message(200, self._export(signal, is_json), is_json)
        except HttpError as exc:
            self._send_error(exc, is_json)
        except TimeoutError:  # the body's deadline, or a silent client
            self._send_error(HttpError(408, "the body did not arrive in time", close=True), is_json)
        except ConnectionError:
            self.close_connection = True

    def _not_allowed(self) -> None:
        path = urlsplit(self.path).path
        error = HttpError(405, "use POST", close=True, headers={"Allow": "POST"})
        if path not in ROUTES:
            error = HttpError(404, f"no such path (OTLP paths: {', '.join(ROUTES)})", close=True)
        self._send_error(error, False)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

    def do_HEAD(self) -> None:
        """HEAD gets its status line and headers only."""
        self.close_connection = True
        status = 405 if urlsplit(self.path).path in ROUTES else 404
        self.server.context.intake.refusals.note(f"HTTP {status}", "HEAD: use POST")
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    # -- checks, in the order a client can act on them ------------------------------------

    def _check(self) -> tuple[Signal, bool]:
        context = self.server.context
        signal = ROUTES.get(urlsplit(self.path).path)
        if signal is None:
            raise HttpError(404, f"no such path (OTLP paths: {', '.join(ROUTES)})", close=True)
        if context.stopping.is_set():
            raise _busy(context.config, "the receiver is shutting down")
        self._check_token(context.config)
        media = _media_type(self.headers.get("Content-Type"))
        if media not in (_PROTOBUF, _JSON):
            shown = (media or "none")[:80].encode("ascii", "replace").decode()
            raise HttpError(415, f"content type {shown!r}: use {_PROTOBUF} or {_JSON}", close=True)
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        if encoding not in ("identity", "gzip"):
            raise HttpError(415, "content encoding: use gzip or none", close=True)
        return signal, media == _JSON

    def _check_token(self, config: ReceiverConfig) -> None:
        if config.token is None:
            return
        given = (self.headers.get("Authorization") or "").encode("latin-1", "replace")
        if not bearer_matches(config.token, given):
            raise HttpError(401, "a valid bearer token is required", close=True, headers={"WWW-Authenticate": "Bearer"})

    def _export(self, signal: Signal, is_json: bool) -> Any:
        context = self.server.context
        if not context.permits.acquire(blocking=False):
            raise _busy(context.config, "too many requests in progress")
        try:
            body = self._body(context.config.max_body_bytes)
            try:
                request = parse_body(signal, body, is_json, context.intake.limits)
            except InputError as exc:
                context.intake.count(bad_requests=1)
                raise HttpError(400, str(exc)) from None
            try:
                return context.intake.accept(signal, request)
            except Refused as exc:
                raise _busy(context.config, str(exc)) from None
        finally:
            context.permits.release()

    def _body(self, limit: int) -> bytes:
        self.reader.arm(self.server.context.config.body_seconds, now=True)
        try:
            raw = self._read_raw(limit)
        except (Malformed, TooLarge) as exc:  # the connection may hold unread bytes: it closes
            raise _bad_body(exc, close=True) from None
        finally:
            self.reader.disarm()
        if (self.headers.get("Content-Encoding") or "").strip().lower() != "gzip":
            return raw
        try:
            return gunzip(raw, limit)
        except (Malformed, TooLarge) as exc:  # the body was read: the connection may go on
            raise _bad_body(exc, close=False) from None

    def _read_raw(self, limit: int) -> bytes:
        length_text = framing(self.headers.get_all("Content-Length") or [], self.headers.get_all("Transfer-Encoding"))
        if length_text == CHUNKED:
            self._continue()
            return self._read_chunked(limit)
        if length_text is None:
            raise HttpError(411, "Content-Length is required", close=True)
        length = content_length(length_text, limit)
        self._continue()
        body = self.rfile.read(length)
        if len(body) < length:
            raise Malformed("the body ended before Content-Length bytes")
        return body

    def _continue(self) -> None:
        """The `100 Continue` a client may wait for, now that its body will be read."""
        expect = (self.headers.get("Expect") or "").strip().lower()
        if expect == "100-continue" and self.request_version >= "HTTP/1.1":
            self.send_response_only(100)
            self.end_headers()

    def _read_chunked(self, limit: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while size := chunk_size(self.rfile.readline(1024)):
            total += size
            if total > limit:
                raise TooLarge(f"the body is over the limit of {limit} bytes")
            parts.append(self.rfile.read(size))
            if len(parts[-1]) < size or self.rfile.readline(8) != b"\r\n":
                raise Malformed("malformed chunked body")
        for _ in range(_TRAILER_LINES):  # trailers, up to the blank line
            if not self.rfile.readline(1024).strip():
                return b"".join(parts)
        raise Malformed("malformed chunked body (too many trailer lines)")

    # -- answers ------------------------------------------------------------------------

    def _send_message(self, status: int, message: Any, is_json: bool, headers: dict[str, str] | None = None) -> None:
        """A protobuf message (an export response, a `google.rpc.Status`) in the request's encoding."""
        if is_json:
            body = json.dumps(json_format.MessageToDict(message), separators=(",", ":")).encode()
        else:
            body = message.SerializeToString()
        self._send(status, body, _JSON if is_json else _PROTOBUF, headers or {})

    def _send_error(self, error: HttpError, is_json: bool) -> None:
        self.server.context.intake.refusals.note(f"HTTP {error.status}", str(error))
        if error.close:
            self.close_connection = self.linger = True
        status = status_pb2.Status(code=_RPC_CODES.get(error.status, code_pb2.UNKNOWN), message=str(error))
        headers = {**error.headers, **({"Connection": "close"} if error.close else {})}
        self._send_message(error.status, status, is_json, headers)

    def _send(self, status: int, body: bytes, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


_RPC_CODES = {
    400: code_pb2.INVALID_ARGUMENT,
    401: code_pb2.UNAUTHENTICATED,
    404: code_pb2.NOT_FOUND,
    405: code_pb2.UNIMPLEMENTED,
    408: code_pb2.DEADLINE_EXCEEDED,
    411: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.RESOURCE_EXHAUSTED,
    415: code_pb2.INVALID_ARGUMENT,
    503: code_pb2.UNAVAILABLE,
}


def _media_type(header: str | None) -> str:
    return (header or "").split(";")[0].strip().lower()


def _bad_body(error: Malformed | TooLarge, close: bool) -> HttpError:
    return HttpError(413 if isinstance(error, TooLarge) else 400, str(error), close=close)


def _busy(config: ReceiverConfig, why: str) -> HttpError:
    # 503 is retryable for OTLP clients, which wait Retry-After seconds before sending again. The
    # connection closes: the body may be unread (refused before reading), and a client that is
    # told to wait has no use for it.
    return HttpError(503, why, close=True, headers={"Retry-After": str(config.retry_after_seconds)})


class HttpListener:
    """The OTLP/HTTP server on its own thread."""

    def __init__(self, address: Address, context: HttpContext) -> None:
        self._server = _Server(address, context)
        host, port = self._server.server_address[:2]
        self.address = Address(str(host), int(port))
        self._thread = threading.Thread(target=self._server.serve_forever, name="evaltrace-collect-http", daemon=True)

    def start(self) -> None:
        """Accept connections."""
        self._thread.start()

    def stop(self) -> None:
        """Accept no more connections (requests in progress finish; the caller waits for them)."""
        self._server.shutdown()
        self._server.server_close()
