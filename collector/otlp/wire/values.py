"""OTLP `AnyValue`s, key-value lists and ids -> the Python values the SDK holds.

A scalar becomes str/bool/int/float, bytes stay bytes, an array becomes a tuple (as the SDK keeps
sequence attributes) and a key-value list a dict; an unset value is None. Duplicate keys (which
the protocol forbids) keep the last value, as a dict built from the list would.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.trace import TraceState

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8


# A W3C tracestate list member (key=value), as the SDK's own pattern; at most 32 of them.
_MEMBER = re.compile(
    r"([a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13})"
    r"=([\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e])"
)
_MAX_MEMBERS = 32


class InvalidItem(ValueError):
    """One span or log record that cannot be stored (its message names the field)."""


def any_value(value: AnyValue) -> Any:
    """The Python value of one OTLP `AnyValue`."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if which == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, which)


def attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    """An attribute list as a dict (the last of duplicate keys kept)."""
    return {pair.key: any_value(pair.value) for pair in pairs}


def required_id(raw: bytes, size: int, field: str) -> int:
    """A trace or span id that must be present: `size` bytes, not all zero."""
    if len(raw) != size:
        raise InvalidItem(f"{field} has {len(raw)} bytes, expected {size}")
    number = int.from_bytes(raw, "big")
    if number == 0:
        raise InvalidItem(f"{field} is all zeros (an invalid id)")
    return number


def optional_id(raw: bytes, size: int, field: str) -> int:
    """An id that may be absent (empty, or all zeros as some senders write it): 0 when absent."""
    if not raw:
        return 0
    if len(raw) != size:
        raise InvalidItem(f"{field} has {len(raw)} bytes, expected {size} or none")
    return int.from_bytes(raw, "big")


def trace_state(header: str) -> TraceState:
    """A W3C tracestate; empty when it is malformed, as the SDK does.

    Parsed here rather than by `TraceState.from_header`, which logs a malformed member verbatim:
    received text must never reach the receiver's terminal raw.
    """
    pairs: dict[str, str] = {}
    for member in header.split(","):
        member = member.strip(" \t")
        if not member:
            continue
        match = _MEMBER.fullmatch(member)
        if match is None or match.group(1) in pairs or len(pairs) == _MAX_MEMBERS:
            return TraceState()
        pairs[match.group(1)] = match.group(2)
    return TraceState(list(pairs.items()))
