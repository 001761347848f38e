"""The traces cache: each set of span files rebuilt once, its traces table reused while nothing changed.

`cached_traces(files)` yields what `read_traces(files)` yields. The first time, it rebuilds the
traces and writes their traces table (`table.py`) as it goes; afterwards it reads that table back,
which skips reading spans and rebuilding traces altogether.

Key. A table is named by a SHA-256 of: each input file's identity (`cachedir.file_identity`:
resolved path, inode, size, mtime and ctime), in order; `CONVERTER_VERSION`
(`version.py`), the table version, the evaltrace version and the size and mtime of the
converter's and reader's source files (an edited checkout rebuilds without anyone bumping a
version); `histories`; and the shard, for a sharded run's workers (each caches its own shard, so
a re-scoring with the same number of workers is warm too). Touching or replacing any input file
makes a new key, even a replacement with the same size, mtime and inode (its ctime differs); the
old table is left for `evaltrace clean --cache` or the size bound below.

Location. `EVALTRACE_CACHE_DIR`, else `$XDG_CACHE_HOME/evaltrace`, else `~/.cache/evaltrace`; the
tables are `traces/<key>.parquet` inside it. The folder must be private to the user
(`cachedir.private_root`): one that another user owns or others may write is neither read nor
written. Past `MAX_CACHE_BYTES` of tables, the least recently used are removed after each new one
is written.

Safety. A table is written under a hidden temporary name in the same folder and renamed into place
once complete, so a reader never sees half a file and two scorings of the same files may both
build: each rename is atomic and either table is right. A table is read only if its Parquet footer
parses, its version and key match and its schema is the traces table's; pages are written with CRC
checksums and verified on reading. Anything wrong with a table, even midway through reading it,
makes the cache rebuild: the traces already yielded are skipped in the rebuild, which yields the
same traces in the same order. A cache that cannot be written (a read-only home, a full disk, a
value the table cannot hold) is logged and scoring goes on without it. The cache never fails a run.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq

from evaltrace.collector.cachedir import CACHE_DIR_ENV as CACHE_DIR_ENV
from evaltrace.collector.cachedir import cache_root as cache_root
from evaltrace.collector.cachedir import file_identity, private_root
from evaltrace.collector.runfiles.shard import Shard
from evaltrace.collector.traces._cache_write import KEY_METADATA, TEMP_SUFFIX, BatchHook, TableWriter, written
from evaltrace.collector.traces.records import Trace
from evaltrace.collector.traces.table import METADATA_VERSION_KEY, SCHEMA, TABLE_VERSION
from evaltrace.collector.traces.table import iter_table_traces as iter_table_traces
from evaltrace.collector.traces.version import CONVERTER_VERSION

logger = logging.getLogger("evaltrace")

TRACES_FOLDER: Final = "traces"
MAX_CACHE_BYTES: Final = 4 << 30
"""Past this much of traces tables, the least recently used are removed."""
ROWS_PER_GROUP: Final = 512
"""Rows per Parquet row group written: what the writer holds in memory."""
ROWS_PER_READ: Final = 1024
"""Rows per record batch read back: what the reader holds in memory (with their traces)."""


def read_traces(files: Sequence[Path], shard: Shard | None = None, *, histories: bool = True) -> Iterator[Trace]:
    """The converter's `read_traces`, imported when traces are rebuilt: a warm scoring never imports the converter."""
    from evaltrace.collector.traces.rebuild import read_traces as rebuild

    return rebuild(files, shard, histories=histories)


def traces_folder(root: Path | None = None) -> Path:
    """Where the traces tables are: `traces/` in the cache folder."""
    return (root if root is not None else cache_root()) / TRACES_FOLDER


def cached_traces(
    files: Sequence[Path],
    *,
    histories: bool = True,
    shard: Shard | None = None,
    root: Path | None = None,
    on_batch: BatchHook | None = None,
) -> Iterator[Trace]:
    """The traces of `files`, as `read_traces(files, shard, histories=histories)` yields them, through the cache.

    Args:
        files: the span files (as `resolve_paths` returns them; their order is part of the key).
        histories: fill in the iterations' prompts (see `convert_trace`); part of the key.
        shard: only this shard's traces; part of the key.
        root: the cache folder; `cache_root()` when `None`.
        on_batch: called with each traces-table batch, read back or just written, before its
            traces are yielded (the columnar scorers read the table's columns there); not called
            when the table cannot be written.

    Raises:
        InputError: as `read_traces` does, when the traces have to be rebuilt.
    """
    key = cache_key(files, histories=histories, shard=shard)
    base = private_root(root)
    if key is None or base is None:  # a file is gone (the reader reports it properly), or the cache is not private
        yield from read_traces(files, shard, histories=histories)
        return
    table = traces_folder(base) / f"{key}.parquet"
    done = 0
    if table.exists():
        reader = _read_table(table, key, on_batch)
        while True:
            try:
                trace = next(reader)
            except StopIteration:
                return
            except Exception as exc:  # any fault in our own table: rebuilding is always right
                _discard(table, exc)
                break
            yield trace
            done += 1
    yield from _build(files, shard, histories, table, skip=done, on_batch=on_batch)


def traces_of(
    files: Sequence[Path],
    shard: Shard | None = None,
    *,
    histories: bool = True,
    cache: bool = True,
    on_batch: BatchHook | None = None,
) -> Iterator[Trace]:
    """The traces of `files` through the cache (`cached_traces`), or rebuilt every time without `cache`."""
    if cache:
        return cached_traces(files, histories=histories, shard=shard, on_batch=on_batch)
    return read_traces(files, shard, histories=histories)


def cache_rebuilt(
    files: Sequence[Path], traces: Iterable[Trace], *, histories: bool = True, shard: Shard | None = None
) -> Iterator[Trace]:
    """`traces` (rebuilt from `files` elsewhere: the rows of a shuffle), their table written to the cache on the way.

    The table is the one `cached_traces(files, histories=histories, shard=shard)` would build and
    later reads: the same key, published once every trace went through, never half.
    """
    key = cache_key(files, histories=histories, shard=shard)
    base = private_root()
    table = traces_folder(base) / f"{key}.parquet"
    fresh = key is not None and base is not None and not table.exists()
    writer = TableWriter.start(table, ROWS_PER_GROUP) if fresh else None
    if (yield from written(traces, writer, lambda: cache_key(files, histories=histories, shard=shard) == key)):
        _prune(table.parent, keep=table)


def is_cached(files: Sequence[Path], *, histories: bool, shard: Shard | None) -> bool:
    """Whether the cache folder holds a traces table for `files` (its soundness is checked on reading)."""
    key, base = cache_key(files, histories=histories, shard=shard), private_root()
    return key is not None and base is not None and (traces_folder(base) / f"{key}.parquet").exists()


def cache_key(files: Sequence[Path], *, histories: bool, shard: Shard | None) -> str | None:
    """The key of the traces table of `files` (see the module docstring); `None` if a file cannot be read."""
    try:
        identities = [file_identity(path) for path in files]
    except OSError:
        return None
    described = {
        "files": identities,
        "converter": CONVERTER_VERSION,
        "table": TABLE_VERSION,
        "evaltrace": _evaltrace_version(),
        "source": _source_fingerprint(),
        "histories": histories,
        "shard": None if shard is None else [shard.index, shard.count],
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


@functools.cache
def _evaltrace_version() -> str:
    return dist_version("evaltrace")


@functools.cache
def _source_fingerprint() -> str:
    """Size and mtime of every source file of the converter and the reader (what rebuilds depend on)."""
    collector = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted([*(collector / "convert").rglob("*.py"), *(collector / "store").rglob("*.py")]):
        stat = path.stat()
        digest.update(f"{path.relative_to(collector)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


def _read_table(path: Path, key: str, on_batch: BatchHook | None) -> Iterator[Trace]:
    """The traces in the table at `path`; raises if there is none or it is not a sound table for `key`."""
    with path.open("rb") as handle:  # opened once: a table renamed over this one meanwhile does not disturb us
        parquet = pq.ParquetFile(handle, page_checksum_verification=True)
        _check(parquet.schema_arrow, key)
        _touch(path)
        batches = parquet.iter_batches(batch_size=ROWS_PER_READ)
        yield from iter_table_traces(batches if on_batch is None else _observed(batches, on_batch))


def _observed(batches: Iterator[pa.RecordBatch], on_batch: BatchHook) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        on_batch(batch)
        yield batch


def _check(schema: pa.Schema, key: str) -> None:
    metadata = schema.metadata or {}
    if metadata.get(METADATA_VERSION_KEY) != TABLE_VERSION.encode():
        raise ValueError(f"traces table version {metadata.get(METADATA_VERSION_KEY)!r}, expected {TABLE_VERSION}")
    if metadata.get(KEY_METADATA) != key.encode():
        raise ValueError("the table was written for other files")
    if not schema.remove_metadata().equals(SCHEMA.remove_metadata()):
        raise ValueError("the table's columns are not the traces table's")


def _touch(path: Path) -> None:
    """Mark the table as just used (the size bound removes the least recently used first)."""
    try:
        os.utime(path)
    except OSError:
        pass  # a read-only cache is still usable


def _discard(path: Path, exc: BaseException) -> None:
    logger.info("traces cache %s is unusable (%s: %s); rebuilding the traces", path, type(exc).__name__, exc)
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _build(
    files: Sequence[Path], shard: Shard | None, histories: bool, table: Path, *, skip: int, on_batch: BatchHook | None
) -> Iterator[Trace]:
    """Rebuild the traces, writing their table to `table` on the way; yield all but the first `skip`.

    With `on_batch`, each batch written is handed to it before its traces are yielded (`written`).
    """
    traces = read_traces(files, shard, histories=histories)
    writer = TableWriter.start(table, ROWS_PER_GROUP)
    unchanged = functools.partial(_same_key, files, histories, shard, table.stem)
    if (yield from written(traces, writer, unchanged, skip=skip, on_batch=on_batch)):
        _prune(table.parent, keep=table)


def _same_key(files: Sequence[Path], histories: bool, shard: Shard | None, key: str) -> bool:
    """Whether `files` still have `key` (none was touched while their traces were rebuilt)."""
    return cache_key(files, histories=histories, shard=shard) == key


def _prune(folder: Path, *, keep: Path) -> None:
    """Remove the least recently used tables until the folder holds at most `MAX_CACHE_BYTES`."""
    try:
        tables = [(path.stat(), path) for path in folder.glob("*.parquet") if path != keep]
        total = sum(stat.st_size for stat, _ in tables) + keep.stat().st_size
        for stat, path in sorted(tables, key=lambda item: item[0].st_mtime_ns):
            if total <= MAX_CACHE_BYTES:
                break
            path.unlink(missing_ok=True)
            total -= stat.st_size
    except OSError as exc:  # another process pruning at the same time
        logger.info("traces cache: pruning %s: %s", folder, exc)


@dataclass(frozen=True)
class Removed:
    """What `clear_cache` removed."""

    files: int
    bytes: int


def clear_cache(root: Path | None = None) -> Removed:
    """Remove every traces table (and temporary file) from the cache; what was there is rebuilt when needed."""
    folder = traces_folder(root)
    files = removed = 0
    if not folder.is_dir():
        return Removed(0, 0)
    for path in folder.iterdir():
        if path.suffix == ".parquet" or (path.name.startswith(".") and path.name.endswith(TEMP_SUFFIX)):
            try:
                size = path.stat().st_size
                path.unlink()
            except FileNotFoundError:
                continue
            files, removed = files + 1, removed + size
    return Removed(files, removed)
