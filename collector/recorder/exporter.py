"""`ParquetSpanExporter`: the OTel span exporter that records spans to local Parquet files.

`export()` runs on the BatchSpanProcessor's worker thread and encodes the batch straight to Arrow
columns; buffering, rolling, atomic renames, loss counts and fork safety are `_rolling.py`'s.
`ExporterSettings` is shared with the log-record exporter (`log_exporter.py`).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from pydantic import BaseModel, ConfigDict, Field

from evaltrace.collector.recorder._rolling import FileKind, RollingFilesMixin, RollingWriter
from evaltrace.collector.recorder.redact import RedactionSettings, Redactor, build_redactor
from evaltrace.collector.runfiles import batches, layout
from evaltrace.collector.runfiles.schema import DEFAULT_MAX_ROWS

logger = logging.getLogger("evaltrace")
_N = TypeVar("_N", int, float)

__all__ = ["ExporterSettings", "ParquetSpanExporter"]


def default_run_id() -> str:
    """A run id unique to this process: UTC timestamp plus random hex."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


_latest_span_run_id: str | None = None


def latest_span_run_id() -> str | None:
    """The run id of the span exporter built last in this process (the log exporter shares it)."""
    return _latest_span_run_id


# The recorder reads its variables here, not through collector/settings.py: it runs in the application's
# process (often via the OTel configurator), where a bad value must be logged and the default used, never
# raised (recording must not crash the application), and where pydantic-settings would add to its import time.
def _env_number(name: str, default: _N) -> _N:
    """The variable `name` as a number of `default`'s type (int or float), else `default` (a bad value logged)."""
    raw = os.environ.get(name, "").strip()
    try:
        return type(default)(raw) if raw else default
    except ValueError:
        kind = "an integer" if isinstance(default, int) else "a number"
        logger.error("evaltrace: %s=%r is not %s; using %s", name, raw, kind, default)
        return default


def runs_directory() -> Path:
    """The folder runs are written to: `EVALTRACE_DIR`, else `runs` (relative to the working directory)."""
    return Path(os.environ.get("EVALTRACE_DIR") or "runs")


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
    file_labels: dict[str, str] = Field(default_factory=dict)
    """Extra `evaltrace.<key>` entries of every file's metadata (`evaltrace collect` sets `received_by`)."""

    @classmethod
    def from_env(cls, **overrides: Any) -> ExporterSettings:
        """Settings from `EVALTRACE_*` variables; keyword arguments that are not None win."""
        values: dict[str, Any] = {
            "directory": runs_directory(),
            "flush_interval": _env_number("EVALTRACE_FLUSH_INTERVAL", 10.0),
            "max_rows": _env_number("EVALTRACE_MAX_ROWS", DEFAULT_MAX_ROWS),
            "redaction": RedactionSettings.from_env(),
        }
        if os.environ.get("EVALTRACE_RUN_ID"):
            values["run_id"] = os.environ["EVALTRACE_RUN_ID"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        if values["flush_interval"] <= 0 or values["max_rows"] <= 0:
            logger.error("evaltrace: EVALTRACE_FLUSH_INTERVAL and EVALTRACE_MAX_ROWS must be > 0; using defaults")
            values["flush_interval"], values["max_rows"] = 10.0, DEFAULT_MAX_ROWS
        return cls(**values)

    @classmethod
    def from_arguments(
        cls,
        directory: str | os.PathLike[str] | None,
        run_id: str | None,
        flush_interval: float | None,
        max_rows: int | None,
        redaction: RedactionSettings | None,
    ) -> ExporterSettings:
        """An exporter's settings from its keyword arguments, the environment filling the ones left out."""
        return cls.from_env(
            directory=Path(directory) if directory is not None else None,
            run_id=run_id,
            flush_interval=flush_interval,
            max_rows=max_rows,
            redaction=redaction,
        )

    def rolling_writer(self, kind: FileKind) -> RollingWriter:
        """A writer of `kind` files with these settings (folder, run id, roll thresholds)."""
        return RollingWriter(
            kind,
            self.directory,
            self.run_id,
            flush_interval=self.flush_interval,
            max_rows=self.max_rows,
            max_buffered_rows=self.max_buffered_rows,
            labels=self.file_labels,
        )


class RecordingExporter(RollingFilesMixin):
    """What the span and the log exporter build: settings, a redactor, a rolling writer of `files`.

    The settings come from the arguments, the environment filling the ones left out (`default_run_id`
    the run id).
    """

    files: ClassVar[FileKind]

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
            run_id = run_id if run_id is not None else self.default_run_id()
            settings = ExporterSettings.from_arguments(directory, run_id, flush_interval, max_rows, redaction)
        self.settings = settings
        self._redactor: Redactor | None = build_redactor(settings.redaction)
        layout.writer_version()  # looked up now, not in a roll at interpreter exit
        self._writer = settings.rolling_writer(self.files)
        self.built()

    def default_run_id(self) -> str | None:
        """The run id when none is given; `None`: the environment's, else a new one."""
        return None

    def built(self) -> None:
        """Called once the exporter is set up."""


class ParquetSpanExporter(RecordingExporter, SpanExporter):
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

    files = FileKind(noun="spans", suffix=".parquet", schema=layout.SCHEMA, metadata=layout.file_metadata)

    def built(self) -> None:
        """Remember the run id, for the log exporter built next (see `latest_span_run_id`)."""
        global _latest_span_run_id
        _latest_span_run_id = self.settings.run_id

    @property
    def unwritten_spans(self) -> int:
        """Spans this process encoded but could not write and had to drop (or failed to encode)."""
        return self._writer.unwritten

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Encode a batch and buffer it; writes a file when the row threshold is reached."""
        run_id, redactor = self.settings.run_id, self._redactor
        ok = self._encode_and_buffer(lambda: batches.encode_spans(spans, run_id, redactor), len(spans))
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE
