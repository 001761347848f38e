"""Kernels over a traces-table batch's Arrow columns for `columns.py`: numpy views, durations, top rows."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Ints = np.ndarray[Any, np.dtype[np.int64]]
Bools = np.ndarray[Any, np.dtype[np.bool_]]
Objects = np.ndarray[Any, np.dtype[np.object_]]
T = TypeVar("T")


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


def by_object(items: Sequence[T]) -> list[tuple[T, Ints]]:
    """The positions of `items` by object (identity), in order of first appearance: a case's rows share its scorer."""
    ids = np.fromiter(map(id, items), np.int64, len(items))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    groups = np.split(np.argsort(inverse, kind="stable"), np.cumsum(np.bincount(inverse))[:-1])
    return [(items[int(first[u])], groups[u]) for u in np.argsort(first).tolist()]


def made_once(keys: Ints, make: Callable[..., object], *given: Any) -> Objects:
    """`make(*given, key)` for each of `keys`, made once per distinct key: rows alike share one object."""
    distinct, inverse = np.unique(keys, return_inverse=True)
    made = np.empty(
        len(distinct), object
    )  # filled one by one: a pydantic model is iterable, `np.array` would unpack it
    for place, key in enumerate(distinct.tolist()):
        made[place] = make(*given, key)
    found: Objects = made[inverse]
    return found


def sums_within(usage: pa.StructArray, tops: Ints, bounds: list[tuple[list[str], float | None, float | None]]) -> Bools:
    """Per row of `tops`: whether each bound's sum of `usage` fields is recorded and within its (min, max).

    As `metric_value` and `Limit.violation` find (`total_tokens`: input plus output); sums past 2**53
    are left out (not exact as floats).
    """
    fields = {
        name: pc.struct_field(usage, name)
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens")
    }
    recorded = {name: as_bools(pc.is_valid(counts))[tops] for name, counts in fields.items()}
    value = {name: np.where(recorded[name], as_ints(counts)[tops], 0) for name, counts in fields.items()}
    recorded["total_tokens"] = recorded["input_tokens"] | recorded["output_tokens"]
    value["total_tokens"] = value["input_tokens"] + value["output_tokens"]
    sure = np.ones(len(tops), bool)
    for parts, low, high in bounds:
        total = np.sum([value[part] for part in parts], axis=0, dtype=np.int64)
        sure &= np.logical_and.reduce([recorded[part] for part in parts]) & (np.abs(total) < 2**53)
        sure &= (high is None or total <= high) & (low is None or total >= low)
    return sure
