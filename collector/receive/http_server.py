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
the client still sends is read and discarded until it closes, for at most `_LINGER_SECONDS` (and
`_LINGER_READ_SECONDS` per read) and `_LINGER_BYTES` (or the request limit, if larger), then the
socket is closed. 200 answers and kept-alive connections never linger.
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
import time
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2

from evaltrace.collector.errors import InputError
from evaltrace.collector.receive.config import Address, ReceiverConfig
from evaltrace.collector.receive.handling import Intake, Refused, parse_body
from evaltrace.collector.receive.workqueue import Signal

logger = logging.getLogger("evaltrace")

ROUTES = {"/v1/traces": Signal.TRACES, "/v1/logs": Signal.LOGS}
_PROTOBUF = "application/x-protobuf"
_JSON = "application/json"
_IDLE_SECONDS = 30.0
"""A connection silent this long (between requests, or in the middle of a body) is closed."""
_LINGER_SECONDS = 2.0
"""At most this long reading what a refused client still sends: on a working link the rest of a
body a little over the default 16 MB limit takes ~1.3 s at 100 Mbit/s, on loopback milliseconds.
A client still sending then is cut off (reset): a refused request must not hold a thread long."""
_LINGER_READ_SECONDS = 1.0
"""A refused client silent this long (neither sending nor closing) is not waited for further."""
_LINGER_BYTES = 8 * 1024 * 1024
"""At most this much (or the request limit, if larger) is read and discarded after a refusal, so a
batch a little over the limit can be sent to its end, but nobody makes the receiver read gigabytes
(discarded 64 KB at a time: no memory is held)."""


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

    def __init__(self, address: Address, context: HttpContext) -> None:
        self.address_family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
        self.context = context
        super().__init__((address.host, address.port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "evaltrace-collect"
    sys_version = ""  # the Server header names no Python version
    timeout = _IDLE_SECONDS
    server: _Server

    linger = False
    """Set when an error answer closes the connection, its body possibly unread."""

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("evaltrace collect: %s " + format, self.client_address[0], *args)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own error answers (malformed request, unknown method) linger too."""
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
        except (TimeoutError, ConnectionError):
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
        expected = b"Bearer " + config.token.get_secret_value().encode()
        given = (self.headers.get("Authorization") or "").encode("latin-1", "replace")
        if not hmac.compare_digest(given, expected):
            raise HttpError(401, "a valid bearer token is required", close=True, headers={"WWW-Authenticate": "Bearer"})

    def _export(self, signal: Signal, is_json: bool) -> Any:
        context = self.server.context
        if not context.permits.acquire(blocking=False):
            raise _busy(context.config, "too many requests in progress")
        try:
            body = self._body(context.config.max_body_bytes)
            try:
                request = parse_body(signal, body, is_json)
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
        raw = self._read_raw(limit)
        if (self.headers.get("Content-Encoding") or "").strip().lower() == "gzip":
            return gunzip(raw, limit)
        return raw

    def _read_raw(self, limit: int) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked(limit)
        length_text = self.headers.get("Content-Length")
        if length_text is None:
            raise HttpError(411, "Content-Length is required", close=True)
        if not length_text.strip().isdigit():
            raise HttpError(400, "Content-Length is not a number", close=True)
        length = int(length_text)
        if length > limit:
            raise HttpError(413, f"the body of {length} bytes is over the limit of {limit}", close=True)
        body = self.rfile.read(length)
        if len(body) < length:
            raise HttpError(400, "the body ended before Content-Length bytes", close=True)
        return body

    def _read_chunked(self, limit: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = self.rfile.readline(1024).split(b";")[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise HttpError(400, "malformed chunked body", close=True) from None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers, up to the blank line
                    pass
                return b"".join(parts)
            total += size
            if total > limit:
                raise HttpError(413, f"the body is over the limit of {limit} bytes", close=True)
            parts.append(self.rfile.read(size))
            self.rfile.readline(8)  # the chunk's CRLF

    # -- answers ------------------------------------------------------------------------

    def _send_message(self, status: int, message: Any, is_json: bool) -> None:
        if is_json:
            body = json.dumps(json_format.MessageToDict(message), separators=(",", ":")).encode()
        else:
            body = message.SerializeToString()
        self._send(status, body, _JSON if is_json else _PROTOBUF, {})

    def _send_error(self, error: HttpError, is_json: bool) -> None:
        if error.close:
            self.close_connection = self.linger = True
        status = status_pb2.Status(code=_RPC_CODES.get(error.status, code_pb2.UNKNOWN), message=str(error))
        headers = {**error.headers, **({"Connection": "close"} if error.close else {})}
        if is_json:
            body = json.dumps(json_format.MessageToDict(status), separators=(",", ":")).encode()
            self._send(error.status, body, _JSON, headers)
        else:
            self._send(error.status, status.SerializeToString(), _PROTOBUF, headers)

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
    411: code_pb2.INVALID_ARGUMENT,
    413: code_pb2.RESOURCE_EXHAUSTED,
    415: code_pb2.INVALID_ARGUMENT,
    503: code_pb2.UNAVAILABLE,
}


def _media_type(header: str | None) -> str:
    return (header or "").split(";")[0].strip().lower()


def _busy(config: ReceiverConfig, why: str) -> HttpError:
    # 503 is retryable for OTLP clients, which wait Retry-After seconds before sending again. The
    # connection closes: the body may be unread (refused before reading), and a client that is
    # told to wait has no use for it.
    return HttpError(503, why, close=True, headers={"Retry-After": str(config.retry_after_seconds)})


def linger_close(connection: socket.socket, max_bytes: int) -> None:
    """Shut the sending side, then discard what the peer still sends until it closes, within bounds.

    Closing with unread bytes would reset the connection and could destroy the answer just sent;
    once the peer has closed (or the bounds are reached) the caller closes the socket.
    """
    deadline = time.monotonic() + _LINGER_SECONDS
    try:
        connection.shutdown(socket.SHUT_WR)
        while max_bytes > 0 and (left := deadline - time.monotonic()) > 0:
            connection.settimeout(min(_LINGER_READ_SECONDS, left))
            data = connection.recv(min(65536, max_bytes))
            if not data:
                return
            max_bytes -= len(data)
    except OSError:  # a timeout, or the peer reset: nothing more to wait for
        return


def gunzip(data: bytes, limit: int) -> bytes:
    """A gzip body decompressed, never past `limit` bytes of output (413 beyond, 400 if not gzip)."""
    out: list[bytes] = []
    total = 0
    while data:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            chunk = inflater.decompress(data, limit - total + 1)
        except zlib.error as exc:
            raise HttpError(400, f"the gzip body is corrupt ({exc})") from None
        total += len(chunk)
        if total > limit:
            raise HttpError(413, f"the body is over the limit of {limit} bytes once decompressed")
        if not inflater.eof:
            raise HttpError(400, "the gzip body is truncated")
        out.append(chunk)
        data = inflater.unused_data  # a further gzip member, if any
    return b"".join(out)


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
