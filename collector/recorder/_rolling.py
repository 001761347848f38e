"""The buffer-and-roll file writer shared by the span and the log-record exporters.

- `add()` runs on the batch processor's worker thread: it appends one encoded Arrow record batch
  to an in-memory buffer and reports whether the row threshold is reached.
- The buffer is rolled into ONE complete Parquet file when it reaches `max_rows`, when its oldest
  batch is `flush_interval` seconds old (checked by the writer's own daemon timer thread, because
  the batch processor never calls an idle exporter), on `force_flush()` and on `shutdown()`. The
  application thread only writes when it asks for it (flush, shutdown).
- Each file is written under a hidden `.inflight-<host>-<pid>-<random>.parquet.tmp` name in the
  target folder, then renamed atomically to `<run_id>--<utc-ts>--<host>-<pid>-<seq><suffix>`, so
  `*.parquet` only ever names complete files and processes never share a file.
- A failed write (read-only folder, disk full) is logged on the `evaltrace` logger; the batches
  stay buffered for the next roll, up to `max_buffered_rows`, beyond which the oldest are dropped
  and counted. The loss counts (`dropped` upstream, `unwritten` here) go into each file's metadata.
- After `fork()` the child starts with an empty buffer, sequence, counters and timer, so nothing
  buffered by the parent is written twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltrace.collector.runfiles import layout
from evaltrace.collector.runfiles.inflight import inflight_path
from evaltrace.collector.runfiles.schema import HOST_NAME_LIMIT, run_file_name, safe_file_part

logger = logging.getLogger("evaltrace")


@dataclass(frozen=True)
class FileKind:
    """What a writer writes: how its files are named and laid out, and what their rows are called."""

    noun: str
    """What a row is, for messages ("spans", "log records")."""
    suffix: str
    """End of the final file name (`.parquet`, `.logs.parquet`)."""
    schema: Any
    """The files' layout (`layout.SCHEMA`, `logs_layout.LOGS_SCHEMA`)."""
    metadata: Callable[..., dict[str, str]]
    """The file metadata from (run id, dropped, unwritten, writer_id=...): `layout.file_metadata`."""


@dataclass
class _Buffer:
    """Encoded batches waiting for the next roll (per process)."""

    batches: list[Any]
    rows: int = 0
    oldest: float | None = None

    def take(self) -> tuple[list[Any], int]:
        batches, rows = self.batches, self.rows
        self.batches, self.rows, self.oldest = [], 0, None
        return batches, rows


class RollingWriter:
    """Buffers encoded batches and rolls them into atomically published Parquet files.

    Args:
        kind: how files are named and written.
        directory: target folder (created on the first write).
        run_id: the run label, used as the file-name prefix.
        flush_interval: seconds after which buffered rows are written.
        max_rows: buffered rows that trigger a file.
        max_buffered_rows: bound of the buffer while writes fail.
        labels: extra `evaltrace.<key>` entries of every file's metadata (who wrote it, e.g. `received_by`).
    """

    _timer: threading.Thread | None

    def __init__(
        self,
        kind: FileKind,
        directory: Path,
        run_id: str,
        *,
        flush_interval: float,
        max_rows: int,
        max_buffered_rows: int,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.labels = {f"evaltrace.{key}": value for key, value in (labels or {}).items()}
        self.directory = directory
        self.run_id = run_id
        self.flush_interval = flush_interval
        self.max_rows = max_rows
        self.max_buffered_rows = max_buffered_rows
        self._host = safe_file_part(socket.gethostname(), HOST_NAME_LIMIT)
        self._run_name = safe_file_part(run_id)
        self.closed = False
        self.reset_process_state()
        _register_fork_reset(self)

    @property
    def unwritten(self) -> int:
        """Rows this process encoded but could not write and had to drop (or failed to encode)."""
        return self._unwritten

    @property
    def dropped(self) -> int:
        """Rows dropped by the batch processor's full queue before reaching the exporter."""
        return self._dropped

    @property
    def writer_id(self) -> str:
        """Random id of this writer in this process (a forked child gets a new one)."""
        return self._writer_id

    def note_dropped(self, count: int) -> None:
        """Count rows dropped upstream (the processor's full queue)."""
        self._dropped += count

    def note_unwritten(self, count: int) -> None:
        """Count rows lost before they reached the buffer (an encoding failure)."""
        self._unwritten += count

    def add(self, batch: Any) -> bool:
        """Buffer one encoded batch; True when the buffer reached `max_rows` (roll now)."""
        with self._lock:
            buf = self._buffer
            buf.batches.append(batch)
            buf.rows += batch.num_rows
            if buf.oldest is None:
                buf.oldest = time.monotonic()
            due = buf.rows >= self.max_rows
        self._ensure_timer()
        return due

    def roll(self) -> bool:
        """Write the buffer as one file; on failure keep it (bounded) for the next roll."""
        try:
            with self._write_lock:
                with self._lock:
                    batches, rows = self._buffer.take()
                if not rows:
                    return True
                if self._write(batches, rows):
                    return True
                self._requeue(batches, rows)
                return False
        except Exception:  # never let a bug here reach the app or the processor
            logger.exception("evaltrace: unexpected error while writing %s", self.kind.noun)
            return False

    def close(self) -> None:
        """Write what is buffered and stop the timer; later calls do nothing."""
        if self.closed:
            return
        self.roll()
        self.closed = True
        self._stop.set()
        if self._buffer.rows:
            logger.error(
                "evaltrace: %d %s could not be written to %s and are lost",
                self._buffer.rows,
                self.kind.noun,
                self.directory,
            )
            self._unwritten += self._buffer.rows

    def _write(self, batches: list[Any], rows: int) -> bool:
        directory = self.directory
        tmp = inflight_path(directory, self._host)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            losses = (self._dropped, self._unwritten)
            metadata = self.kind.metadata(self.run_id, *losses, writer_id=self._writer_id) | self.labels
            layout.write_parquet(batches, str(tmp), metadata, self.kind.schema)  # looked up per call: tests replace it
            self._seq += 1
            writer = f"{self._host}-{os.getpid()}"
            os.replace(tmp, directory / run_file_name(self._run_name, writer, self._seq, self.kind.suffix))
        except Exception as exc:
            logger.error(
                "evaltrace: could not write %d %s to %s: %s (will retry)", rows, self.kind.noun, directory, exc
            )
            _remove_quietly(tmp)
            return False
        return True

    def _requeue(self, batches: list[Any], rows: int) -> None:
        """Put failed batches back in front of newer ones, dropping the oldest beyond the bound."""
        with self._lock:
            buf = self._buffer
            buf.batches[:0] = batches
            buf.rows += rows
            buf.oldest = time.monotonic()  # retry after one more interval, not in a hot loop
            while buf.rows > self.max_buffered_rows and len(buf.batches) > 1:
                dropped = buf.batches.pop(0).num_rows
                buf.rows -= dropped
                self._unwritten += dropped
                logger.error("evaltrace: buffer full while writes fail; dropped %d %s", dropped, self.kind.noun)

    # -- timer and fork -------------------------------------------------------------------

    def _ensure_timer(self) -> None:
        if self._timer is not None and self._timer.is_alive():
            return
        with self._lock:
            if self._timer is not None and self._timer.is_alive():
                return
            self._timer = threading.Thread(target=self._timer_loop, name="evaltrace-roll", daemon=True)
            self._timer.start()

    def _timer_loop(self) -> None:
        interval = self.flush_interval
        tick = min(interval / 4, 1.0)
        stop = self._stop
        while not stop.wait(tick):
            oldest = self._buffer.oldest
            if oldest is not None and time.monotonic() - oldest >= interval:
                self.roll()

    def reset_process_state(self) -> None:
        """Fresh per-process state: used at construction and in a forked child."""
        self._lock = threading.RLock()
        self._write_lock = threading.RLock()
        self._buffer = _Buffer(batches=[])
        self._seq = 0
        self._unwritten = 0
        self._dropped = 0
        # Names this writer in this process: the loss counters are cumulative per writer, so
        # readers take each writer's latest count (pids are reused; run ids are shared).
        self._writer_id = secrets.token_hex(8)
        self._stop = threading.Event()
        self._timer = None


class RollingFilesMixin:
    """What the span and the log exporter share: their folder, run id, writer id, drop counts, flush, shutdown.

    A subclass sets `self._writer` (a `RollingWriter`) in its constructor.
    """

    _writer: RollingWriter

    @property
    def directory(self) -> Path:
        """Folder the files are written to."""
        return self._writer.directory

    @property
    def run_id(self) -> str:
        """Label stored in every row."""
        return self._writer.run_id

    @property
    def writer_id(self) -> str:
        """Id of this exporter in this process, stored in each file as `evaltrace.writer_id`."""
        return self._writer.writer_id

    def note_dropped(self, count: int) -> None:
        """Count rows dropped upstream (called by evaltrace's processors on queue overflow)."""
        self._writer.note_dropped(count)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write everything buffered now; False when the write failed."""
        if self._writer.closed:
            return True
        return self._writer.roll()

    def shutdown(self) -> None:
        """Write what is buffered and stop the timer; later calls do nothing."""
        self._writer.close()

    def _encode_and_buffer(self, encode: Callable[[], Any], count: int) -> bool:
        """Buffer `encode()`'s batch of `count` rows, rolling a file when due; False when closed or failed.

        A batch that fails to encode is logged and counted as unwritten: recording never raises into the app.
        """
        writer = self._writer
        if writer.closed:
            return False
        try:
            batch = encode()
        except Exception:
            logger.exception("evaltrace: could not encode %d %s; they are dropped", count, writer.kind.noun)
            writer.note_unwritten(count)
            return False
        return writer.roll() if writer.add(batch) else True


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def _register_fork_reset(writer: RollingWriter) -> None:
    """Reset the writer in a forked child; a weak reference lets the writer be collected."""
    if not hasattr(os, "register_at_fork"):
        return
    import weakref

    ref = weakref.ref(writer)

    def _after_in_child() -> None:
        target = ref()
        if target is not None:
            target.reset_process_state()

    os.register_at_fork(after_in_child=_after_in_child)
