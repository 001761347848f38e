"""OTLP/JSON values -> the Python values the SDK holds, by protobuf's JSON mapping rules.

OTLP/JSON is protobuf's JSON mapping with one difference: trace and span ids are hex text, not
base64. The rules kept here are the ones `google.protobuf.json_format` applies, so a request reads
the same whichever way it is decoded: 64-bit integers as strings or numbers (an integral float
too), enums as numbers or names (an unknown name reads as unset), doubles as numbers or the
strings "NaN", "Infinity", "-Infinity" and decimal text, bytes as base64 (either alphabet, padding
optional), `null` as the field's default, strings without unpaired surrogates.

`Bad` carries what is wrong and where in the item (`attributes[2].value.intValue: ...`); the
request-level decoder (`jsonformat.py`) adds the item's place and turns it into an `InputError`.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from typing import Any, Final

_UNPAIRED_SURROGATE: Final = re.compile(r"[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")
_SPECIAL_DOUBLES: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
UINT32: Final = (0, 2**32 - 1)
UINT64: Final = (0, 2**64 - 1)
INT64: Final = (-(2**63), 2**63 - 1)
_INT32: Final = (-(2**31), 2**31 - 1)


class Bad(ValueError):
    """A JSON value its OTLP field does not take; the message starts with the field's path."""

    def within(self, place: str) -> str:
        """The message with `place` (where the field's item is) in front of the field's path."""
        detail = str(self)
        return f"{place}{detail}" if detail.startswith(":") else f"{place}.{detail}"


def get(item: dict[str, Any], camel: str, snake: str) -> Any:
    """A field by its lowerCamelCase JSON name or its proto name (both are valid JSON); None if absent.

    A field given under both names is refused, as protobuf's parser refuses it.
    """
    if snake in item and camel != snake:
        if camel in item:
            raise Bad(f"{camel}: given twice (also as {snake})")
        return item[snake]
    return item.get(camel)


def obj(value: Any, field: str) -> dict[str, Any]:
    """A message field: a JSON object (`null` or absent: empty)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Bad(f"{field}: expected a JSON object, got {_kind(value)}")
    return value


def array(value: Any, field: str) -> list[Any]:
    """A repeated field: a JSON array (`null` or absent: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise Bad(f"{field}: expected a JSON array, got {_kind(value)}")
    return value


def text(value: Any, field: str) -> str:
    """A string field."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise Bad(f"{field}: expected a string, got {_kind(value)}")
    if not value.isascii() and _UNPAIRED_SURROGATE.search(value):
        raise Bad(f"{field}: an unpaired surrogate in the string")
    return value


def integer(value: Any, field: str, bounds: tuple[int, int]) -> int:
    """An integer field within `bounds`: a JSON number or a decimal string (64-bit ones are sent as strings)."""
    if value is None:
        return 0
    if type(value) is int:  # the common case first
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and " " not in value:
        try:
            number = int(value)
        except ValueError:
            raise Bad(f"{field}: not an integer ({len(value)} characters)") from None
    else:
        raise Bad(f"{field}: not an integer ({_kind(value)})")
    if not bounds[0] <= number <= bounds[1]:
        # Up to 4300 digits parse: the message quotes a short number only, so it stays one line.
        shown = str(number) if abs(number) < 10**20 else f"a {len(str(abs(number)))}-digit number"
        raise Bad(f"{field}: {shown} is out of range")
    return number


def double(value: Any, field: str) -> float:
    """A double field: a JSON number, or "NaN" / "Infinity" / "-Infinity" / decimal text."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Bad(f"{field}: a non-finite number must be quoted")
        return value
    if type(value) is int:
        return float(value)
    if isinstance(value, str) and value != "nan":
        special = _SPECIAL_DOUBLES.get(value)
        if special is not None:
            return special
        try:
            return float(value)
        except ValueError:
            pass
    raise Bad(f"{field}: not a number ({_kind(value)})")


def boolean(value: Any, field: str) -> bool:
    """A bool field: JSON true or false."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise Bad(f"{field}: expected true or false, got {_kind(value)}")
    return value


def b64(value: Any, field: str) -> bytes:
    """A bytes field: base64 text, standard or URL-safe alphabet, padding optional."""
    if not isinstance(value, str):
        raise Bad(f"{field}: expected base64 text, got {_kind(value)}")
    encoded = value.encode("utf-8", "surrogatepass")
    try:
        return base64.urlsafe_b64decode(encoded + b"=" * (4 - len(encoded) % 4))
    except (binascii.Error, ValueError):
        raise Bad(f"{field}: not base64 ({len(value)} characters)") from None


def hex_id(value: Any, field: str) -> bytes:
    """A trace or span id: hex text (OTLP/JSON's one departure from the protobuf mapping)."""
    if value is None:
        return b""
    if not isinstance(value, str):
        raise Bad(f"{field}: expected a hex id, got {_kind(value)}")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise Bad(f"{field}: not a hex id ({len(value)} characters)") from None


def enum(value: Any, field: str, names: dict[str, int]) -> int:
    """An enum field: its number, or its name (an unknown name reads as unset, 0)."""
    if type(value) is int:
        return integer(value, field, _INT32)
    if value is None:
        return 0
    if isinstance(value, str):
        number = names.get(value)
        if number is not None:
            return number
    if isinstance(value, (str, float, bool)):
        try:
            return integer(int(value), field, _INT32)
        except ValueError:
            return 0  # an unknown name: ignored, as unknown fields are
        except OverflowError:  # int(Infinity)
            pass
    raise Bad(f"{field}: not an enum value ({_kind(value)})")


def any_value(value: Any, field: str) -> Any:
    """The Python value of one OTLP/JSON `AnyValue` (None when unset)."""
    found = _one_of(obj(value, field), field)
    if found is None:
        return None
    kind, inner = found
    convert = _SCALARS.get(kind)
    if convert is not None:
        return convert(inner, f"{field}.{kind}")
    values = array(get(obj(inner, f"{field}.{kind}"), "values", "values"), f"{field}.{kind}.values")
    if kind in ("arrayValue", "array_value"):
        return tuple(_array_items(values, f"{field}.{kind}.values"))
    return attributes(values, f"{field}.{kind}.values")


def attributes(pairs: Any, field: str) -> dict[str, Any]:
    """A key-value list as a dict (the last of duplicate keys kept)."""
    found: dict[str, Any] = {}
    i = 0
    try:
        for pair in array(pairs, field):
            pair = obj(pair, "")
            found[text(pair.get("key"), "key")] = any_value(pair.get("value"), "value")
            i += 1
    except Bad as exc:
        raise Bad(exc.within(f"{field}[{i}]")) from None
    return found


def _array_items(values: list[Any], field: str) -> list[Any]:
    return [any_value(item, f"{field}[{i}]") for i, item in enumerate(values)]


def _one_of(value: dict[str, Any], field: str) -> tuple[str, Any] | None:
    """The one set member of an `AnyValue` (null members are unset; two set ones are an error)."""
    found: tuple[str, Any] | None = None
    for key, inner in value.items():
        if inner is not None and key in _MEMBERS:
            if found is not None:
                raise Bad(f"{field}: more than one value ({found[0]}, {key})")
            found = (key, inner)
    return found


def _int64(value: Any, field: str) -> int:
    return integer(value, field, INT64)


_SCALARS: Final = {
    "stringValue": text,
    "string_value": text,
    "boolValue": boolean,
    "bool_value": boolean,
    "intValue": _int64,
    "int_value": _int64,
    "doubleValue": double,
    "double_value": double,
    "bytesValue": b64,
    "bytes_value": b64,
}
_MEMBERS: Final = frozenset({*_SCALARS, "arrayValue", "array_value", "kvlistValue", "kvlist_value"})


def _kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")
