"""The traces cache: each set of span files rebuilt once, its traces table reused while nothing changed.

`cached_traces(files)` yields what `read_traces(files)` yields. The first time, it rebuilds the
traces and writes their traces table (`table.py`) as it goes; afterwards it reads that table back,
which skips reading spans and rebuilding traces altogether.

Key and place: the cache's (`collector/cachedir.py`): a table is `traces/<key>.parquet` under
the cache root, its key (`cachedir.entry_key`) made of the input files' identities in order,
`CONVERTER_VERSION` (`version.py`) and the table version, and a digest of the evaltrace version,
the converter's and reader's sources (an edited checkout rebuilds without anyone bumping a
version), `histories` and the shard, for a sharded run's workers (each caches its own shard, so a
re-scoring with the same number of workers is warm too). Touching or replacing any input file
makes a new key; the old table is left for `evaltrace clean --cache` or the cache's pruning. A
root that is not private is neither read nor written.

Safety. A table is written under a hidden temporary name and renamed into place once complete
(`Namespace.publish`), so a reader never sees half a file and two scorings of the same files may
both build: each rename is atomic and either table is right. A table is read only if its Parquet footer
parses, its version and key match and its schema is the traces table's; pages are written with CRC
checksums and verified on reading. Anything wrong with a table, even midway through reading it,
makes the cache rebuild: the traces already yielded are skipped in the rebuild, which yields the
same traces in the same order. A cache that cannot be written (a read-only home, a full disk, a
value the table cannot hold) is logged and scoring goes on without it. The cache never fails a run.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Final

import pyarrow as pa
import pyarrow.parquet as pq

from evaltrace.collector.cachedir import Namespace, cache_root, entry_key, source_digest, touch
from evaltrace.collector.runfiles.layout import writer_version
from evaltrace.collector.runfiles.shard import Shard
from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._cache_write import KEY_METADATA, TableWriter, written, written_batches
from evaltrace.collector.traces.records import Trace
from evaltrace.collector.traces.table import METADATA_VERSION_KEY, SCHEMA, TABLE_VERSION
from evaltrace.collector.traces.table import iter_table_traces as iter_table_traces
from evaltrace.collector.traces.version import CONVERTER_VERSION

logger = logging.getLogger("evaltrace")

TRACES: Final = "traces"
"""The cache's namespace of traces tables."""
ROWS_PER_GROUP: Final = 512
"""Rows per Parquet row group written: what the writer holds in memory."""
ROWS_PER_READ: Final = 1024
"""Rows per record batch read back: what the reader holds in memory (with their traces)."""


def read_traces(files: Sequence[Path], shard: Shard | None = None, *, histories: bool = True) -> Iterator[Trace]:
    """The converter's `read_traces`, imported when traces are rebuilt: a warm scoring never imports the converter."""
    from evaltrace.collector.traces.rebuild import read_traces as rebuild

    return rebuild(files, shard, histories=histories)


def traces_folder() -> Path:
    """Where the traces tables are: `traces/` under the cache root."""
    return cache_root() / TRACES


def cached_traces(
    files: Sequence[Path],
    *,
    histories: bool = True,
    shard: Shard | None = None,
    root: Path | None = None,
) -> Iterator[Trace]:
    """The traces of `files`, as `read_traces(files, shard, histories=histories)` yields them, through the cache.

    Args:
        files: the span files (as `resolve_paths` returns them; their order is part of the key).
        histories: fill in the iterations' prompts (see `convert_trace`); part of the key.
        shard: only this shard's traces; part of the key.
        root: the cache root; `cachedir.cache_root()` when `None`.

    Raises:
        InputError: as `read_traces` does, when the traces have to be rebuilt.
    """
    key = cache_key(files, histories=histories, shard=shard)
    space = Namespace.open(TRACES, root)
    if key is None or space is None:  # a file is gone (the reader reports it properly), or the cache is not private
        yield from read_traces(files, shard, histories=histories)
        return
    table = space.entry(key, ".parquet")
    done = 0
    if table.exists():
        reader = iter_table_traces(_batches(table, key))
        while True:
            try:
                trace = next(reader)
            except StopIteration:
                return
            except Exception as exc:  # any fault in our own table: rebuilding is always right
                _discard(space, table, exc)
                break
            yield trace
            done += 1
    yield from _build(files, shard, histories, space, table, skip=done)


def traces_of(
    files: Sequence[Path],
    shard: Shard | None = None,
    *,
    histories: bool = True,
    cache: bool = True,
) -> Iterator[Trace]:
    """The traces of `files` through the cache (`cached_traces`), or rebuilt every time without `cache`."""
    if cache:
        return cached_traces(files, histories=histories, shard=shard)
    return read_traces(files, shard, histories=histories)


def cache_rebuilt(
    files: Sequence[Path],
    traces: Iterable[Trace],
    *,
    histories: bool = True,
    shard: Shard | None = None,
) -> Iterator[Trace]:
    """`traces` (rebuilt from `files` elsewhere: the rows of a shuffle), their table written to the cache on the way.

    The table is the one `cached_traces(files, histories=histories, shard=shard)` would build and
    later reads: the same key, published once every trace went through, never half.
    """
    key = cache_key(files, histories=histories, shard=shard)
    space = Namespace.open(TRACES)
    writer = None
    if key is not None and space is not None and not (table := space.entry(key, ".parquet")).exists():
        writer = TableWriter.start(space, table, ROWS_PER_GROUP)
    yield from written(traces, writer, lambda: cache_key(files, histories=histories, shard=shard) == key)


def built_batches(
    files: Sequence[Path],
    *,
    histories: bool,
    shard: Shard | None,
    spans: Iterable[list[Span]] | None = None,
    cache: bool = True,
) -> Iterator[pa.RecordBatch]:
    """The traces table of `files` built from their spans, written to the cache as it goes; its batches as written.

    The table `cached_traces(files, histories=histories, shard=shard)` would build and later reads
    (the same key, published once complete, never half), built by `rebuild.table_batches_of`.
    A table the cache cannot hold, or one built without `cache`, is still built: its batches go on.
    `spans`: the spans of each trace of `shard` of `files`, read elsewhere (a Ray Data group's);
    read from `files` when `None`.

    Raises:
        as `rebuild.table_batches_of`.
    """
    from evaltrace.collector.runfiles.reader import iter_traces
    from evaltrace.collector.traces.rebuild import table_batches_of

    key = cache_key(files, histories=histories, shard=shard) if cache else None
    space = Namespace.open(TRACES) if key is not None else None
    writer = None
    if key is not None and space is not None and not (table := space.entry(key, ".parquet")).exists():
        writer = TableWriter.start(space, table, ROWS_PER_GROUP)
    groups = iter_traces(files, shard) if spans is None else spans
    batches = table_batches_of(groups, histories=histories, rows=ROWS_PER_GROUP)
    yield from written_batches(batches, writer, lambda: cache_key(files, histories=histories, shard=shard) == key)


def is_cached(files: Sequence[Path], *, histories: bool, shard: Shard | None) -> bool:
    """Whether the cache folder holds a traces table for `files` (its soundness is checked on reading)."""
    key, space = cache_key(files, histories=histories, shard=shard), Namespace.open(TRACES)
    return key is not None and space is not None and space.entry(key, ".parquet").exists()


def cache_key(files: Sequence[Path], *, histories: bool, shard: Shard | None) -> str | None:
    """The key of the traces table of `files` (see the module docstring); `None` if a file cannot be read."""
    digest = {
        "evaltrace": writer_version(),
        "source": source_digest("traces", "runfiles"),
        "histories": histories,
        "shard": None if shard is None else [shard.index, shard.count],
    }
    try:
        return entry_key(version=[CONVERTER_VERSION, TABLE_VERSION], digest=digest, files=files)
    except OSError:
        return None


def table_batches(files: Sequence[Path], *, histories: bool, shard: Shard | None) -> Iterator[pa.RecordBatch] | None:
    """The cached traces table of `files` as record batches, or `None` when the cache holds none.

    For the engine's warm path, which reads the columns without decoding traces. The table is
    checked as it is opened (on the first `next`); a fault there or midway raises, and the caller
    then scores through `cached_traces`, which discards the table and rebuilds.
    """
    key, space = cache_key(files, histories=histories, shard=shard), Namespace.open(TRACES)
    if key is None or space is None or not (path := space.entry(key, ".parquet")).exists():
        return None
    return _batches(path, key)


def _batches(path: Path, key: str) -> Iterator[pa.RecordBatch]:
    """The table at `path` batch by batch; raises if it is not a sound table for `key`."""
    with path.open("rb") as handle:  # opened once: a table renamed over this one meanwhile does not disturb us
        parquet = pq.ParquetFile(handle, page_checksum_verification=True)
        _check(parquet.schema_arrow, key)
        touch(path)
        # One thread: the table is decoded a batch at a time anyway, and Arrow's reader threads left
        # ~20 MB resident on a 10,000-trace table for no less CPU (benchmarks/RESULTS.md, warm path).
        yield from parquet.iter_batches(batch_size=ROWS_PER_READ, use_threads=False)


def _check(schema: pa.Schema, key: str) -> None:
    metadata = schema.metadata or {}
    if metadata.get(METADATA_VERSION_KEY) != TABLE_VERSION.encode():
        raise ValueError(f"traces table version {metadata.get(METADATA_VERSION_KEY)!r}, expected {TABLE_VERSION}")
    if metadata.get(KEY_METADATA) != key.encode():
        raise ValueError("the table was written for other files")
    if not schema.remove_metadata().equals(SCHEMA.remove_metadata()):
        raise ValueError("the table's columns are not the traces table's")


def _discard(space: Namespace, path: Path, exc: BaseException) -> None:
    logger.info("traces cache %s is unusable (%s: %s); rebuilding the traces", path, type(exc).__name__, exc)
    space.discard(path)


def _build(
    files: Sequence[Path],
    shard: Shard | None,
    histories: bool,
    space: Namespace,
    table: Path,
    *,
    skip: int,
) -> Iterator[Trace]:
    """Rebuild the traces, writing their table to `table` on the way; yield all but the first `skip`."""
    traces = read_traces(files, shard, histories=histories)
    writer = TableWriter.start(space, table, ROWS_PER_GROUP)
    unchanged = functools.partial(_same_key, files, histories, shard, table.stem)
    yield from written(traces, writer, unchanged, skip=skip)


def _same_key(files: Sequence[Path], histories: bool, shard: Shard | None, key: str) -> bool:
    """Whether `files` still have `key` (none was touched while their traces were rebuilt)."""
    return cache_key(files, histories=histories, shard=shard) == key
