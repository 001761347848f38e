"""Lossless JSON text for OTel attribute values.

OTel SDK attribute values are str, bool, int, float or homogeneous sequences of those; values
received as OTLP may also be maps and bytes, nested at any depth (`kvlistValue`, `arrayValue`,
`bytesValue`). JSON keeps the types apart (`1` vs `1.0`, `true` vs `1`) except non-finite floats,
which standard JSON cannot hold (DuckDB and Polars reject Python's bare `NaN`). Those are written
as a one-key object `{"$float": "NaN" | "Infinity" | "-Infinity"}`, at any depth: only an OTLP
map holding exactly that one key and text could be mistaken for one. Bytes are written as their
UTF-8 text, or as base64 when they are not UTF-8 (binary content kept, not replaced).
Sequences come back as lists, maps as dicts.

Reading is strict where Python's `json` is lenient: the bare constants `NaN`, `Infinity` and
`-Infinity` are not JSON, the writer never produces them, so text holding them is rejected
like any other malformed text rather than read as a float no other tool would accept.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from typing import Any

_FLOAT_MARKER = "$float"
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _encode_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {_FLOAT_MARKER: "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, (list, tuple)):
        return [_encode_value(v) for v in value]
    if isinstance(value, Mapping):  # an OTLP map value (kvlistValue)
        return {str(k): _encode_value(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return _bytes_text(value)
    return value


def _bytes_text(value: bytes) -> str:
    # Binary payloads (an image in a log body, a hash) must survive: replacing their invalid bytes
    # would lose them for good, so text that is not UTF-8 is kept whole as base64.
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(value).decode("ascii")


def dumps(value: Any) -> str:
    """JSON text of an attribute mapping or any OTel `AnyValue`, non-finite floats and bytes included.

    Plain JSON first (the common case, no walk over the value); a value that is not plain JSON is
    written in the lossless form above, and anything else (an object in a log body) as its `str`.
    """
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError):
        return json.dumps(_encode_value(value), ensure_ascii=False, allow_nan=False, default=str)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
"""A JSON decoder that rejects the bare non-finite constants (still the C scanner: as fast)."""


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        marker = value.get(_FLOAT_MARKER) if len(value) == 1 else None
        if isinstance(marker, str) and marker in _NON_FINITE:
            return _NON_FINITE[marker]
        return {k: _decode_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode_value(v) for v in value]
    return value


def loads_attributes(text: str | None) -> dict[str, Any]:
    """Decode the object text written by `dumps`; `None` or empty text gives `{}`.

    Raises:
        ValueError: the text is not a JSON object (or holds a bare `NaN` / `Infinity`).
        RecursionError: the text nests deeper than the interpreter's recursion limit.
    """
    if not text:
        return {}
    raw = STRICT_DECODER.decode(text)
    if not isinstance(raw, dict):
        raise ValueError("attributes JSON is not an object")
    return {k: _decode_value(v) for k, v in raw.items()}
