"""Choosing which traces of a run to read, on the Arrow trace-id column, before any row is decoded.

`Shard` splits a run's traces into disjoint shards, so that several processes can score one run;
`TraceIds` keeps named traces and `TracePrefix` those whose id starts alike (`evaltrace show`
finds and reads one trace of a large run this way). All are `RowFilter`s, which the reader
applies to every record batch, so a filtered read decodes only the rows it keeps.

A shard keeps the traces whose trace id ends in one of its hex pairs. Trace ids are random
(W3C), so their last two hex digits spread traces evenly, and the choice is made on the Arrow
column before any row is decoded: a process reading one shard of a file decodes only its own
rows. Every trace id, hex or not, falls in exactly one shard: the last shard takes whatever the
others do not.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

from evaltrace.collector.arrow_arrays import column
from evaltrace.collector.runfiles.layout import MEMORY_POOL


class RowFilter(ABC):
    """Which rows of a record batch with a `trace_id` column to keep, chosen by trace id."""

    @abstractmethod
    def mask(self, trace_ids: pa.Array) -> pa.Array:
        """A boolean mask of the rows of `trace_ids` (a string array) to keep."""

    def keep(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of `batch` to read."""
        return pc.filter(batch, self.mask(batch.column("trace_id")), memory_pool=MEMORY_POOL)


_PAIRS = tuple(f"{value:02x}" for value in range(256))


@dataclass(frozen=True)
class Shard(RowFilter):
    """Shard `index` of `count` (0-based)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard index {self.index} is outside 0..{self.count - 1}")

    @cached_property
    def _others(self) -> pa.Array:
        """The hex pairs of the shards before the last one (what the last shard leaves out)."""
        return column([p for p in _PAIRS if int(p, 16) % self.count != self.count - 1], pa.string())

    @cached_property
    def _own(self) -> pa.Array:
        return column([p for p in _PAIRS if int(p, 16) % self.count == self.index], pa.string())

    def mask(self, trace_ids: pa.Array) -> pa.Array:
        """A boolean mask of the rows of `trace_ids` (a string array) that belong to this shard."""
        tails = pc.utf8_slice_codeunits(trace_ids, -2)
        if self.index == self.count - 1:
            return pc.invert(pc.is_in(tails, value_set=self._others))
        return pc.is_in(tails, value_set=self._own)

    def keep(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The rows of `batch` (which has a `trace_id` column) in this shard."""
        return batch if self.count == 1 else super().keep(batch)


def shard_keys(trace_ids: pa.Array, count: int) -> pa.Array:
    """Each row's shard index (int32) among `count` shards: the shard whose `Shard.mask` keeps the row.

    A shuffle keyed on it (the Ray engine's) puts every span of a trace in one group, the very
    traces `Shard(index, count)` reads from the files.
    """
    keys = pa.nulls(len(trace_ids), pa.int32()).fill_null(count - 1)
    for index in range(count - 1):  # the last shard takes whatever the others do not
        keys = pc.if_else(Shard(index, count).mask(trace_ids), pa.scalar(index, pa.int32()), keys)
    return keys


@dataclass(frozen=True)
class TraceIds(RowFilter):
    """Only the rows of these trace ids."""

    ids: frozenset[str]

    @cached_property
    def _values(self) -> pa.Array:
        return column(sorted(self.ids), pa.string())

    def mask(self, trace_ids: pa.Array) -> pa.Array:
        """The rows whose trace id is one of `ids`."""
        return pc.is_in(trace_ids, value_set=self._values)


@dataclass(frozen=True)
class TracePrefix(RowFilter):
    """Only the rows whose trace id starts with `prefix`."""

    prefix: str

    def mask(self, trace_ids: pa.Array) -> pa.Array:
        """The rows whose trace id starts with `prefix`."""
        return pc.starts_with(trace_ids, pattern=self.prefix)


@dataclass(frozen=True)
class _Both(RowFilter):
    first: RowFilter
    second: RowFilter

    def mask(self, trace_ids: pa.Array) -> pa.Array:
        return pc.and_(self.first.mask(trace_ids), self.second.mask(trace_ids))


def row_filter(shard: Shard | None = None, trace_ids: Iterable[str] | None = None) -> RowFilter | None:
    """The filter that keeps the rows of `shard` and of `trace_ids` (each `None` keeps everything)."""
    if isinstance(trace_ids, str):
        trace_ids = [trace_ids]  # one id, not its characters
    by_id = TraceIds(frozenset(trace_ids)) if trace_ids is not None else None
    if shard is not None and by_id is not None:
        return _Both(shard, by_id)
    return shard if shard is not None else by_id
