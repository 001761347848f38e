"""The writer thread: queued spans and log records -> the in-process exporters -> run files.

Using `ParquetSpanExporter` and `ParquetLogExporter` themselves (not a copy of what they do)
makes the files identical in content to an instrumented process's: same encoders, redaction
settings (`EVALTRACE_REDACT*`), roll thresholds, atomic file names and loss counters. Requests
taken together are exported as one batch per signal, so small requests still make large Arrow
batches.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from evaltrace.collector.otlp.receive.workqueue import Signal, Work, WorkQueue
from evaltrace.collector.recorder.exporter import ExporterSettings, ParquetSpanExporter
from evaltrace.collector.recorder.log_exporter import ParquetLogExporter

logger = logging.getLogger("evaltrace")

EXPORT_ITEMS = 8192
"""Items taken from the queue and encoded at once (a larger Arrow batch, fewer Python calls)."""


@dataclass
class Written:
    """What the writer handed to the exporters, and what could not be written (logged where it happened)."""

    spans: int = 0
    log_records: int = 0
    unwritten: int = 0
    """Items lost: an exporter's failed writes beyond its retry buffer, or a failure in this writer (a bug)."""


class RunWriter:
    """Takes work from `queue` on its own thread and exports it until the queue is closed and empty."""

    def __init__(self, queue: WorkQueue, settings: ExporterSettings) -> None:
        self.queue = queue
        self.settings = settings
        self.spans = ParquetSpanExporter(settings=settings)
        self.logs = ParquetLogExporter(settings=settings)
        self.written = Written()
        self._thread = threading.Thread(target=self._run, name="evaltrace-collect-writer", daemon=True)

    def start(self) -> None:
        """Start writing."""
        self._thread.start()

    def finish(self) -> Written:
        """Close the queue, write everything in it, flush and close the files (the last step of a shutdown)."""
        self.queue.close()
        self._thread.join()
        self.spans.shutdown()
        self.logs.shutdown()
        self.written.unwritten += self.spans.unwritten_spans + self.logs.unwritten_records
        return self.written

    def _run(self) -> None:
        while (works := self.queue.take(EXPORT_ITEMS)) is not None:
            try:
                self._export(works)
            except Exception:  # a bug: keep the writer alive for the rest, and say what was lost
                count = sum(len(w.items) for w in works)
                logger.exception("evaltrace collect: could not write %d received items", count)
                self.written.unwritten += count

    def _export(self, works: list[Work]) -> None:
        # A failed export result means a failed file write, whose rows the exporter keeps and
        # retries (or counts as unwritten beyond its bound): nothing to do here.
        spans: list[Any] = [item for w in works if w.signal is Signal.TRACES for item in w.items]
        records: list[Any] = [item for w in works if w.signal is Signal.LOGS for item in w.items]
        if spans:
            self.spans.export(spans)
            self.written.spans += len(spans)
        if records:
            self.logs.export(records)
            self.written.log_records += len(records)
