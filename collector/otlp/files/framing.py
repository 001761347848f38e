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
    unterminated: bool = False
    """A JSON line with no newline at its end: the file's last, maybe cut by a writer that stopped."""
    cut: str = ""
    """A protobuf message shorter than its length prefix says (the file's last): what is there of it."""

    def where(self, fmt: OtlpFormat) -> str:
        """`line N` or `message N`, for error messages."""
        return f"{'line' if fmt is OtlpFormat.JSON else 'message'} {self.number}"


def sniff(path: Path) -> OtlpFormat | None:
    """The OTLP layout of the file at `path`, or `None` when it is not an OTLP file (Parquet or other).

    Raises:
        InputError: the file cannot be read, or it is gzip-compressed but the stream is damaged or
            holds no OTLP (said here: the run-file reader's error would be about Parquet).
    """
    try:
        with _open(path) as stream:
            head = stream.read(_SNIFF_BYTES)
            zipped = isinstance(stream, gzip.GzipFile)
            size = None if zipped else os.fstat(stream.fileno()).st_size
    except _STREAM_ERRORS as exc:
        raise InputError(f"{path}: cannot read the file: {_reason(exc)}") from None
    found = _format_of(head, size)
    if zipped and found is None:
        raise InputError(
            f"{path}: a gzip file holding neither OTLP JSON lines nor OTLP protobuf messages"
            " (run files are plain Parquet)"
        )
    return found


def _format_of(head: bytes, size: int | None) -> OtlpFormat | None:
    if head.startswith(_PARQUET_MAGIC):
        return None
    text = head.removeprefix(_UTF8_BOM).lstrip(_JSON_WHITESPACE)
    if text.startswith(b"{"):
        return OtlpFormat.JSON
    return OtlpFormat.PROTO if _plausible_message(head, size) else None


def _plausible_message(head: bytes, size: int | None) -> bool:
    """A length prefix, then field 1 as bytes whose own length fits in the message.

    The prefix must be within the limit or the file (`size`, None when unknown) long enough for it.
    So a file cut inside its first message is still told to be OTLP protobuf (its error is that
    message's, not another format's), while a text file whose fifth byte is a newline is not: its
    first four bytes read as a length of at least 512 MiB, more than the file holds.
    """
    if len(head) <= _LENGTH.size or head[_LENGTH.size] != _PROTO_FIRST_TAG:
        return False
    length: int = _LENGTH.unpack_from(head)[0]
    if length > MAX_FRAME_BYTES and size is not None and length + _LENGTH.size > size:
        return False
    inner, shift, pos = 0, 0, _LENGTH.size + 1
    while pos < len(head) and shift < 35:
        inner |= (head[pos] & 0x7F) << shift
        pos += 1
        if not head[pos - 1] & 0x80:
            return inner + pos - _LENGTH.size <= length
        shift += 7
    return pos >= len(head) and len(head) < _SNIFF_BYTES  # the whole file, cut inside that length


def frames(path: Path, fmt: OtlpFormat) -> Iterator[Frame]:
    """The requests in the file one by one: its non-blank lines (JSON) or its length-prefixed messages.

    The file's last record may be cut short (a writer stopped mid-record): it is yielded marked
    (`unterminated` JSON line, `cut` protobuf message) for the caller to judge.

    Raises:
        InputError: the file is unreadable, a gzip stream is damaged or truncated, or a message's
            length is over the limit; the message names the file and the line or message.
    """
    with _open(path) as stream:
        reader = _lines(path, stream) if fmt is OtlpFormat.JSON else _messages(path, stream)
        number = 0
        try:
            for frame in reader:
                number = frame.number
                yield frame
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


def _lines(path: Path, stream: BinaryIO) -> Iterator[Frame]:
    number = 0
    while line := stream.readline(MAX_FRAME_BYTES + 1):  # bounded: never more than the limit in memory
        number += 1
        ended = line.endswith(b"\n")
        if len(line) > MAX_FRAME_BYTES and not ended:
            raise InputError(f"{path}: line {number}: longer than {_limit()}, the most one request may hold")
        if number == 1:
            line = line.removeprefix(_UTF8_BOM)
        if line.strip(_JSON_WHITESPACE):
            yield Frame(number, line, unterminated=not ended)


def _messages(path: Path, stream: BinaryIO) -> Iterator[Frame]:
    number = 0
    while prefix := stream.read(_LENGTH.size):
        number += 1
        if len(prefix) < _LENGTH.size:  # the file ends inside a length prefix: a cut last message
            yield Frame(number, b"", cut=f"{len(prefix)} of the 4 bytes of its length prefix")
            return
        (size,) = _LENGTH.unpack(prefix)
        if size > MAX_FRAME_BYTES:  # checked before reading: the prefix is untrusted
            raise InputError(f"{path}: message {number}: {size} bytes, over {_limit()}, the most one request may hold")
        data = stream.read(size)
        yield Frame(number, data, cut=f"{len(data):,} of its {size:,} bytes" if len(data) < size else "")


def _limit() -> str:
    return f"{MAX_FRAME_BYTES >> 20} MiB"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the compressed stream ends early (a truncated .gz file?)"
    return str(exc) or type(exc).__name__
