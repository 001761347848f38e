"""OTLP files: what a file holds (by its content, not its name) and its messages one at a time.

Two layouts exist, each plain or gzip-compressed (recognised by the gzip magic bytes):

- OTLP JSON lines: one `ExportTraceServiceRequest` (or `ExportLogsServiceRequest`) in the OTLP
  JSON encoding per line, as the OpenTelemetry Collector's `file` exporter (`format: json`, its
  default) and the official OTLP JSON file exporter write them. The first non-blank byte is `{`.
- OTLP protobuf, as the Collector's `file` exporter writes it with `format: proto`: each message
  is its length as a 4-byte big-endian unsigned integer followed by that many bytes of the
  serialized request. Recognised by a first message that starts with field 1 as a length-delimited
  value (`resource_spans` / `resource_logs`), tag byte 0x0A.

Parquet files (`PAR1` magic) and anything else are not OTLP: the run-file reader reads or
rejects them. Messages are read one by one from a stream, so a file is never in memory whole;
a frame carries its line (JSON) or message number (protobuf) so errors can name it.

Size. One line or message holds at most `MAX_FRAME_BYTES`: a line is read in bounded pieces and
refused once it passes the limit, and a message's length prefix is checked before anything of it
is read, so a hostile file (one 300 MB line, gzipped to 300 KB; a prefix claiming 4 GiB) costs no
more memory than the limit before its one-line error.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO, Final, cast

from evaltrace.collector.errors import InputError

_GZIP_MAGIC: Final = b"\x1f\x8b"
_PARQUET_MAGIC: Final = b"PAR1"
_PROTO_FIRST_TAG: Final = 0x0A  # field 1, wire type 2 (length-delimited)
_JSON_WHITESPACE: Final = b" \t\r\n"
_UTF8_BOM: Final = b"\xef\xbb\xbf"
_SNIFF_BYTES: Final = 64
_LENGTH = struct.Struct(">I")
MAX_FRAME_BYTES: Final = 64 << 20
"""The most one line or message may hold: 4x the receiver's default request limit (16 MiB of
protobuf, `receive.config.max_body_bytes`), room for such a request in the JSON encoding."""
# Errors a damaged gzip stream raises while being read (a truncated one raises EOFError).
_STREAM_ERRORS: Final = (OSError, EOFError, zlib.error)


class OtlpFormat(StrEnum):
    """The layout of an OTLP file."""

    JSON = "OTLP JSON lines"
    PROTO = "OTLP protobuf"


@dataclass(frozen=True)
class Frame:
    """One serialized request read from a file."""

    number: int
    """Its line (JSON lines) or message number (protobuf), from 1: what error messages name."""
    data: bytes

    def where(self, fmt: OtlpFormat) -> str:
        """`line N` or `message N`, for error messages."""
        return f"{'line' if fmt is OtlpFormat.JSON else 'message'} {self.number}"


def sniff(path: Path) -> OtlpFormat | None:
    """The OTLP layout of the file at `path`, or `None` when it is not an OTLP file (Parquet or other).

    Raises:
        InputError: the file cannot be read, or it is gzip-compressed but the stream is damaged.
    """
    try:
        with path.open("rb") as raw:
            head = raw.read(_SNIFF_BYTES)
            size: int | None = os.fstat(raw.fileno()).st_size
            if head.startswith(_GZIP_MAGIC):
                raw.seek(0)
                with gzip.GzipFile(fileobj=raw) as unzipped:
                    head, size = unzipped.read(_SNIFF_BYTES), None
    except _STREAM_ERRORS as exc:
        raise InputError(f"{path}: cannot read the file: {_reason(exc)}") from None
    return _format_of(head, size)


def _format_of(head: bytes, size: int | None) -> OtlpFormat | None:
    if head.startswith(_PARQUET_MAGIC):
        return None
    text = head.removeprefix(_UTF8_BOM).lstrip(_JSON_WHITESPACE)
    if text.startswith(b"{"):
        return OtlpFormat.JSON
    return OtlpFormat.PROTO if _plausible_message(head, size) else None


def _plausible_message(head: bytes, size: int | None) -> bool:
    """A length prefix the file can hold, then field 1 as bytes whose own length fits in the message."""
    if len(head) <= _LENGTH.size or head[_LENGTH.size] != _PROTO_FIRST_TAG:
        return False
    length: int = _LENGTH.unpack_from(head)[0]
    if size is not None and length + _LENGTH.size > size:
        return False  # e.g. a text file whose fifth byte is a newline
    inner, shift, pos = 0, 0, _LENGTH.size + 1
    while pos < len(head) and shift < 35:
        inner |= (head[pos] & 0x7F) << shift
        pos += 1
        if not head[pos - 1] & 0x80:
            return inner + pos - _LENGTH.size <= length
        shift += 7
    return False


def frames(path: Path, fmt: OtlpFormat) -> Iterator[Frame]:
    """The requests in the file one by one: its non-blank lines (JSON) or its length-prefixed messages.

    Raises:
        InputError: the file is unreadable, a gzip stream is damaged or truncated, or a protobuf
            message is cut short; the message names the file and the line or message.
    """
    with _open(path) as stream:
        reader = _lines(path, stream) if fmt is OtlpFormat.JSON else _messages(path, stream)
        number = 0
        try:
            for number, data in reader:
                yield Frame(number, data)
        except _STREAM_ERRORS as exc:
            where = "line" if fmt is OtlpFormat.JSON else "message"
            raise InputError(f"{path}: after {where} {number}: cannot read on: {_reason(exc)}") from None


@contextmanager
def _open(path: Path) -> Iterator[BinaryIO]:
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file: {_reason(exc)}") from None
    with raw:
        if raw.read(len(_GZIP_MAGIC)) == _GZIP_MAGIC:
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw) as unzipped:
                yield cast(BinaryIO, unzipped)  # GzipFile reads like any binary stream
            return
        raw.seek(0)
        yield raw


def _lines(path: Path, stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    number = 0
    while line := stream.readline(MAX_FRAME_BYTES + 1):  # bounded: never more than the limit in memory
        number += 1
        if len(line) > MAX_FRAME_BYTES and not line.endswith(b"\n"):
            raise InputError(f"{path}: line {number}: longer than {_limit()}, the most one request may hold")
        if number == 1:
            line = line.removeprefix(_UTF8_BOM)
        if line.strip(_JSON_WHITESPACE):
            yield number, line


def _messages(path: Path, stream: BinaryIO) -> Iterator[tuple[int, bytes]]:
    number = 0
    while prefix := stream.read(_LENGTH.size):
        number += 1
        if len(prefix) < _LENGTH.size:
            raise InputError(f"{path}: message {number}: truncated length prefix ({len(prefix)} of 4 bytes)")
        (size,) = _LENGTH.unpack(prefix)
        if size > MAX_FRAME_BYTES:  # checked before reading: the prefix is untrusted
            raise InputError(f"{path}: message {number}: {size} bytes, over {_limit()}, the most one request may hold")
        data = stream.read(size)
        if len(data) < size:
            raise InputError(f"{path}: message {number}: truncated: {len(data)} of {size} bytes")
        yield number, data


def _limit() -> str:
    return f"{MAX_FRAME_BYTES >> 20} MiB"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the compressed stream ends early (a truncated .gz file?)"
    return str(exc) or type(exc).__name__
