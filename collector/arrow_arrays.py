"""Arrow arrays of plain column types (the traces table's, the score store's), packed from Python values.

`pa.array` on a Python list asks whether pandas knows the list, importing pandas to find out
when it is installed: 0.2-0.9 s CPU and ~49 MB in each process that has no other use for it (each
worker of a first scoring, a run's first store batch). The columns are a few plain types, so their
buffers are packed here (`array` for numbers, one encode of the joined texts for ASCII strings, an
integer for each validity bitmap) and handed to `pa.Array.from_buffers`, which never looks at
pandas. Values that do not fit a column's type raise (`TypeError`, `OverflowError`), as
`pa.array` does.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from itertools import accumulate, chain, repeat
from operator import is_not
from typing import Any

import numpy as np
import pyarrow as pa

_DIGITS = bytes.maketrans(b"\x00\x01", b"01")
_NUMBER_CODES = {pa.int32(): "i", pa.int64(): "q", pa.float64(): "d"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_EMPTY_FOR_NULL: dict[Any, Any] = {None: ""}
"""`_EMPTY_FOR_NULL.get(value, value)`: a null's text is empty; mapped in C, not a Python loop per value."""
_ZERO_FOR_NULL: dict[Any, Any] = {None: 0}
Builder = Callable[[Sequence[Any], pa.DataType, int], pa.Array]
"""Packs values of a type, given how many are null (never all)."""
_MAX_OFFSET = 2**31 - 1


def column(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """`values` (`None` for null) as an Arrow array of type `kind`.

    Raises:
        TypeError: `kind` is not one of the store's column types, or a value does not fit it.
    """
    build = _builder(kind)
    if build is None:
        raise TypeError(f"no Arrow builder for the column type {kind}")
    nulls = values.count(None)  # counted in C, once: many columns have no null, many only nulls
    return pa.nulls(len(values), kind) if nulls == len(values) else build(values, kind, nulls)


def micros(moment: datetime | None) -> int | None:
    """`moment` as microseconds since the epoch, as Arrow stores a UTC timestamp (a naive time is UTC)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def _builder(kind: pa.DataType) -> Builder | None:
    if kind in _NUMBER_CODES:
        return _numbers
    if pa.types.is_timestamp(kind) and kind.unit == "us":
        return _times
    if pa.types.is_string(kind):
        return _strings
    if pa.types.is_boolean(kind):
        return _booleans
    if pa.types.is_list(kind):
        return _lists
    if pa.types.is_struct(kind):
        return _structs
    return None


def bitmap(flags: Sequence[bool]) -> bytes:
    """Arrow's bit-packed form of `flags` (bit i of the buffer is `flags[i]`, least significant first)."""
    digits = bytes(flags).translate(_DIGITS)[::-1]
    return int(digits or b"0", 2).to_bytes((len(flags) + 7) // 8, "little")


def _validity(values: Sequence[Any], nulls: int) -> pa.Buffer | None:
    """The validity bitmap of `values`, of which `nulls` are null (`None`: no null, no bitmap)."""
    return pa.py_buffer(bitmap(list(map(is_not, values, repeat(None))))) if nulls else None


def _numbers(values: Sequence[Any], kind: pa.DataType, nulls: int) -> pa.Array:
    validity = _validity(values, nulls)
    data = array(_NUMBER_CODES[kind], list(map(_ZERO_FOR_NULL.get, values, values)) if nulls else values)
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def _times(values: Sequence[Any], kind: pa.DataType, nulls: int) -> pa.Array:
    # Microseconds since the epoch; a datetime is converted as Arrow converts it (a naive one is UTC).
    counts = [micros(value) if isinstance(value, datetime) else value for value in values]
    validity = _validity(counts, nulls)
    data = array("q", list(map(_ZERO_FOR_NULL.get, counts, counts)) if nulls else counts)
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def _booleans(values: Sequence[Any], kind: pa.DataType, nulls: int) -> pa.Array:
    validity = _validity(values, nulls)
    data = bitmap([value is True for value in values])
    for value in values:
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"a boolean column got {type(value).__name__} {value!r}")
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def _strings(values: Sequence[Any], kind: pa.DataType, nulls: int) -> pa.Array:
    validity = _validity(values, nulls)
    texts: Sequence[Any] = list(map(_EMPTY_FOR_NULL.get, values, values)) if nulls else values
    joined = "".join(texts)  # raises TypeError on a value not a string, as `pa.array` does
    if joined.isascii():  # a character is a byte: the offsets are the texts' lengths, and one encode does
        data, sizes = joined.encode(), map(len, texts)
    else:
        encoded = [text.encode() for text in texts]
        data, sizes = b"".join(encoded), map(len, encoded)
    if len(data) > _MAX_OFFSET:
        raise OverflowError(f"{len(data)} bytes of text do not fit a string column's 32-bit offsets")
    offsets = np.zeros(len(texts) + 1, np.int32)  # summed by numpy: 3x faster than `accumulate` into an array
    np.cumsum(np.fromiter(sizes, np.int32, len(texts)), out=offsets[1:])
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(kind, len(values), buffers, null_count=nulls)


def _lists(values: Sequence[Any], kind: pa.DataType, nulls: int) -> pa.Array:
    validity = _validity(values, nulls)
    items = [() if value is None else value for value in values]
    offsets = array("i", accumulate(map(len, items), initial=0))
    child = column(list(chain.from_iterable(items)), kind.value_type)
    buffers = [validity, pa.py_buffer(offsets)]
    return pa.Array.from_buffers(kind, len(values), buffers, null_count=nulls, children=[child])


def _structs(values: Sequence[Any], kind: pa.DataType, nulls: int) -> pa.Array:
    # Struct values are dicts by field name, as `pa.array` takes them.
    validity = _validity(values, nulls)
    rows = [{} if value is None else value for value in values]
    children = [column([row.get(field.name) for row in rows], field.type) for field in kind]
    return pa.Array.from_buffers(kind, len(values), [validity], null_count=nulls, children=children)
