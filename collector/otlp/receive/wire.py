"""HTTP/1.1 at the byte level for the receiver, every read bounded in time and size.

- `DeadlineReader`: the connection's reads; while a request's headers are read, every read is
  bounded by one deadline counted from the request's first bytes (a client sending a header line
  every 20 s is cut off), while its body is read by another, otherwise by the idle timeout.
- `framing`: one way to find a body's end (RFC 9112 6.3), never both headers, never one twice.
- `content_length` and `chunk_size`: strict syntax (ASCII digits, ASCII hex, bounded length), so
  `²`, `-1` or `0x10` are malformed requests, never a negative read or an exception.
- `gunzip`: every gzip member decoded in time linear in the body, output never past the limit.
- `linger_close`: an error answer's graceful close, so the client can read it.
"""

from __future__ import annotations

import io
import re
import socket
import time
import zlib

LINGER_SECONDS = 2.0
"""At most this long reading what a refused client still sends: on a working link the rest of a
body a little over the default 16 MB limit takes ~1.3 s at 100 Mbit/s, on loopback milliseconds.
A client still sending then is cut off (reset): a refused request must not hold a thread long."""
_LINGER_READ_SECONDS = 1.0
"""A refused client silent this long (neither sending nor closing) is not waited for further."""

_CONTENT_LENGTH = re.compile(rb"[0-9]{1,18}")
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,15}")
_GZIP_STEP = 256
"""Bytes first fed to each gzip member's decoder (doubling while it needs more): what is copied
when a member ends (`unused_data`) stays within twice the member's size plus this."""


class Malformed(ValueError):
    """A request that does not follow HTTP/1.1's syntax (answered 400)."""


class TooLarge(ValueError):
    """A body over the limit (answered 413)."""


class DeadlineReader(io.RawIOBase):
    """A socket's reads, each bounded by the idle timeout or, while armed, by a deadline.

    `arm(seconds)` starts a request: the first read that brings data starts the deadline, so a
    kept-alive connection may stay idle between requests (up to the idle timeout) but a request's
    headers must all arrive within `seconds` of its first bytes; `arm(seconds, now=True)` starts
    it at once (a body). `disarm()` ends it.
    """

    def __init__(self, sock: socket.socket, idle: float) -> None:
        super().__init__()
        self._sock, self._idle = sock, idle
        self._seconds: float | None = None
        self._deadline: float | None = None

    def readable(self) -> bool:
        """Always (a socket's receiving side)."""
        return True

    def arm(self, seconds: float, *, now: bool = False) -> None:
        """Bound the reads that follow by `seconds` from the first bytes received (or from `now`)."""
        self._seconds, self._deadline = seconds, time.monotonic() + seconds if now else None

    def disarm(self) -> None:
        """Back to the idle timeout alone."""
        self._seconds = self._deadline = None
        self._sock.settimeout(self._idle)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Receive into `buffer` within the idle timeout, or the headers' deadline while armed."""
        if self._deadline is not None:  # otherwise the socket has the idle timeout (`disarm` restores it)
            timeout = min(self._idle, self._deadline - time.monotonic())
            if timeout <= 0:
                raise TimeoutError("the request did not arrive in time")
            self._sock.settimeout(timeout)
        count = self._sock.recv_into(buffer)
        if count and self._seconds is not None and self._deadline is None:
            self._deadline = time.monotonic() + self._seconds
        return count


def content_length(text: str, limit: int) -> int:
    """A `Content-Length` value: ASCII digits only, at most `limit`.

    Raises:
        Malformed: not a number (`²` and `١` are digits to `str.isdigit`, not to HTTP).
        TooLarge: over `limit`.
    """
    raw = text.strip(" \t").encode("utf-8", "replace")
    if not _CONTENT_LENGTH.fullmatch(raw):
        raise Malformed("Content-Length is not a number (ASCII digits, at most 18)")
    if (length := int(raw)) > limit:
        raise TooLarge(f"the body of {length} bytes is over the limit of {limit}")
    return length


CHUNKED = "chunked"


def framing(lengths: list[str], codings: list[str] | None) -> str | None:
    """How a request's body ends: `CHUNKED`, its one `Content-Length` value, or None (neither given).

    Raises:
        Malformed: a Transfer-Encoding other than chunked alone, one beside a Content-Length, or
            two Content-Lengths. RFC 9112 6.3: the body's end is then ambiguous, and a proxy in
            front may take what this server reads as the next request for body (request smuggling).
    """
    if codings is not None:
        if lengths or [c.strip().lower() for c in ",".join(codings).split(",")] != [CHUNKED]:
            raise Malformed("Transfer-Encoding must be chunked alone, with no Content-Length")
        return CHUNKED
    if len(lengths) > 1:
        raise Malformed("Content-Length is given more than once")
    return lengths[0] if lengths else None


def chunk_size(line: bytes) -> int:
    """The size of a chunk from its size line (extensions ignored).

    Raises:
        Malformed: not hexadecimal digits ending the line (`-1`, `+1`, `0x10`, `1_0`, a cut line).
    """
    size = line.split(b";", 1)[0].strip(b" \t\r\n")
    if not line.endswith(b"\n") or not _CHUNK_SIZE.fullmatch(size):
        raise Malformed("malformed chunked body")
    return int(size, 16)


def gunzip(data: bytes, limit: int) -> bytes:
    """A gzip body (one member or several) decompressed, never past `limit` bytes of output.

    Raises:
        TooLarge: the output passes `limit`.
        Malformed: not gzip, or cut short.
    """
    view = memoryview(data)
    out: list[bytes] = []
    total = position = 0
    while position < len(view):
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        step = _GZIP_STEP
        while not inflater.eof:
            if position >= len(view):
                raise Malformed("the gzip body is truncated")
            piece = view[position : position + step]
            try:
                chunk = inflater.decompress(piece, limit - total + 1)
            except zlib.error as exc:
                raise Malformed(f"the gzip body is corrupt ({exc})") from None
            total += len(chunk)
            if total > limit:
                raise TooLarge(f"the body is over the limit of {limit} bytes once decompressed")
            out.append(chunk)
            # Below the output bound the decoder takes all of `piece`; what follows a member's end
            # is handed back in `unused_data` and read again as the next member.
            position += len(piece) - len(inflater.unused_data)
            step *= 2
    return b"".join(out)


def linger_close(connection: socket.socket, max_bytes: int) -> None:
    """Shut the sending side, then discard what the peer still sends until it closes, within bounds.

    Closing with unread bytes would reset the connection and could destroy the answer just sent;
    once the peer has closed (or the bounds are reached) the caller closes the socket.
    """
    deadline = time.monotonic() + LINGER_SECONDS
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
