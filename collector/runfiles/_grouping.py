"""Group span rows by trace across files, deduplicated, streaming (see `reader` for the memory bound)."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from evaltrace.collector.runfiles import runfiles
from evaltrace.collector.runfiles.shard import RowFilter

_T = TypeVar("_T")


# One record batch: its trace ids, span ids and rows (three parallel lists).
Batch = tuple[list[str], list[str], list[_T]]


def stream_groups(
    files: Sequence[Path], read_batches: Callable[[Path], Iterator[Batch[_T]]], only: RowFilter | None = None
) -> Iterator[list[_T]]:
    """Group rows by trace id across `files`, deduplicated, yielding each group once complete.

    A trace is complete once its last file has given all the rows a first pass counted there. The
    traces that end in a file are yielded in their order of first appearance, each as soon as it
    and every one before it are complete, so memory holds the traces still open (usually a few)
    rather than a whole file's rows (a 50,000-span file held ~350 MB); the order is the same as
    yielding them all at the file's end.

    Args:
        files: span files in reading order.
        read_batches: yields a file's rows batch by batch, with their trace and span ids.
        only: only the traces it keeps are indexed (`read_batches` must keep to it too).

    Returns:
        An iterator of row lists, one per trace, in the order the traces complete.
    """
    ends_at = _index_trace_ends(files, only)
    open_traces: dict[str, dict[str, _T]] = {}
    for index, path in enumerate(files):
        expected = ends_at[index]
        waiting = deque(expected)
        seen: Counter[str] = Counter()  # the file's rows of each trace so far (only `expected` ones are read)
        for trace_ids, span_ids, batch in read_batches(path):
            seen.update(trace_ids)  # counted in C: a third of the per-span loop's cost
            for trace_id, span_id, row in zip(trace_ids, span_ids, batch, strict=True):
                rows = open_traces.get(trace_id)
                if rows is None:
                    rows = open_traces[trace_id] = {}
                rows.setdefault(span_id, row)
            while waiting and seen[waiting[0]] >= expected[waiting[0]]:
                yield from _closed(open_traces, waiting.popleft())
        for trace_id in waiting:  # rows the count expected and the read did not give: the file's end settles it
            yield from _closed(open_traces, trace_id)


def _closed(open_traces: dict[str, dict[str, _T]], trace_id: str) -> Iterator[list[_T]]:
    rows = open_traces.pop(trace_id, None)
    if rows:
        yield list(rows.values())


def _index_trace_ends(files: Sequence[Path], only: RowFilter | None) -> list[dict[str, int]]:
    """For each file, the trace ids whose last appearance is in that file, with their rows there (first pass).

    In order of first appearance over all files, as the traces are yielded.
    """
    last_file: dict[str, int] = {}
    counts: list[dict[str, int]] = []
    for index, path in enumerate(files):
        found = runfiles.count_trace_rows(path, only)
        counts.append(found)
        last_file.update(dict.fromkeys(found, index))
    ends_at: list[dict[str, int]] = [{} for _ in files]
    for trace_id, index in last_file.items():
        ends_at[index][trace_id] = counts[index][trace_id]
    return ends_at


def group_parts(parts: Sequence[Iterator[Batch[_T]]]) -> Iterator[list[_T]]:
    """`stream_groups` over rows already read: `parts` holds each file's batches, in file order.

    The same grouping and deduplication (the first copy in file order wins), and the same order:
    traces by the last part they appear in, then by first appearance. Every part is read before
    the first group is yielded, since which part ends a trace is known only at the end.
    """
    open_traces: dict[str, dict[str, _T]] = {}
    last_part: dict[str, int] = {}
    for index, batches in enumerate(parts):
        for trace_ids, span_ids, batch in batches:
            for trace_id, span_id, row in zip(trace_ids, span_ids, batch, strict=True):
                rows = open_traces.get(trace_id)
                if rows is None:
                    rows = open_traces[trace_id] = {}
                rows.setdefault(span_id, row)
                last_part[trace_id] = index
    for trace_id in sorted(open_traces, key=last_part.__getitem__):  # stable: first appearance next
        yield list(open_traces.pop(trace_id).values())
