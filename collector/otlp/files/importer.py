"""OTLP files -> run files of the store's schema, streaming (what `evaltrace import` and PATH reading use).

A file is read request by request (`otlp_requests.py`); each request is turned into SDK spans
and log records by `otlp/` (`jsonformat.py` for OTLP/JSON, `decode.py` for protobuf), the same
objects the in-process exporters receive, and those
are encoded by the store's encoders (`batches.py`) in batches of `BATCH_ROWS` and written through
a `FileSink`. So the run files hold exactly what the in-process exporter would have written for
the same spans (nothing is redacted: the content was recorded, and chosen, by someone else), and
memory holds one request and one batch, whatever the file's size.

An item that cannot be stored (an id of the wrong length, ...) stops the import with the file
and line named: a silently shorter trace would score wrongly. Whatever was written by a failed
import is removed. The one exception is the file's last record cut short (a writer that stopped
mid-record): it is skipped with a warning naming the file, the record and what is left of it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files.framing import Frame, OtlpFormat
from evaltrace.collector.otlp.files.messages import Skipped, requests
from evaltrace.collector.runfiles import batches
from evaltrace.collector.runfiles.filesink import FileSink
from evaltrace.collector.runfiles.layout import SCHEMA, file_metadata
from evaltrace.collector.runfiles.logs_layout import LOGS_SCHEMA
from evaltrace.collector.runfiles.schema import DEFAULT_MAX_ROWS, LOGS_FILE_SUFFIX, safe_file_part

logger = logging.getLogger("evaltrace")

BATCH_ROWS: Final = 2048
"""Spans (or log records) encoded and written at once: with one request, what an import holds."""


@dataclass
class Imported:
    """What one import wrote."""

    files: list[Path] = field(default_factory=list)
    spans: int = 0
    log_records: int = 0
    skipped: Skipped = field(default_factory=Skipped)


@dataclass(frozen=True)
class ImportTarget:
    """Where and under which names an import writes."""

    folder: Path
    run_id: str
    """The run label of every row and the files' name prefix."""
    writer_id: str
    """Names this import in the files (log ids, loss counts): the same source gives the same id."""
    max_rows: int = DEFAULT_MAX_ROWS
    """Rows after which a file is completed (checked after each batch) and the next one started."""
    batch_rows: int = BATCH_ROWS


def run_label(path: Path) -> str:
    """The run label of an imported file: its name without extensions (`traces.jsonl.gz` -> `traces`)."""
    return safe_file_part(path.name.split(".", 1)[0] or path.name)


def source_id(path: Path) -> str:
    """A short id of the file as it is now (resolved path, size, mtime): the same file gives the same id."""
    stat = path.stat()
    described = f"{os.path.realpath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return hashlib.sha256(described.encode()).hexdigest()[:16]


def import_otlp(source: Path, fmt: OtlpFormat, target: ImportTarget) -> Imported:
    """Convert the OTLP file `source` into run files in `target.folder`, streaming.

    Raises:
        InputError: the file or one of its lines or messages is unreadable or not OTLP, naming the
            file and the line or message; nothing written by this import is left behind.
    """
    spans, logs = _sinks(source, target)
    done = Imported()
    try:
        _copy(source, fmt, target, (spans, logs), done)
        done.files = [*spans.close(), *logs.close()]
    except OSError as exc:  # reading errors are InputErrors already: this is the writing side
        spans.abandon()
        logs.abandon()
        raise InputError(f"{target.folder}: cannot write the run files of {source}: {exc.strerror or exc}") from None
    except BaseException:
        spans.abandon()
        logs.abandon()
        raise
    _warn_skipped(source, fmt, done.skipped)
    return done


def _sinks(source: Path, target: ImportTarget) -> tuple[FileSink, FileSink]:
    extra = {"writer_id": target.writer_id, "imported_from": source.name}
    spans = FileSink(
        target.folder,
        SCHEMA,
        lambda: file_metadata(target.run_id, 0, 0, logs=False, **extra),
        name=f"import-{target.writer_id}",
        run_id=target.run_id,
        suffix=".parquet",
        max_rows=target.max_rows,
    )
    logs = FileSink(
        target.folder,
        LOGS_SCHEMA,
        lambda: file_metadata(target.run_id, 0, 0, logs=True, **extra),
        name=f"import-{target.writer_id}",
        run_id=target.run_id,
        suffix=LOGS_FILE_SUFFIX,
        max_rows=target.max_rows,
    )
    return spans, logs


class _Pending:
    """Decoded items waiting to be encoded as one batch."""

    def __init__(self, sink: FileSink, encode: Callable[[list[Any]], Any], size: int) -> None:
        self.sink, self.encode, self.size = sink, encode, size
        self.items: list[Any] = []

    def extend(self, items: Sequence[Any]) -> None:
        self.items.extend(items)
        while len(self.items) >= self.size:
            self.flush(self.size)

    def flush(self, count: int | None = None) -> None:
        count = len(self.items) if count is None else count
        if count:
            taken, self.items = self.items[:count], self.items[count:]
            self.sink.add(self.encode(taken))


def _copy(
    source: Path, fmt: OtlpFormat, target: ImportTarget, sinks: tuple[FileSink, FileSink], done: Imported
) -> None:
    log_encoder = batches.LogEncoder(target.run_id, None)
    spans = _Pending(sinks[0], lambda items: batches.encode_spans(items, target.run_id), target.batch_rows)
    logs = _Pending(sinks[1], lambda items: log_encoder.encode(items, target.writer_id), target.batch_rows)
    for _, found in requests(source, fmt, done.skipped):
        if found.spans:
            spans.extend(found.items)
            done.spans += len(found.items)
        else:
            logs.extend(found.items)
            done.log_records += len(found.items)
    if done.skipped.cut and not done.skipped.read:
        raise InputError(
            f"{source}: an {fmt} file whose first record is cut short: {done.skipped.cut}; nothing to read"
        )
    spans.flush()
    logs.flush()


def _warn_skipped(source: Path, fmt: OtlpFormat, skipped: Skipped) -> None:
    if skipped.cut:
        logger.warning("%s", cut_warning(source, skipped))
    if skipped.metrics:
        where = ", ".join(Frame(n, b"").where(fmt) for n in skipped.lines) + (", ..." if skipped.metrics > 3 else "")
        logger.warning(
            "evaltrace: %s: %d metrics or profiles request(s) skipped (%s): evaltrace reads spans and log records",
            source,
            skipped.metrics,
            where,
        )


def cut_warning(source: Path, skipped: Skipped) -> str:
    """The warning for a file whose last record was cut short (`skipped.cut`), what was lost."""
    return (
        f"evaltrace: {source}: the last record, {skipped.cut}, is cut short (a writer stopped mid-record?): "
        f"skipped, the spans or log records it held are lost; the {skipped.read} before it were read"
    )
