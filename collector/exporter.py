"""`ParquetSpanExporter`: the OTel span exporter that records spans to local Parquet files.

Write path (see the collector-storage research, section 4):

- `export()` runs on the BatchSpanProcessor's worker thread. It converts the batch straight to
  Arrow columns and appends the record batch to an in-memory buffer.
- The buffer is rolled into ONE complete Parquet file when it reaches `max_rows`, when its oldest
  batch is `flush_interval` seconds old (checked by the exporter's own daemon timer thread,
  because the batch processor never calls an idle exporter), on `force_flush()` and on
  `shutdown()`. The application thread only writes when it asks for it (flush, shutdown).
- Each file is written under a hidden `.inflight-<host>-<pid>-<random>.parquet.tmp` name in the
  target folder, then renamed atomically to `<run_id>--<utc-ts>--<host>-<pid>-<seq>.parquet`, so
  `*.parquet` only ever names complete files and processes never share a file.
- A failed write (read-only folder, disk full) is logged on the `evaltrace` logger; the batches
  stay buffered for the next roll, up to `max_buffered_rows`, beyond which the oldest are dropped
  and counted. Counts of spans dropped by the processor queue and spans never written so far are
  stored in each file's metadata, with an id of the writer, so `evaltrace runs` can show what a
  run lost.
- After `fork()` the child starts with an empty buffer, sequence and timer, so nothing buffered
  by the parent is written twice.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from pydantic import BaseModel, ConfigDict, Field

from evaltrace.collector import _parquet
from evaltrace.collector._inflight import inflight_path
from evaltrace.collector._redact import RedactionSettings, Redactor, build_redactor
from evaltrace.collector._schema import (
    DEFAULT_MAX_ROWS,
    HOST_NAME_LIMIT,
    safe_file_part,
)

logger = logging.getLogger("evaltrace")

__all__ = ["ExporterSettings", "ParquetSpanExporter"]


def default_run_id() -> str:
    """A run id unique to this process: UTC timestamp plus random hex."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return float(raw) if raw else default
    except ValueError:
        logger.error("evaltrace: %s=%r is not a number; using %s", name, raw, default)
        return default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        logger.error("evaltrace: %s=%r is not an integer; using %s", name, raw, default)
        return default


class ExporterSettings(BaseModel):
    """Configuration of `ParquetSpanExporter`; `from_env` gives the environment defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    directory: Path = Path("runs")
    """Folder the files are written to (created when the first file is written)."""
    run_id: str = Field(default_factory=default_run_id, min_length=1)
    """Label stored in every row's `run_id` column and used as the file-name prefix."""
    flush_interval: float = Field(default=10.0, gt=0)
    """Seconds after which buffered spans are written even if `max_rows` is not reached."""
    max_rows: int = Field(default=DEFAULT_MAX_ROWS, gt=0)
    """Buffered rows that trigger a file."""
    max_buffered_rows: int = Field(default=500_000, gt=0)
    """Bound of the buffer while writes fail; older batches beyond it are dropped and counted."""
    redaction: RedactionSettings = Field(default_factory=RedactionSettings)
    """What to remove or mask before writing."""

    @classmethod
    def from_env(cls, **overrides: Any) -> ExporterSettings:
        """Settings from `EVALTRACE_*` variables; keyword arguments that are not None win."""
        values: dict[str, Any] = {
            "directory": Path(os.environ.get("EVALTRACE_DIR") or "runs"),
            "flush_interval": _env_float("EVALTRACE_FLUSH_INTERVAL", 10.0),
            "max_rows": _env_int("EVALTRACE_MAX_ROWS", DEFAULT_MAX_ROWS),
            "redaction": RedactionSettings.from_env(),
        }
        if os.environ.get("EVALTRACE_RUN_ID"):
            values["run_id"] = os.environ["EVALTRACE_RUN_ID"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        if values["flush_interval"] <= 0 or values["max_rows"] <= 0:
            logger.error("evaltrace: EVALTRACE_FLUSH_INTERVAL and EVALTRACE_MAX_ROWS must be > 0; using defaults")
            values["flush_interval"], values["max_rows"] = 10.0, DEFAULT_MAX_ROWS
        return cls(**values)


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


class ParquetSpanExporter(SpanExporter):
    """Records spans to Parquet files in a folder (`EVALTRACE_DIR`, default `runs`).

    Built with no arguments by OTel auto-configuration (`OTEL_TRACES_EXPORTER=evaltrace`), it
    reads `EVALTRACE_DIR`, `EVALTRACE_RUN_ID`, `EVALTRACE_FLUSH_INTERVAL`, `EVALTRACE_MAX_ROWS`
    and the redaction variables. Keyword arguments override the environment.

    Args:
        directory: target folder.
        run_id: label stored with every span.
        flush_interval: seconds before buffered spans are written.
        max_rows: buffered rows that trigger a file.
        redaction: redaction settings (default: from the environment).
        settings: a complete `ExporterSettings` (the other arguments must then be omitted).
    """

    _timer: threading.Thread | None

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        run_id: str | None = None,
        flush_interval: float | None = None,
        max_rows: int | None = None,
        redaction: RedactionSettings | None = None,
        settings: ExporterSettings | None = None,
    ) -> None:
        if settings is None:
            settings = ExporterSettings.from_env(
                directory=Path(directory) if directory is not None else None,
                run_id=run_id,
                flush_interval=flush_interval,
                max_rows=max_rows,
                redaction=redaction,
            )
        self.settings = settings
        self._redactor: Redactor | None = build_redactor(settings.redaction)
        self._host = safe_file_part(socket.gethostname(), HOST_NAME_LIMIT)
        self._run_name = safe_file_part(settings.run_id)
        _parquet.writer_version()  # looked up now, not in a roll at interpreter exit
        self._shutdown = False
        self._dropped_by_queue = 0
        self._reset_process_state()
        _register_fork_reset(self)

    # -- public surface -------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        """Folder the files are written to."""
        return self.settings.directory

    @property
    def run_id(self) -> str:
        """Label stored in every row."""
        return self.settings.run_id

    @property
    def unwritten_spans(self) -> int:
        """Spans this process encoded but could not write and had to drop (or failed to encode)."""
        return self._unwritten

    @property
    def dropped_spans(self) -> int:
        """Spans dropped by the batch processor's full queue before reaching the exporter."""
        return self._dropped_by_queue

    def note_dropped(self, count: int) -> None:
        """Count spans dropped upstream (called by evaltrace's processor on queue overflow)."""
        self._dropped_by_queue += count

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Encode a batch and buffer it; writes a file when the row threshold is reached."""
        if self._shutdown:
            return SpanExportResult.FAILURE
        try:
            batch = _parquet.encode_spans(spans, self.settings.run_id, self._redactor)
        except Exception:
            logger.exception("evaltrace: could not encode %d spans; they are dropped", len(spans))
            self._unwritten += len(spans)
            return SpanExportResult.FAILURE
        with self._lock:
            buf = self._buffer
            buf.batches.append(batch)
            buf.rows += _parquet.batch_rows(batch)
            if buf.oldest is None:
                buf.oldest = time.monotonic()
            due = buf.rows >= self.settings.max_rows
        self._ensure_timer()
        if due:
            return SpanExportResult.SUCCESS if self._roll() else SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Write everything buffered now; False when the write failed."""
        if self._shutdown:
            return True
        return self._roll()

    def shutdown(self) -> None:
        """Write what is buffered and stop the timer; later calls do nothing."""
        if self._shutdown:
            return
        self._roll()
        self._shutdown = True
        self._stop.set()
        if self._buffer.rows:
            logger.error(
                "evaltrace: %d spans could not be written to %s and are lost", self._buffer.rows, self.directory
            )
            self._unwritten += self._buffer.rows

    # -- rolling --------------------------------------------------------------------------

    def _roll(self) -> bool:
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
            logger.exception("evaltrace: unexpected error while writing spans")
            return False

    def _write(self, batches: list[Any], rows: int) -> bool:
        directory = self.directory
        tmp = inflight_path(directory, self._host)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            _parquet.write_parquet(batches, str(tmp), self._metadata())
            self._seq += 1
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
            final = directory / f"{self._run_name}--{stamp}--{self._host}-{os.getpid()}-{self._seq:05d}.parquet"
            os.replace(tmp, final)
        except Exception as exc:
            logger.error("evaltrace: could not write %d spans to %s: %s (will retry)", rows, directory, exc)
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
            while buf.rows > self.settings.max_buffered_rows and len(buf.batches) > 1:
                dropped = _parquet.batch_rows(buf.batches.pop(0))
                buf.rows -= dropped
                self._unwritten += dropped
                logger.error("evaltrace: buffer full while writes fail; dropped %d spans", dropped)

    def _metadata(self) -> dict[str, str]:
        return _parquet.file_metadata(
            self.settings.run_id, self._dropped_by_queue, self._unwritten, writer_id=self._writer_id
        )

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
        interval = self.settings.flush_interval
        tick = min(interval / 4, 1.0)
        stop = self._stop
        while not stop.wait(tick):
            oldest = self._buffer.oldest
            if oldest is not None and time.monotonic() - oldest >= interval:
                self._roll()

    def _reset_process_state(self) -> None:
        """Fresh per-process state: used at construction and in a forked child."""
        self._lock = threading.RLock()
        self._write_lock = threading.RLock()
        self._buffer = _Buffer(batches=[])
        self._seq = 0
        self._unwritten = 0
        self._dropped_by_queue = 0
        # Names this exporter in this process: the loss counters below are cumulative per writer,
        # so readers take each writer's latest count (pids are reused; run ids are shared).
        self._writer_id = secrets.token_hex(8)
        self._stop = threading.Event()
        self._timer = None


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def _register_fork_reset(exporter: ParquetSpanExporter) -> None:
    """Reset the exporter in a forked child; a weak reference lets the exporter be collected."""
    if not hasattr(os, "register_at_fork"):
        return
    import weakref

    ref = weakref.ref(exporter)

    def _after_in_child() -> None:
        target = ref()
        if target is not None:
            target._reset_process_state()

    os.register_at_fork(after_in_child=_after_in_child)
