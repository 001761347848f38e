"""OTLP `AnyValue`s, key-value lists and ids -> the Python values the SDK holds.

A scalar becomes str/bool/int/float, bytes stay bytes, an array becomes a tuple (as the SDK keeps
sequence attributes) and a key-value list a dict; an unset value is None. Duplicate keys (which
the protocol forbids) keep the last value, as a dict built from the list would.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

TRACE_ID_BYTES = 16
SPAN_ID_BYTES = 8


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
