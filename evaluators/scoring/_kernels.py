"""Kernels over a traces-table batch's Arrow columns for `columns.py`: numpy views, durations, top rows."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


# Arrow arithmetic with a Python number, and `to_numpy`, import pandas (for its type checks): the
# columns are read into numpy from their buffers instead, and the arithmetic is numpy's.
def as_ints(values: pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """An integer array as numpy int64, null as -1."""
    data = pc.cast(values, pa.int64())
    found = np.frombuffer(data.buffers()[1], np.int64, len(data), data.offset * 8)
    return np.where(as_bools(pc.is_valid(values)), found, -1)


def code_ids(encoded: pa.DictionaryArray) -> np.ndarray[Any, np.dtype[np.int64]]:
    """A dictionary array's codes plus one, null as 0 (so `D + 1` values for `D` distinct texts)."""
    return as_ints(encoded.indices) + 1


def as_bools(flags: pa.Array) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """A boolean array as numpy booleans, null as false (`null and false` is false)."""
    data = pc.cast(pc.and_kleene(flags, pc.is_valid(flags)), pa.int8())
    found: np.ndarray[Any, np.dtype[np.bool_]] = np.frombuffer(data.buffers()[1], np.int8, len(data), data.offset) != 0
    return found


def message_text(message: dict[str, Any]) -> str | None:
    """`Message.text`: the text parts joined by newlines, or `None` without one."""
    texts = [part["text"] for part in message["parts"] if part["type"] == "text" and part["text"] is not None]
    return "\n".join(texts) if texts else None


def micros_between(start: pa.Array, end: pa.Array) -> list[int | None]:
    """End minus start in whole microseconds (the table's unit), null where either is missing.

    `timedelta.total_seconds()` divides the same integer by 10**6, so `micros / 1_000_000` is the
    reference's float exactly.
    """
    micros: list[int | None] = pc.subtract(pc.cast(end, pa.int64()), pc.cast(start, pa.int64())).to_pylist()
    return micros


def top_rows(batch: pa.RecordBatch) -> dict[str, int]:
    """Row position by trace id, for top-level rows whose trace id no other top-level row holds."""
    ids: list[str] = batch.column("trace_id").to_pylist()
    top: list[bool] = pc.is_null(batch.column("parent_row")).to_pylist()
    rows: dict[str, int] = {}
    twice: set[str] = set()
    for index, (trace_id, is_top) in enumerate(zip(ids, top, strict=True)):
        if not is_top:
            continue
        if trace_id in rows:
            twice.add(trace_id)
        rows[trace_id] = index
    for trace_id in twice:
        del rows[trace_id]
    return rows


def names_alike(
    offsets: list[int],
    codes: np.ndarray[Any, Any],
    index: dict[str, int],
    rows: list[int],
    wanted: list[tuple[str, ...]],
) -> list[bool | None]:
    """Per row `rows[k]` of a batch: whether its calls' names are `wanted[k]`, in order; `None`: not as many calls.

    `codes`: every call's name as a code of the batch's dictionary (`index`: the codes by name). One
    comparison over every row's calls at once, reduced per row by prefix sums of the differences.
    """
    bounds, at = np.asarray(offsets), np.asarray(rows, np.int64)
    lengths = np.fromiter(map(len, wanted), np.int64, len(rows))
    alike = np.flatnonzero(bounds[at + 1] - bounds[at] == lengths)
    coded: dict[tuple[str, ...], list[int]] = {}  # a case's rows share its names: each looked up once (-2: none)
    named = [coded.get(w := wanted[k]) or coded.setdefault(w, [index.get(n, -2) for n in w]) for k in alike.tolist()]
    lengths, starts = lengths[alike], bounds[at[alike]]
    ends = np.cumsum(lengths)
    calls = np.repeat(starts - (ends - lengths), lengths) + np.arange(int(ends[-1]) if len(ends) else 0)
    differ = np.concatenate(
        ([0], np.cumsum(codes[calls] != np.fromiter(itertools.chain(*named), np.int64, len(calls))))
    )
    found: list[bool | None] = [None] * len(rows)
    for k, same in zip(alike.tolist(), (differ[ends] == differ[ends - lengths]).tolist(), strict=True):
        found[k] = same
    return found
