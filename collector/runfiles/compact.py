"""Merge a runs folder's small span files into fewer, larger ones (`evaltrace compact`).

The exporter writes a file whenever its buffer is `flush_interval` seconds old, so a process that
records for hours leaves thousands of small files: each carries a ~10 KB footer, and readers pay
per file. Compaction rewrites them as files of up to `max_rows` spans, with the same schema.

It never loses a span, even if killed at any point:

- a merged file is written under an in-flight name (`evaltrace clean` removes it if the process
  dies) and renamed into place complete, like the exporter's files;
- its row count is checked against the sources' before any source is removed;
- while both the merged file and some sources exist, readers see each span twice and keep one
  (they deduplicate on `(trace_id, span_id)`).

Only files of one run id are merged together, in name order (time order), so a run's files can
still be picked out by name. Log-record files (`*.logs.parquet`) are merged among themselves the
same way, never with span files: a merged log file is again a `*.logs.parquet` file, and records
found twice are kept once (by `log_id`). The writers' loss counts travel with the spans: a merged file keeps
each source writer's latest counts in `evaltrace.writer_losses`. One compaction per folder runs at
a time (a lock on the folder); a reader that lists a folder while it is compacted may find a
source gone and stop with an error naming it: compact between runs, not during a read.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles import layout, logs_layout
from evaltrace.collector.runfiles.inflight import inflight_path
from evaltrace.collector.runfiles.reader import folder_span_files
from evaltrace.collector.runfiles.runfiles import LossTally, open_run_file, signal_of
from evaltrace.collector.runfiles.schema import (
    DEFAULT_MAX_ROWS,
    HOST_NAME_LIMIT,
    LOGS_FILE_SUFFIX,
    SIGNAL_LOGS,
    safe_file_part,
)

__all__ = ["CompactedFile", "Compaction", "compact_folder"]


class CompactedFile(BaseModel):
    """One merged file and the files it replaced."""

    model_config = ConfigDict(frozen=True)

    path: str
    sources: list[str]
    spans: int
    """Rows in the merged file (spans found twice in the sources are kept once)."""
    bytes_before: int
    bytes_after: int


class Compaction(BaseModel):
    """What compacting one folder did (or, with `dry_run`, would do)."""

    model_config = ConfigDict(frozen=True)

    folder: str
    dry_run: bool
    files_before: int
    files_after: int
    merged: list[CompactedFile]


class _Source(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: Path
    run_id: str
    rows: int
    size: int
    signal: str


def compact_folder(
    folder: str | os.PathLike[str], *, max_rows: int = DEFAULT_MAX_ROWS, dry_run: bool = False
) -> Compaction:
    """Merge the small span files of `folder`, run id by run id, into files of up to `max_rows` spans.

    Args:
        folder: a runs folder (its `*.parquet` files; in-flight files are left alone).
        max_rows: the most spans per merged file; files already this large are left as they are.
        dry_run: only plan: report what would be merged, change nothing.

    Returns:
        What was merged into what, with sizes.

    Raises:
        InputError: the folder is missing, another compaction holds it, or a file in it is
            unreadable or not an evaltrace span file (then nothing is changed).
    """
    if max_rows < 2:
        raise InputError(f"--max-rows must be at least 2, not {max_rows}")
    base = Path(folder)
    if not base.is_dir():
        raise InputError(f"{folder}: no such folder")
    with _folder_lock(base):
        files = sorted(folder_span_files(base))
        sources = [_source(path) for path in files]  # every file is checked before any is touched
        packs = _packs(sources, max_rows)
        merged = [_plan(pack) if dry_run else _merge(base, pack) for pack in packs]
    removed = sum(len(m.sources) for m in merged)
    return Compaction(
        folder=str(base),
        dry_run=dry_run,
        files_before=len(files),
        files_after=len(files) - removed + len(merged),
        merged=merged,
    )


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    # An advisory lock on the folder itself: no lock file to leave behind, released if we die.
    if sys.platform == "win32":  # no flock, and folders cannot be opened: run one at a time by hand
        yield
        return
    import fcntl

    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"{folder}: another evaltrace compact is running on this folder") from None
        yield
    finally:
        os.close(fd)


def _source(path: Path) -> _Source:
    handle = open_run_file(path)
    try:
        meta = handle.metadata
        run_id = (meta.metadata or {}).get(b"evaltrace.run_id", b"").decode("utf-8", "replace")
        return _Source(path=path, run_id=run_id, rows=meta.num_rows, size=path.stat().st_size, signal=signal_of(handle))
    finally:
        handle.close()


def _packs(sources: Sequence[_Source], max_rows: int) -> list[list[_Source]]:
    """Groups of two or more consecutive small files of one kind and run id, each within `max_rows` rows."""
    by_run: dict[tuple[str, str], list[_Source]] = {}
    for source in sources:
        by_run.setdefault((source.signal, source.run_id), []).append(source)
    packs: list[list[_Source]] = []
    for run_files in by_run.values():
        current: list[_Source] = []
        for source in run_files:
            if source.rows >= max_rows:
                continue  # already full size
            if current and sum(s.rows for s in current) + source.rows > max_rows:
                packs.append(current)
                current = []
            current.append(source)
        packs.append(current)
    return [pack for pack in packs if len(pack) > 1]


def _plan(pack: Sequence[_Source]) -> CompactedFile:
    return _compacted(pack, pack[0].path.parent / _merged_name(pack), sum(s.rows for s in pack), 0)


def _compacted(pack: Sequence[_Source], path: Path, spans: int, bytes_after: int) -> CompactedFile:
    return CompactedFile(
        path=str(path),
        sources=[str(s.path) for s in pack],
        spans=spans,
        bytes_before=sum(s.size for s in pack),
        bytes_after=bytes_after,
    )


def _merged_name(pack: Sequence[_Source]) -> str:
    # `<run>--<first file's timestamp>--compacted-<random>`: sorts with the run's other files.
    logs = pack[0].signal == SIGNAL_LOGS
    suffix = LOGS_FILE_SUFFIX if logs else ".parquet"
    name = pack[0].path.name
    stem = name[: -len(suffix)] if name.endswith(suffix) else pack[0].path.stem
    parts = stem.split("--")
    prefix = "--".join(parts[:2]) if len(parts) >= 3 else stem
    return f"{prefix}--compacted-{secrets.token_hex(4)}{suffix}"


def _merge(folder: Path, pack: Sequence[_Source]) -> CompactedFile:
    table, tally = _read_pack(pack)
    final = folder / _merged_name(pack)
    tmp = inflight_path(folder, safe_file_part(socket.gethostname(), HOST_NAME_LIMIT))
    try:
        schema = logs_layout.LOGS_SCHEMA if pack[0].signal == SIGNAL_LOGS else layout.SCHEMA
        written = layout.write_parquet(table.to_batches(), str(tmp), _metadata(pack[0], tally), schema)
        check = open_run_file(tmp)
        try:
            rows = check.metadata.num_rows
        finally:
            check.close()
        if rows != written:
            raise InputError(f"{tmp}: wrote {rows} rows, expected {written}; nothing was removed")
        os.replace(tmp, final)
    except OSError as exc:  # a full disk, a read-only folder: the sources are all still there
        raise InputError(f"{folder}: could not write a merged file ({exc}); nothing was removed") from None
    finally:
        tmp.unlink(missing_ok=True)
    for source in pack:  # only now: until here every span is in the sources
        try:
            source.path.unlink(missing_ok=True)
        except OSError as exc:
            # Its spans are in the merged file too; readers keep one copy of each.
            raise InputError(f"{source.path}: merged into {final.name} but could not be removed ({exc})") from None
    return _compacted(pack, final, written, final.stat().st_size)


def _read_pack(pack: Sequence[_Source]) -> tuple[pa.Table, LossTally]:
    """The pack's rows in file order, each `(trace_id, span_id)` (or `log_id`) once, and its writers' losses."""
    tally = LossTally(pack[0].signal)
    tables = []
    for source in pack:
        handle = open_run_file(source.path)
        try:
            tally.add(handle)
            tables.append(handle.read(use_threads=False).replace_schema_metadata(None))
        finally:
            handle.close()
    table = pa.concat_tables(tables)
    seen: set[Any] = set()
    keep = []
    key_columns = ("log_id",) if pack[0].signal == SIGNAL_LOGS else ("trace_id", "span_id")
    for key in zip(*(table.column(c).to_pylist() for c in key_columns), strict=True):
        keep.append(key not in seen)
        seen.add(key)
    return (table if all(keep) else table.filter(pa.array(keep))), tally


def _metadata(first: _Source, tally: LossTally) -> dict[str, str]:
    total = tally.total()
    return layout.file_metadata(
        first.run_id,
        total.dropped,
        total.unwritten,
        writer_losses=json.dumps({w: list(x) for w, x in tally.by_writer().items()}, separators=(",", ":")),
        compacted_at=datetime.now(UTC).isoformat(),
        logs=first.signal == SIGNAL_LOGS,
    )
