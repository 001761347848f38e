"""Opening and checking run files (the pyarrow side of `reader.py`).

A run folder holds span files (schema version 1) and log-record files (logs schema version 1,
metadata `evaltrace.signal=logs`). Every file is opened through `open_run_file`, which
recognises the kind by the file's metadata, checks its schema against `layout.SCHEMA` or
`logs_layout.LOGS_SCHEMA`, and turns every pyarrow failure into a one-line
`InputError` naming the file. `file_signal` tells which kind a file is.
Values come out column by column (`to_pylist` per column, never per-row pyarrow scalars).
`_decode.py` turns the span columns into `Span` objects.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs as pafs

from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles.layout import SCHEMA
from evaltrace.collector.runfiles.logs_layout import LOGS_SCHEMA
from evaltrace.collector.runfiles.schema import (
    LOGS_SCHEMA_VERSION,
    METADATA_SCHEMA_VERSION,
    METADATA_SIGNAL,
    SCHEMA_VERSION,
    SIGNAL_LOGS,
    SIGNAL_SPANS,
)
from evaltrace.collector.runfiles.shard import RowFilter

# Rows per decoded batch: large enough to amortise pyarrow calls, small enough that one batch's
# Python rows stay cheap (spans carry whole prompts): traces are yielded as soon as their rows are
# read, so the batch is most of what reading holds. A sharded first scoring of the peer set: each
# worker's table build peaked at 165 MB with 2,048 rows, 144 MB with 1,024 (reading ~3% more CPU).
BATCH_ROWS = 1_024


Location = Path | str
"""A run file: a local path, or (a `str`) a URI any pyarrow filesystem opens (`file://`, `s3://`, ...)."""


def is_uri(location: Location) -> bool:
    """Whether `location` is a URI (`scheme://...`) rather than a local path."""
    return isinstance(location, str) and "://" in location


def _source(location: Location) -> Path | pa.NativeFile:
    """What `pq.ParquetFile` reads: the local path, or the URI's file opened on its pyarrow filesystem."""
    if not is_uri(location):
        return Path(location)
    try:
        filesystem, inner = pafs.FileSystem.from_uri(str(location))
    except pa.ArrowException as exc:
        raise InputError(f"{location}: no filesystem pyarrow can open ({' '.join(str(exc).split())})") from None
    return filesystem.open_input_file(inner)


def _fail(path: Location, exc: BaseException) -> InputError:
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return InputError(f"{path}: not a readable Parquet file ({detail}). It may be truncated, corrupt or not Parquet.")


def open_run_file(path: Location) -> pq.ParquetFile:
    """Open `path` and check it is an evaltrace span or log-record file this version can read.

    Raises:
        InputError: the file is missing, unreadable, not Parquet, foreign, or of another schema.
    """
    try:
        handle = pq.ParquetFile(_source(path))
        schema = handle.schema_arrow
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pa.ArrowException, OSError) as exc:
        raise _fail(path, exc) from None
    metadata = schema.metadata or {}
    if _signal(metadata) == SIGNAL_LOGS:
        _check_version(path, metadata, "log-record", LOGS_SCHEMA_VERSION)
        _check_columns(path, schema, LOGS_SCHEMA, f"logs schema v{LOGS_SCHEMA_VERSION}")
    else:
        _check_version(path, metadata, "span", SCHEMA_VERSION)
        _check_columns(path, schema, SCHEMA, f"schema v{SCHEMA_VERSION}")
    return handle


def _signal(metadata: dict[bytes, bytes]) -> str:
    return metadata.get(METADATA_SIGNAL, SIGNAL_SPANS.encode()).decode("utf-8", "replace")


def signal_of(handle: pq.ParquetFile) -> str:
    """`spans` or `logs`: what an opened run file holds (by its metadata)."""
    return _signal(handle.schema_arrow.metadata or {})


def file_signal(path: Location) -> str:
    """`spans` or `logs`: what the run file at `path` holds, checked as `open_run_file` does.

    Raises:
        InputError: as `open_run_file`.
    """
    handle = open_run_file(path)
    try:
        return signal_of(handle)
    finally:
        handle.close()


def _check_version(path: Location, metadata: dict[bytes, bytes], noun: str, supported: int) -> None:
    """The file's schema version is the one this evaltrace reads (`noun`: the file's kind, for messages)."""
    key = METADATA_SCHEMA_VERSION.decode()
    raw = metadata.get(METADATA_SCHEMA_VERSION)
    if raw is None:
        raise InputError(f"{path}: not an evaltrace {noun} file (no {key} metadata). Was it written by evaltrace?")
    try:
        version = int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise InputError(f"{path}: unreadable {key} {raw!r} of a {noun} file") from None
    if version != supported:
        newer = version > supported
        hint = ". Upgrade evaltrace: pip install -U evaltrace" if newer else "; it is not supported"
        relation = "newer" if newer else "older"
        raise InputError(
            f"{path}: written with {noun} schema v{version}, {relation} than this evaltrace reads (v{supported}){hint}"
        )


def _check_columns(path: Location, schema: pa.Schema, layout: pa.Schema, version: str) -> None:
    names = set(schema.names)
    for expected in layout:
        if expected.name not in names:
            raise InputError(f"{path}: missing column {expected.name!r} ({version}). Was it written by evaltrace?")
        actual = schema.field(expected.name).type
        if not actual.equals(expected.type):
            raise InputError(
                f"{path}: column {expected.name!r} has type {actual}, expected {expected.type} "
                f"({version}). Was it written by evaltrace?"
            )


class RecordingLosses(NamedTuple):
    """Spans the recording processes ended but never wrote, as their files' metadata counts them."""

    dropped: int
    """Spans the batch processor dropped on a full queue, before they reached the exporter."""
    unwritten: int
    """Spans the exporter could not write (failed writes beyond its buffer bound)."""


class LossTally:
    """Each writer's latest loss counts, from the footers of the files of one signal opened so far.

    A writer's counts are cumulative, so its files say e.g. 2 then 5: it lost 5, not 7. A tally
    counts spans (the default) or log records (`signal="logs"`); files of the other kind are
    ignored, so one list of run files can be given to either.
    """

    def __init__(self, signal: str = SIGNAL_SPANS) -> None:
        self._latest: dict[str, RecordingLosses] = {}
        self._signal = signal

    def add(self, handle: pq.ParquetFile) -> None:
        """Take the counts of one open run file (if it holds this tally's signal)."""
        raw: dict[bytes, bytes] = handle.metadata.metadata or {}
        if _signal(raw) != self._signal:
            return
        meta = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in raw.items()}
        noun = "log_records" if self._signal == SIGNAL_LOGS else "spans"
        for writer, counts in _file_losses(meta, noun).items():
            before = self._latest.get(writer, RecordingLosses(0, 0))
            self._latest[writer] = RecordingLosses(
                max(before.dropped, counts.dropped), max(before.unwritten, counts.unwritten)
            )

    def by_writer(self) -> dict[str, RecordingLosses]:
        """Each writer's latest counts."""
        return dict(self._latest)

    def total(self) -> RecordingLosses:
        """The writers' counts, summed."""
        latest = self._latest.values()
        return RecordingLosses(sum(x.dropped for x in latest), sum(x.unwritten for x in latest))


def _file_losses(meta: dict[str, str], noun: str) -> dict[str, RecordingLosses]:
    merged = meta.get("evaltrace.writer_losses")
    if merged is not None:  # a compacted file: the counts of every writer whose spans it holds
        try:
            return {str(w): RecordingLosses(int(d), int(u)) for w, (d, u) in json.loads(merged).items()}
        except (ValueError, TypeError, AttributeError, RecursionError):
            return {}
    # Files of writers before the writer id: host, pid and run id are the closest name.
    fallback = "/".join(meta.get(f"evaltrace.{key}", "") for key in ("host", "pid", "run_id"))
    writer = meta.get("evaltrace.writer_id") or fallback
    return {
        writer: RecordingLosses(
            _count(meta.get(f"evaltrace.dropped_{noun}")), _count(meta.get(f"evaltrace.unwritten_{noun}"))
        )
    }


def _count(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() else 0


def recording_losses(files: Iterable[Location]) -> RecordingLosses:
    """What the writers of span `files` lost in all (footers only; see `LossTally`).

    Raises:
        InputError: as `open_run_file`.
    """
    tally = LossTally()
    for path in files:
        handle = open_run_file(path)
        try:
            tally.add(handle)
        finally:
            handle.close()
    return tally.total()


def iter_batches(
    path: Location, columns: Sequence[str], only: RowFilter | None = None, tally: LossTally | None = None
) -> Iterator[pa.RecordBatch]:
    """Yield record batches of `columns`, turning read failures into `InputError`.

    With `only`, just the rows it keeps (`columns` must then include `trace_id`); with `tally`,
    the file's loss counts are added to it.
    """
    handle = open_run_file(path)
    if tally is not None:
        tally.add(handle)
    required = _required_columns(handle, columns)
    rows = 0
    try:
        for batch in handle.iter_batches(batch_size=BATCH_ROWS, columns=list(columns), use_threads=False):
            _check_required(path, batch, required, rows)
            rows += batch.num_rows
            yield batch if only is None else only.keep(batch)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (was it removed while reading?)") from None
    except (pa.ArrowException, OSError) as exc:
        raise _fail(path, exc) from None
    finally:
        handle.close()


def _required_columns(handle: pq.ParquetFile, columns: Sequence[str]) -> list[str]:
    """The columns read that every row must fill (the layout's non-nullable ones)."""
    layout = LOGS_SCHEMA if signal_of(handle) == SIGNAL_LOGS else SCHEMA
    return [name for name in columns if name in layout.names and not layout.field(name).nullable]


def _check_required(path: Location, batch: pa.RecordBatch, required: Sequence[str], before: int) -> None:
    """Refuse a batch with an empty value in a required column (another writer's file may have one).

    Grouping skips a span without a trace id and the converter cannot place one without a span id:
    read on, such a row would vanish from the run without a word.
    """
    for name in required:
        column = batch.column(name)
        if column.null_count:
            row = before + pc.index(pc.is_null(column), True).as_py()
            raise InputError(f"{path}: row {row + 1} has no {name} (a required column). Was it written by evaltrace?")


def not_utf8(path: Location, exc: UnicodeDecodeError) -> InputError:
    """The error for a text column holding bytes that are not UTF-8 (pyarrow checks only when making a `str`)."""
    return InputError(
        f"{path}: a text column holds bytes that are not UTF-8 ({exc.reason} at byte {exc.start} of a value); "
        "the file is damaged or was not written by evaltrace"
    )


def read_trace_ids(path: Path, only: RowFilter | None = None) -> list[str]:
    """Return the distinct trace ids of a file (those `only` keeps, if given), in order of first appearance."""
    seen: dict[str, None] = {}
    for batch in iter_batches(path, ["trace_id"], only):
        # Log records emitted outside any span have no trace id.
        try:
            seen.update(dict.fromkeys(batch.column(0).drop_null().unique().to_pylist()))
        except UnicodeDecodeError as exc:
            raise not_utf8(path, exc) from None
    return list(seen)


def count_trace_rows(path: Path, only: RowFilter | None = None) -> dict[str, int]:
    """Each trace id's number of rows in a file (those `only` keeps), in order of first appearance."""
    counts: dict[str, int] = {}
    for batch in iter_batches(path, ["trace_id"], only):
        # Log records emitted outside any span have no trace id.
        try:
            found = pc.value_counts(batch.column(0).drop_null()).to_pylist()
        except UnicodeDecodeError as exc:
            raise not_utf8(path, exc) from None
        for item in found:  # in order of first appearance within the batch
            counts[item["values"]] = counts.get(item["values"], 0) + item["counts"]
    return counts


def read_columns(path: Path, columns: Sequence[str], tally: LossTally | None = None) -> Iterator[dict[str, list[Any]]]:
    """Yield each batch as plain Python lists per column (timestamps as int ns); `tally` as for `iter_batches`."""
    for batch in iter_batches(path, columns, tally=tally):
        try:
            values = {name: column_values(batch.column(name)) for name in columns}
        except UnicodeDecodeError as exc:
            raise not_utf8(path, exc) from None
        yield values


def column_values(column: pa.Array) -> list[Any]:
    """The values of one column as Python objects, timestamps as int64 nanoseconds."""
    if pa.types.is_timestamp(column.type):
        # Python datetimes would drop nanoseconds; the int64 view keeps them and is faster.
        return column.view(pa.int64()).to_pylist()  # type: ignore[no-any-return]
    return column.to_pylist()  # type: ignore[no-any-return]
