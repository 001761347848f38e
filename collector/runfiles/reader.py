"""Read recorded span files back, deduplicated and grouped trace by trace.

The reader takes run files already resolved (`otlp/files/inputs.py` turns PATH arguments into
them, once per command), in name order: names start with the run id and a UTC timestamp, so
adjacent files hold adjacent traces.

Streaming and memory. `iter_traces` makes two passes. The first reads only the `trace_id`
column of every file (checking each file's schema on the way, so bad input fails before any
trace is yielded) and notes the last file each trace appears in. The second reads the files one
by one, batch by batch, and yields a trace as soon as its last file has been read. Memory holds
the trace-id index (one short string per trace), the decoded spans of the traces still open
(started in a file already read and continued in a later one) and one record batch. On a run
written by one process that is a few traces at a time, whatever the run's size; the worst case
(every trace spread over the first and last file) holds the whole run.

Spans present in several files (a forked process flushing its parent's buffer, a compaction
that crashed before deleting its inputs) are deduplicated on `(trace_id, span_id)`; the first
copy in file order wins. Spans of a trace are returned sorted by start time, then span id, so
the result does not depend on how the spans were spread over files.

Log-record files (`*.logs.parquet`, recognised by their metadata) are accepted wherever span
files are. They go through the same streaming pass, keyed by trace id, so a shard or a trace-id
selection reads the same records either way; each record is attached to its span as a span event
(`_logs_decode.attach_logs`), deduplicated on its `log_id`. Records whose span is not in the
files are counted (`LogAttachment`, and `evaltrace runs`) and a warning says how many.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from evaltrace.collector.runfiles import _decode, runfiles
from evaltrace.collector.runfiles._grouping import group_parts, stream_groups
from evaltrace.collector.runfiles._logs_decode import LogAttachment, LogRow, attach_logs, read_log_batches
from evaltrace.collector.runfiles._runsummary import RunsSummary, SpansPerTrace, TraceSummary, summarize_runs
from evaltrace.collector.runfiles.inflight import clean_stale_inflight, find_stale_inflight
from evaltrace.collector.runfiles.runfiles import Location, RecordingLosses, recording_losses
from evaltrace.collector.runfiles.schema import SIGNAL_LOGS, SIGNAL_SPANS
from evaltrace.collector.runfiles.shard import Shard, TracePrefix, row_filter
from evaltrace.collector.runfiles.spans import Span

logger = logging.getLogger("evaltrace")

__all__ = [
    "LogAttachment",
    "SPAN_COLUMNS",
    "RecordingLosses",
    "RunsSummary",
    "Shard",
    "SpansPerTrace",
    "TraceSummary",
    "clean_stale_inflight",
    "find_stale_inflight",
    "find_trace_ids",
    "folder_span_files",
    "iter_traces",
    "read_spans",
    "recording_losses",
    "span_groups_of_rows",
    "split_signals",
    "summarize_runs",
]

SPAN_COLUMNS = _decode.SPAN_COLUMNS
"""The span-file columns a trace is rebuilt from (what `span_groups_of_rows` takes)."""
_L = TypeVar("_L", bound=Location)
_SPAN_ORDER = attrgetter("start_time_ns", "span_id")


def folder_span_files(folder: Path) -> list[Path]:
    """The complete run files directly in `folder`, as the shell glob `folder/*.parquet` names them.

    Span and log-record files alike (`split_signals` tells them apart). Hidden names never match,
    so in-flight temporary files are left out.
    """
    return [p for p in folder.iterdir() if p.suffix == ".parquet" and not p.name.startswith(".") and p.is_file()]


def read_spans(files: Sequence[Path]) -> Iterator[Span]:
    """Yield every recorded span once, trace by trace (see the module docstring).

    Args:
        files: the run files, as `resolve_paths` returns them.

    Raises:
        InputError: a file is unreadable or not an evaltrace span file.
    """
    for trace in iter_traces(files):
        yield from trace


def split_signals(files: Sequence[_L]) -> tuple[list[_L], list[_L]]:
    """The span files and the log-record files among `files` (by content), each in the given order.

    Raises:
        InputError: a file is unreadable or not an evaltrace run file.
    """
    signals = {path: runfiles.file_signal(path) for path in files}
    return [p for p in files if signals[p] == SIGNAL_SPANS], [p for p in files if signals[p] == SIGNAL_LOGS]


def iter_traces(
    files: Sequence[Path],
    shard: Shard | None = None,
    *,
    trace_ids: Iterable[str] | None = None,
    logs: LogAttachment | None = None,
) -> Iterator[list[Span]]:
    """Yield the spans of each trace as one list, streaming over the files.

    Log records in the files are attached to their spans as span events (see the module docstring).

    Args:
        files: the run files, as `resolve_paths` returns them (in name order, each once).
        shard: only the traces of this shard (see `Shard`); every trace when `None`.
        trace_ids: only these traces (exact ids): only their rows are decoded.
        logs: filled with what happened to the log records read (attached, unattached).

    Returns:
        An iterator of non-empty span lists, one per trace id, each sorted by start time.

    Raises:
        InputError: a file is unreadable or not an evaltrace span file.
    """
    only = row_filter(shard, trace_ids)
    _, log_files = split_signals(files)
    if not log_files:
        read_batches = partial(_decode.read_span_batches, only=only)
        for group in stream_groups(files, read_batches, only):
            group.sort(key=_SPAN_ORDER)
            yield group
        return
    stats = logs if logs is not None else LogAttachment()
    is_log = frozenset(log_files)

    def read_any(path: Path) -> Iterator[Any]:
        if path in is_log:
            return read_log_batches(path, only, stats)
        return _decode.read_span_batches(path, only)

    mixed: list[Span | LogRow]
    for mixed in stream_groups(files, read_any, only):
        spans = attach_logs(mixed, stats)
        if spans:
            spans.sort(key=_SPAN_ORDER)
            yield spans
    _warn_unattached(stats)


def span_groups_of_rows(parts: Sequence[tuple[Location, Sequence[pa.RecordBatch]]]) -> Iterator[list[Span]]:
    """`iter_traces` over span rows already read (`SPAN_COLUMNS` batches), as a shuffle delivers them.

    Args:
        parts: per span file, in reading order, its name (for errors) and the rows it gave; the
            rows of a trace may be spread over several parts, as over several files.

    Returns:
        The spans of each trace as one list, deduplicated and sorted as `iter_traces` does.

    Raises:
        InputError: a row holds malformed JSON or text that is not UTF-8 (named with its file).
    """

    def decoded(location: Location, batches: Sequence[pa.RecordBatch]) -> Iterator[_decode.SpanBatch]:
        resources: dict[str | None, dict[str, Any]] = {None: {}, "": {}}
        for batch in batches:
            yield _decode.decode_batch(location, batch, resources)

    for group in group_parts([decoded(location, batches) for location, batches in parts]):
        group.sort(key=_SPAN_ORDER)
        yield group


def _warn_unattached(stats: LogAttachment) -> None:
    if not stats.unattached:
        return
    names = ", ".join(f"{name} ({n})" for name, n in sorted(stats.unattached_events.items()))
    logger.warning(
        "evaltrace: %d log record(s) name spans that are not in these files and belong to no rebuilt trace "
        "(%s); were the span files left out or not recorded? 'evaltrace runs PATH' counts them",
        stats.unattached,
        names,
    )


def find_trace_ids(files: Sequence[Path], prefix: str) -> list[str]:
    """The distinct trace ids starting with `prefix` (lowercase hex), reading only the trace-id column.

    Args:
        files: the run files, as `resolve_paths` returns them.
        prefix: the start of a trace id; `""` matches every trace.

    Returns:
        The matching ids, sorted.

    Raises:
        InputError: a file is unreadable or not an evaltrace span file.
    """
    found: set[str] = set()
    span_files, _ = split_signals(files)
    for path in span_files:  # a trace is its spans: ids known only from log records name no trace
        found.update(runfiles.read_trace_ids(path, TracePrefix(prefix)))
    return sorted(found)
