"""`evaltrace import FILE... --out DIR`: OTLP files -> run files of evaltrace's schema, streaming."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files.framing import OtlpFormat, sniff
from evaltrace.collector.terminal import plural, printable


def import_command(
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="OTLP files: JSON lines (one ExportTraceServiceRequest or ExportLogsServiceRequest per line) or "
            "length-prefixed protobuf as the Collector's file exporter writes them, plain or gzip (told by content).",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", metavar="DIR", help="Folder the run files are written to (created if missing).")
    ],
    run_id: Annotated[
        str | None,
        typer.Option("--run-id", metavar="ID", help="Run label of the rows and the files (default: each file's name)."),
    ] = None,
) -> None:
    """Convert OTLP files into run files (spans, log records) that every command reads, a batch at a time."""
    checked = [(path, _format(path)) for path in files]  # every file is checked before anything is written
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: not a folder")
    for path, fmt in checked:
        _import_one(path, fmt, out, run_id)


def _format(path: Path) -> OtlpFormat:
    if not path.is_file():
        raise InputError(f"{path}: {'not a regular file' if path.exists() else 'no such file'}")
    fmt = sniff(path)
    if fmt is None:
        raise InputError(
            f"{path}: not an OTLP file (JSON lines, or protobuf messages each after a 4-byte big-endian length;"
            " plain or gzip); run files (Parquet) are read as they are"
        )
    return fmt


def _import_one(path: Path, fmt: OtlpFormat, out: Path, run_id: str | None) -> None:
    # Deferred: the importer loads pyarrow and the OTLP decoder.
    from evaltrace.collector.otlp.files.importer import ImportTarget, import_otlp, run_label, source_id

    target = ImportTarget(out, run_id=run_id or run_label(path), writer_id=source_id(path))
    done = import_otlp(path, fmt, target)
    counts = f"{plural(done.spans, 'span')}, {plural(done.log_records, 'log record')}"
    typer.echo(printable(f"{path} ({fmt}): {counts} -> {plural(len(done.files), 'file')} in {out}"))
