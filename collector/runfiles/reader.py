"""Read recorded span files back, deduplicated and grouped trace by trace.

PATH arguments may be files, folders (every `*.parquet` directly inside) or globs
(`runs/*.parquet`, `runs/**/*.parquet`). Files are read in name order: names start with the run
id and a UTC timestamp, so adjacent files hold adjacent traces.

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

import glob
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import Any

import pyarrow as pa

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files import framing as otlp_frames
from evaltrace.collector.runfiles import _decode, runfiles
from evaltrace.collector.runfiles._grouping import group_parts, stream_groups
from evaltrace.collector.runfiles._logs_decode import LogAttachment, LogRow, attach_logs, read_log_batches
from evaltrace.collector.runfiles._runsummary import RunsSummary, SpansPerTrace, TraceSummary, summarize_files
from evaltrace.collector.runfiles.inflight import clean_stale_inflight, find_stale_inflight
from evaltrace.collector.runfiles.runfiles import Location, RecordingLosses, recording_losses
from evaltrace.collector.runfiles.schema import INFLIGHT_PREFIX, INFLIGHT_SUFFIX, SIGNAL_LOGS, SIGNAL_SPANS
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
    "resolve_locations",
    "resolve_paths",
    "span_groups_of_rows",
    "split_signals",
    "summarize_runs",
]

PathArg = str | os.PathLike[str]
SPAN_COLUMNS = _decode.SPAN_COLUMNS
"""The span-file columns a trace is rebuilt from (what `span_groups_of_rows` takes)."""
_GLOB_CHARS = frozenset("*?[")
_SPAN_ORDER = attrgetter("start_time_ns", "span_id")


def resolve_paths(paths: Iterable[PathArg], *, fresh_imports: bool = False) -> list[Path]:
    """Expand PATH arguments into the run files they name, de-duplicated, in name order.

    A file that holds OTLP (JSON lines or protobuf, plain or gzip: told by its content, see
    `otlp_frames.py`) stands for the run files it is imported into, once, in the cache
    (`otlp_cache.py`); folders contribute their `*.parquet` files only.

    Args:
        paths: files, folders (their `*.parquet` files) or glob patterns.
        fresh_imports: import OTLP files again even when the cache holds them (`--no-cache`).

    Returns:
        The files, sorted by file name (then full path); each file appears once.

    Raises:
        InputError: no argument given, a path that does not exist, a glob matching no file, a
            folder without `*.parquet` files, or an OTLP file that cannot be read (named with its line).
    """
    found: dict[str, Path] = {}
    given = False
    empty: list[Path] = []  # OTLP files holding no span or log record
    for arg in paths:
        given = True
        for path in _expand(str(arg)):
            run_files = _run_files(path, fresh_imports)
            for run_file in run_files:
                found.setdefault(os.path.realpath(run_file), run_file)
            if not run_files:
                empty.append(path)
    if not given:
        raise InputError("no PATH given: name span files, a folder of them (e.g. runs) or a glob (runs/*.parquet)")
    if not found and empty:  # said here: an empty list would read as "no PATH given" further on
        raise InputError(f"{empty[0]}: no spans or log records in this OTLP file")
    return sorted(found.values(), key=lambda p: (p.name, str(p)))


def _run_files(path: Path, fresh: bool) -> list[Path]:
    """`path` itself, or the run files an OTLP file is imported into."""
    fmt = otlp_frames.sniff(path)
    if fmt is None:
        return [path]
    from evaltrace.collector.otlp.files.import_cache import imported_files  # deferred: loads the OTLP decoder

    return imported_files(path, fmt, fresh=fresh)


def _expand(arg: str) -> list[Path]:
    if any(c in _GLOB_CHARS for c in arg):
        matches = [Path(m) for m in glob.glob(arg, recursive=True)]
        files = [m for m in matches if m.is_file() and not _is_inflight(m)]
        if not files:
            raise InputError(f"no files match {arg!r}")
        return files
    path = Path(arg)
    if path.is_dir():
        return _folder_files(path)
    if path.is_file():
        return [path]
    if path.exists():  # a device or a pipe (`<(cat f)`): Parquet is read from the end, so needs a file
        raise InputError(f"{arg}: not a regular file or folder")
    raise InputError(f"{arg}: no such file or folder")


def folder_span_files(folder: Path) -> list[Path]:
    """The complete run files directly in `folder`, as the shell glob `folder/*.parquet` names them.

    Span and log-record files alike (`split_signals` tells them apart). Hidden names never match,
    so in-flight temporary files are left out.
    """
    return [p for p in folder.iterdir() if p.suffix == ".parquet" and not p.name.startswith(".") and p.is_file()]


def _folder_files(folder: Path) -> list[Path]:
    files = folder_span_files(folder)
    if not files:
        inflight = sum(1 for p in folder.iterdir() if _is_inflight(p))
        hint = f" ({inflight} in-flight temporary file(s): a writer may still be running)" if inflight else ""
        if not hint and any(p.is_file() and not p.name.startswith(".") for p in folder.iterdir()):
            hint = f" (OTLP files are read when named: {folder / '*.jsonl'}, for instance)"
        raise InputError(f"{folder}: no *.parquet files in this folder{hint}")
    return files


def _is_inflight(path: Path) -> bool:
    return path.name.startswith(INFLIGHT_PREFIX) and path.name.endswith(INFLIGHT_SUFFIX)


def read_spans(paths: Iterable[PathArg]) -> Iterator[Span]:
    """Yield every recorded span once, trace by trace (see the module docstring).

    Args:
        paths: files, folders or globs, as for `resolve_paths`.

    Raises:
        InputError: a path names nothing, or a file is unreadable or not an evaltrace span file.
    """
    for trace in iter_traces(paths):
        yield from trace


def split_signals(files: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """The span files and the log-record files among `files` (by content), each in the given order.

    Raises:
        InputError: a file is unreadable or not an evaltrace run file.
    """
    signals = {path: runfiles.file_signal(path) for path in files}
    return [p for p in files if signals[p] == SIGNAL_SPANS], [p for p in files if signals[p] == SIGNAL_LOGS]


def iter_traces(
    paths: Iterable[PathArg],
    shard: Shard | None = None,
    *,
    trace_ids: Iterable[str] | None = None,
    logs: LogAttachment | None = None,
) -> Iterator[list[Span]]:
    """Yield the spans of each trace as one list, streaming over the files.

    Log records in the files are attached to their spans as span events (see the module docstring).

    Args:
        paths: files, folders or globs, as for `resolve_paths`.
        shard: only the traces of this shard (see `Shard`); every trace when `None`.
        trace_ids: only these traces (exact ids): only their rows are decoded.
        logs: filled with what happened to the log records read (attached, unattached).

    Returns:
        An iterator of non-empty span lists, one per trace id, each sorted by start time.

    Raises:
        InputError: a path names nothing, or a file is unreadable or not an evaltrace span file.
    """
    files = resolve_paths(paths)
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


def resolve_locations(paths: Iterable[PathArg]) -> list[Location]:
    """`resolve_paths`, where an argument may also be a URI (`file:///runs`, `s3://bucket/run`).

    A URI names one file, or a folder whose `*.parquet` files are read (no globs in URIs).

    Raises:
        InputError: as `resolve_paths`; also a URI naming nothing or no filesystem pyarrow knows.
    """
    given = [str(arg) for arg in paths]
    uris = [arg for arg in given if runfiles.is_uri(arg)]
    local: list[Location] = list(resolve_paths([a for a in given if a not in uris])) if len(uris) < len(given) else []
    found = [location for uri in uris for location in _uri_files(uri)]
    return sorted({str(loc): loc for loc in [*local, *found]}.values(), key=lambda loc: (_name(loc), str(loc)))


def _name(location: Location) -> str:
    return location.name if isinstance(location, Path) else location.rstrip("/").rsplit("/", 1)[-1]


def _uri_files(uri: str) -> list[Location]:
    from pyarrow import fs as pafs

    try:
        filesystem, inner = pafs.FileSystem.from_uri(uri)
        info = filesystem.get_file_info(inner)
        if info.type == pafs.FileType.Directory:
            listed = filesystem.get_file_info(pafs.FileSelector(inner))
            names = [i.base_name for i in listed if i.type == pafs.FileType.File and i.extension == "parquet"]
            if not names:
                raise InputError(f"{uri}: no *.parquet files in this folder")
            return [f"{uri.rstrip('/')}/{name}" for name in names if not name.startswith(".")]
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{uri}: cannot be listed ({' '.join(str(exc).split())})") from None
    if info.type != pafs.FileType.File:
        raise InputError(f"{uri}: no such file or folder")
    return [uri]


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


def find_trace_ids(paths: Iterable[PathArg], prefix: str) -> list[str]:
    """The distinct trace ids starting with `prefix` (lowercase hex), reading only the trace-id column.

    Args:
        paths: files, folders or globs, as for `resolve_paths`.
        prefix: the start of a trace id; `""` matches every trace.

    Returns:
        The matching ids, sorted.

    Raises:
        InputError: a path names nothing, or a file is unreadable or not an evaltrace span file.
    """
    found: set[str] = set()
    span_files, _ = split_signals(resolve_paths(paths))
    for path in span_files:  # a trace is its spans: ids known only from log records name no trace
        found.update(runfiles.read_trace_ids(path, TracePrefix(prefix)))
    return sorted(found)


def summarize_runs(paths: Iterable[PathArg]) -> RunsSummary:
    """Count what span files hold, reading only their small columns (no payloads).

    Args:
        paths: files, folders or globs, as for `resolve_paths`.

    Returns:
        Totals, per-service and per-run-id span counts, the time range, one `TraceSummary` per
        trace and the stale in-flight files found next to the files.

    Raises:
        InputError: a path names nothing, or a file is unreadable or not an evaltrace span file.
    """
    return summarize_files(resolve_paths(paths))
