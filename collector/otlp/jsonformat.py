"""OTLP/JSON -> the protobuf export requests (`ExportTraceServiceRequest`, `ExportLogsServiceRequest`).

OTLP/JSON is protobuf's JSON mapping with one difference: trace and span ids are hex text, not
base64. So the ids (of spans, their parents and links, and of log records) are rewritten as
base64 and protobuf's own parser does the rest: lowerCamelCase keys (the proto names are accepted
too), enums as integers (names accepted too), 64-bit integers as strings or numbers, bytes
values as base64. Unknown fields are ignored, as the OTLP specification asks of receivers, so a
newer sender's request still reads.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from evaltrace.collector.errors import InputError
from evaltrace.collector.terminal import printable

R = TypeVar("R", bound=Message)

# Each level of a request, by its OTLP/JSON key and its proto field name (both are valid JSON).
_TRACE_LEVELS = (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans", "spans"))
_LOGS_LEVELS = (("resourceLogs", "resource_logs"), ("scopeLogs", "scope_logs"), ("logRecords", "log_records"))
_SPAN_IDS = (("traceId", "trace_id"), ("spanId", "span_id"), ("parentSpanId", "parent_span_id"))
_LINK_IDS = (("traceId", "trace_id"), ("spanId", "span_id"))


def trace_request(document: dict[str, Any]) -> ExportTraceServiceRequest:
    """The traces request of a parsed OTLP/JSON document (its hex ids are rewritten in place).

    Raises:
        InputError: not a valid OTLP/JSON traces request (naming the field).
    """
    for span, where in _items(document, _TRACE_LEVELS):
        _rewrite_ids(span, _SPAN_IDS, where)
        for i, link in enumerate(_list(span, ("links", "links"))):
            if isinstance(link, dict):
                _rewrite_ids(link, _LINK_IDS, f"{where}.links[{i}]")
    return _parse(document, ExportTraceServiceRequest())


def logs_request(document: dict[str, Any]) -> ExportLogsServiceRequest:
    """The logs request of a parsed OTLP/JSON document (its hex ids are rewritten in place).

    Raises:
        InputError: not a valid OTLP/JSON logs request (naming the field).
    """
    for record, where in _items(document, _LOGS_LEVELS):
        _rewrite_ids(record, _LINK_IDS, where)
    return _parse(document, ExportLogsServiceRequest())


def parse_trace_request(data: bytes) -> ExportTraceServiceRequest:
    """An OTLP/JSON traces request body.

    Raises:
        InputError: not UTF-8 JSON, or not a valid OTLP/JSON traces request.
    """
    return trace_request(_document(data))


def parse_logs_request(data: bytes) -> ExportLogsServiceRequest:
    """An OTLP/JSON logs request body.

    Raises:
        InputError: not UTF-8 JSON, or not a valid OTLP/JSON logs request.
    """
    return logs_request(_document(data))


def _document(data: bytes) -> dict[str, Any]:
    try:
        # Decoded here: `json.loads` would guess UTF-16 or -32 from the bytes; OTLP/JSON is UTF-8.
        document = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InputError("JSON nested too deeply") from None
    if not isinstance(document, dict):
        raise InputError("not an OTLP/JSON request (expected a JSON object)")
    return document


def _list(parent: dict[str, Any], keys: tuple[str, str]) -> list[Any]:
    found = parent.get(keys[0], parent.get(keys[1]))
    return found if isinstance(found, list) else []


def _items(document: dict[str, Any], levels: tuple[tuple[str, str], ...]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every span (or log record) object of a request, with its place (malformed levels are left to the parser)."""
    outer, middle, inner = levels
    for r, resource in enumerate(_list(document, outer)):
        if not isinstance(resource, dict):
            continue
        for s, scope in enumerate(_list(resource, middle)):
            if not isinstance(scope, dict):
                continue
            for i, item in enumerate(_list(scope, inner)):
                if isinstance(item, dict):
                    yield item, f"{outer[0]}[{r}].{middle[0]}[{s}].{inner[0]}[{i}]"


def _rewrite_ids(item: dict[str, Any], fields: tuple[tuple[str, str], ...], where: str) -> None:
    for names in fields:
        for name in names:
            value = item.get(name)
            if isinstance(value, str):
                item[name] = _hex_to_base64(value, f"{where}.{name}")


def _hex_to_base64(text: str, where: str) -> str:
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raise InputError(f"{where}: not a hex id ({len(text)} characters)") from None
    return base64.b64encode(raw).decode("ascii")


def _parse(document: dict[str, Any], message: R) -> R:
    try:
        json_format.ParseDict(document, message, ignore_unknown_fields=True)
        return message
    except json_format.ParseError as exc:
        raise InputError(f"not a valid OTLP/JSON request: {_short(str(exc))}") from None
    except (RecursionError, binascii.Error, ValueError, TypeError) as exc:
        raise InputError(f"not a valid OTLP/JSON request: {_short(str(exc)) or type(exc).__name__}") from None


def _short(text: str, limit: int = 300) -> str:
    """A parser message on one line, cut (it may quote the received value)."""
    line = printable(" ".join(text.split()))
    return line if len(line) <= limit else line[: limit - 3] + "..."
