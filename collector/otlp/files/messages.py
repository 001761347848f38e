"""Frames of an OTLP file -> the SDK spans or log records each holds (what `otlp_import.py` writes).

A JSON line says what it holds by its top-level key (`resourceSpans`, `resourceLogs`) and is
decoded straight to SDK objects by `otlp/jsonformat.py`; a protobuf message is parsed and decoded
by `otlp/decode.py`. A protobuf message does not name its type, so it is told by its first item: a
span starts with its 16-byte trace id and 8-byte span id (fields 1 and 2), a log record never
starts with field 1 as bytes (its field 1 is a fixed64 time). Metrics and profiles lines, which
evaltrace does not read, are skipped and counted so the caller can say so; an empty request (`{}`)
holds nothing and is skipped too. Each request is held to the SDK's limits (`OTEL_*_LIMIT`, 128
events, links and attributes by default) before its objects are made, as the receiver holds one
(`otlp/limits.py`): a line of a million empty events costs what 128 cost, the rest counted dropped.

The file's last record may be cut short, as a writer that stopped (a Collector that crashed)
leaves it: a last JSON line with no newline that is not complete JSON, or a last protobuf message
shorter than its length prefix. It is skipped and described in `Skipped.cut` for the caller's
warning; anything damaged before the end is an error naming its line or message.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import SpanLimits

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files.framing import Frame, OtlpFormat, frames
from evaltrace.collector.otlp.wire import decode, jsonformat
from evaltrace.collector.otlp.wire.limits import hold_log_limits, hold_span_limits

_SPAN_HEAD: Final = b"\x0a\x10"  # field 1 (trace_id), 16 bytes
_SPAN_ID_TAG: Final = b"\x12\x08"  # field 2 (span_id), 8 bytes, right after the trace id
_NOT_PROTOBUF: Final = "an OTLP protobuf request"
_SKIPPED_KEYS: Final = ("resourceMetrics", "resourceProfiles", "resource_metrics", "resource_profiles")


@dataclass
class Skipped:
    """Requests of a file that held nothing evaltrace reads."""

    metrics: int = 0
    """Metrics or profiles requests (counted, not read)."""
    lines: list[int] = field(default_factory=list)
    """The first few of their lines or message numbers."""
    cut: str = ""
    """The file's last record, cut short and skipped: which it is and what is left of it ('' if none)."""
    read: int = 0
    """Records read whole (whatever they held)."""


@dataclass(frozen=True)
class Items:
    """What one request held: spans, or log records."""

    spans: bool
    """Spans (else log records)."""
    items: list[Any]


def requests(path: Path, fmt: OtlpFormat, skipped: Skipped) -> Iterator[tuple[Frame, Items]]:
    """The items of each request of the file with the frame it came from (its line or message number).

    Raises:
        InputError: a line or message that is not an OTLP traces or logs request, or that holds an
            item that cannot be stored, naming the file and the line or message.
    """
    for frame in frames(path, fmt):
        try:
            found = _json_items(frame) if fmt is OtlpFormat.JSON else _proto_items(frame)
        except InputError as exc:
            raise InputError(f"{path}: {frame.where(fmt)}: {exc}") from None
        if isinstance(found, str):
            skipped.cut = f"{frame.where(fmt)} ({found})"
            continue
        skipped.read += 1
        if found is None:
            skipped.metrics += 1
            if len(skipped.lines) < 3:
                skipped.lines.append(frame.number)
        elif found.items:
            yield frame, found


def _json_items(frame: Frame) -> Items | str | None:
    """The line's items; None for a metrics or profiles line; a description when it is a cut last line."""
    try:
        document = jsonformat.loads(frame.data)
    except jsonformat.NotJson as exc:
        if frame.unterminated:
            return f"{len(frame.data):,} bytes with no newline at the end, not complete JSON"
        raise InputError(f"not valid JSON ({exc.msg} at column {exc.column})") from None
    if not isinstance(document, dict):
        raise InputError("not an OTLP JSON request (a JSON object per line)")
    if "resourceSpans" in document or "resource_spans" in document:  # proto field names are valid JSON too
        return Items(True, decode.all_or_error(jsonformat.decode_spans(document, SpanLimits()), "span"))
    if "resourceLogs" in document or "resource_logs" in document:
        return Items(False, decode.all_or_error(jsonformat.decode_log_records(document, SpanLimits()), "log record"))
    if any(key in document for key in _SKIPPED_KEYS):
        return None
    if not document:
        return Items(True, [])
    raise InputError("not an OTLP traces or logs request: no resourceSpans or resourceLogs")


def _proto_items(frame: Frame) -> Items | str:
    """The message's items; a description when it is a cut last message."""
    if frame.cut:
        return frame.cut
    if _holds_spans(frame.data):
        spans = decode.parse_request(ExportTraceServiceRequest(), frame.data, _NOT_PROTOBUF)
        hold_span_limits(spans, SpanLimits())
        return Items(True, decode.all_or_error(decode.decode_spans(spans), "span"))
    logs = decode.parse_request(ExportLogsServiceRequest(), frame.data, _NOT_PROTOBUF)
    hold_log_limits(logs, SpanLimits())
    return Items(False, decode.all_or_error(decode.decode_log_records(logs), "log record"))


def _holds_spans(data: bytes) -> bool:
    """Whether a serialized request's first item is a span (else it is taken for log records)."""
    for resource in _fields(data, 1):  # resource_spans / resource_logs
        for scope in _fields(resource, 2):  # scope_spans / scope_logs
            for item in _fields(scope, 2):  # spans / log_records
                return item.startswith(_SPAN_HEAD) and item[18:20] == _SPAN_ID_TAG
    return True


def _fields(data: bytes, number: int) -> Iterator[bytes]:
    """The length-delimited values of field `number` in a serialized message (stops at bad input)."""
    pos, end = 0, len(data)
    while pos < end:
        tag, pos = _varint(data, pos)
        wire = tag & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _varint(data, pos)
            if tag >> 3 == number:
                yield data[pos : pos + size]
            pos += size
        else:
            return  # groups or garbage: the parser reports it


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return value, len(data) + 1
