"""Run files written batch by batch: what an importer uses to write a stream of any length.

The in-process exporters buffer a file's batches and write it at once (`recorder/_rolling.py`);
an import of a large file cannot hold a file's worth of spans, so `FileSink` writes each encoded
batch to an open Parquet writer as its own row group and starts a new file every `max_rows`
rows. Files are written under a hidden in-flight name in the target folder and renamed into
place when complete, so `*.parquet` only ever names complete files, as for the exporters; the
compression and settings are the exporters' (`layout.py`). `abandon()` removes every file the
sink wrote, so a failed import leaves nothing behind to be read twice after a retry.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from evaltrace.collector.runfiles.inflight import inflight_path
from evaltrace.collector.runfiles.layout import PARQUET_OPTIONS
from evaltrace.collector.runfiles.schema import DEFAULT_MAX_ROWS, HOST_NAME_LIMIT, run_file_name, safe_file_part

Metadata = Callable[[], dict[str, str]]


class FileSink:
    """Writes encoded record batches of one layout into complete run files in `folder`.

    Args:
        folder: where the files go (created on the first batch).
        schema: the layout (`layout.SCHEMA` or `logs_layout.LOGS_SCHEMA`).
        metadata: the key-value metadata of each file, asked for when the file is started.
        name: the start of each file name (`<name>-<seq><suffix>` after the run id and time).
        run_id: the run label, the file name's prefix.
        suffix: the end of each file name (`.parquet`, `.logs.parquet`).
        max_rows: rows after which a new file is started.
    """

    def __init__(
        self,
        folder: Path,
        schema: pa.Schema,
        metadata: Metadata,
        *,
        name: str,
        run_id: str,
        suffix: str,
        max_rows: int = DEFAULT_MAX_ROWS,
    ) -> None:
        self.folder, self.schema, self.metadata = folder, schema, metadata
        self.name, self.suffix, self.max_rows = safe_file_part(name), suffix, max_rows
        self.run_name = safe_file_part(run_id)
        self.written: list[Path] = []
        self._writer: pq.ParquetWriter | None = None
        self._temp: Path | None = None
        self._rows = 0

    def add(self, batch: Any) -> None:
        """Write one encoded batch (a row group); the file is completed once it holds `max_rows` rows."""
        if self._writer is None:
            self._start()
        assert self._writer is not None
        self._writer.write_batch(batch)
        self._rows += int(batch.num_rows)
        if self._rows >= self.max_rows:
            self._publish()

    def close(self) -> list[Path]:
        """Complete the open file; returns every file written, in order."""
        if self._writer is not None:
            self._publish()
        return list(self.written)

    def abandon(self) -> None:
        """Stop, and remove the open temporary file and every file already completed."""
        writer, temp = self._writer, self._temp
        self._writer = self._temp = None
        if writer is not None:
            with contextlib.suppress(Exception):  # closing after a failed write: only removing the file matters
                writer.close()
        for path in [*self.written, *([temp] if temp is not None else [])]:
            path.unlink(missing_ok=True)
        self.written.clear()

    def _start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._temp = inflight_path(self.folder, safe_file_part(socket.gethostname(), HOST_NAME_LIMIT))
        schema = self.schema.with_metadata(self.metadata())
        self._writer = pq.ParquetWriter(self._temp, schema, **PARQUET_OPTIONS)
        self._rows = 0

    def _publish(self) -> None:
        writer, temp = self._writer, self._temp
        assert writer is not None and temp is not None
        writer.close()
        self._writer = self._temp = None
        final = self.folder / run_file_name(self.run_name, self.name, len(self.written) + 1, self.suffix)
        os.replace(temp, final)
        self.written.append(final)
