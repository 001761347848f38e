"""Arrow arrays of the store's column types, built from Python values straight into Arrow buffers.

`pa.array` on a Python list asks whether pandas knows the list, importing pandas to find out
when it is installed: 0.2-0.4 s and ~49 MB on the first batch of a run that has no other use for
it. The store's columns are a few plain types, so their buffers are packed here (`array` for
numbers, one encode of the joined texts for ASCII strings, an integer for each validity bitmap) and handed to
`pa.Array.from_buffers`, which never looks at pandas. Values that do not fit a column's type
raise (`TypeError`, `OverflowError`), as `pa.array` does.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from datetime import datetime
from itertools import accumulate, chain, repeat
from operator import is_not
from typing import Any

import pyarrow as pa

from evaltrace.evaluators.results.store.sides import micros

_DIGITS = bytes.maketrans(b"\x00\x01", b"01")
_NUMBER_CODES = {pa.int32(): "i", pa.int64(): "q", pa.float64(): "d"}


def column(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    """`values` (`None` for null) as an Arrow array of type `kind`.

    Raises:
        TypeError: `kind` is not one of the store's column types, or a value does not fit it.
    """
    build = _builder(kind)
    if build is None:
        raise TypeError(f"no Arrow builder for the column type {kind}")
    return build(values, kind)


def _builder(kind: pa.DataType) -> Callable[[Sequence[Any], pa.DataType], pa.Array] | None:
    if kind in _NUMBER_CODES:
        return _numbers
    if pa.types.is_timestamp(kind) and kind.unit == "us":
        return _times
    if pa.types.is_string(kind):
        return lambda values, _: _strings(values)
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


def _validity(values: Sequence[Any]) -> tuple[pa.Buffer | None, int]:
    """The validity bitmap (`None` when nothing is null) and the null count."""
    nulls = values.count(None)  # counted in C: most columns have no null, and need no bitmap
    return (pa.py_buffer(bitmap(list(map(is_not, values, repeat(None))))) if nulls else None), nulls


def _numbers(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    validity, nulls = _validity(values)
    data = array(_NUMBER_CODES[kind], [0 if value is None else value for value in values] if nulls else values)
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def _times(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    # Microseconds since the epoch; a datetime is converted as Arrow converts it (a naive one is UTC).
    counts = [micros(value) if isinstance(value, datetime) else value for value in values]
    validity, nulls = _validity(counts)
    data = array("q", [0 if count is None else count for count in counts])
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def _booleans(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    validity, nulls = _validity(values)
    data = bitmap([value is True for value in values])
    for value in values:
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"a boolean column got {type(value).__name__} {value!r}")
    return pa.Array.from_buffers(kind, len(values), [validity, pa.py_buffer(data)], null_count=nulls)


def _strings(values: Sequence[Any]) -> pa.Array:
    validity, nulls = _validity(values)
    texts = [value or "" for value in values] if nulls else values
    joined = "".join(texts)  # raises TypeError on a value not a string, as `pa.array` does
    if joined.isascii():  # a character is a byte: the offsets are the texts' lengths, and one encode does
        data, sizes = joined.encode(), map(len, texts)
    else:
        encoded = [text.encode() for text in texts]
        data, sizes = b"".join(encoded), map(len, encoded)
    offsets = array("i", accumulate(sizes, initial=0))
    buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.string(), len(values), buffers, null_count=nulls)


def _lists(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    validity, nulls = _validity(values)
    items = [() if value is None else value for value in values]
    offsets = array("i", accumulate(map(len, items), initial=0))
    child = column(list(chain.from_iterable(items)), kind.value_type)
    buffers = [validity, pa.py_buffer(offsets)]
    return pa.Array.from_buffers(kind, len(values), buffers, null_count=nulls, children=[child])


def _structs(values: Sequence[Any], kind: pa.DataType) -> pa.Array:
    # Struct values are dicts by field name, as `pa.array` takes them.
    validity, nulls = _validity(values)
    rows = [{} if value is None else value for value in values]
    children = [column([row.get(field.name) for row in rows], field.type) for field in kind]
    return pa.Array.from_buffers(kind, len(values), [validity], null_count=nulls, children=children)
