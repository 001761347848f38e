"""`ParquetLogExporter`: the OTel log-record exporter that records GenAI events beside the spans.

Instrumentations such as `opentelemetry-instrumentation-openai-v2` (in its default mode) send
message content as OTel log records ("GenAI events": `gen_ai.user.message`, `gen_ai.choice`,
...), not as span attributes. This exporter writes them to `*.logs.parquet` files in the same
folder as the span files (`EVALTRACE_DIR`), with the same rules (`_rolling.py`). The span
exporter's redaction settings (`EVALTRACE_CAPTURE_CONTENT`, `EVALTRACE_REDACT_*`) apply too.

Registered in the entry-point group `opentelemetry_logs_exporter` as `evaltrace`, so
`OTEL_LOGS_EXPORTER=evaltrace` selects it (evaltrace's distro does so by default when
`OTEL_TRACES_EXPORTER` names `evaltrace`). The reader attaches each record that has a trace and
span id to its span as a span event.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult

from evaltrace.collector.recorder._rolling import FileKind
from evaltrace.collector.recorder.exporter import RecordingExporter, latest_span_run_id
from evaltrace.collector.recorder.recording import WritesOnFlush
from evaltrace.collector.runfiles import batches, logs_layout
from evaltrace.collector.runfiles.layout import file_metadata
from evaltrace.collector.runfiles.schema import LOGS_FILE_SUFFIX

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord

__all__ = ["EvaltraceLogRecordProcessor", "ParquetLogExporter"]


class ParquetLogExporter(RecordingExporter, LogRecordExporter):
    """Records OTel log records to `*.logs.parquet` files in a folder (`EVALTRACE_DIR`, default `runs`).

    Built with no arguments by OTel auto-configuration (`OTEL_LOGS_EXPORTER=evaltrace`), it reads
    the same variables as `ParquetSpanExporter`. Keyword arguments override the environment.
    Without a run id (argument or `EVALTRACE_RUN_ID`), it takes that of the span exporter built
    in this process (auto-configuration builds that one first), so a run's spans and log records
    carry one run id. The arguments are `ParquetSpanExporter`'s.
    """

    files = FileKind(
        noun="log records",
        suffix=LOGS_FILE_SUFFIX,
        schema=logs_layout.LOGS_SCHEMA,
        metadata=functools.partial(file_metadata, logs=True),
    )

    def built(self) -> None:
        """The encoder, with the run id and the redactor."""
        self._encoder = batches.LogEncoder(self.settings.run_id, self._redactor)

    def default_run_id(self) -> str | None:
        """The span exporter's, when `EVALTRACE_RUN_ID` sets none."""
        return None if os.environ.get("EVALTRACE_RUN_ID") else latest_span_run_id()

    @property
    def unwritten_records(self) -> int:
        """Records this process could not write and had to drop (or failed to encode)."""
        return self._writer.unwritten

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        """Encode a batch and buffer it; writes a file when the row threshold is reached."""
        writer_id = self._writer.writer_id
        ok = self._encode_and_buffer(lambda: self._encoder.encode(batch, writer_id), len(batch))
        return LogRecordExportResult.SUCCESS if ok else LogRecordExportResult.FAILURE


class EvaltraceLogRecordProcessor(WritesOnFlush, BatchLogRecordProcessor):
    """A `BatchLogRecordProcessor` for a `ParquetLogExporter` (see `WritesOnFlush`)."""

    exporter: ParquetLogExporter

    def __init__(self, exporter: ParquetLogExporter, *args: Any, **kwargs: Any) -> None:
        super().__init__(exporter, *args, **kwargs)
        self._watch(exporter, "log records")
