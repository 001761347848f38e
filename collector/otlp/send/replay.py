"""`evaltrace replay`: stored spans and log records sent to an OTLP backend, original ids and all.

Span files are read trace by trace (the store's streaming reader, so memory holds a batch and
the traces still open, not the run) and sent in batches of `batch_size` spans through the SDK's
OTLP span exporter; log-record files (`*.logs.parquet`) are read batch by batch and sent through
its log exporter. Records are sent as they were recorded: they are not attached to spans as the
scoring reader attaches them. A log record found in two files (the same `log_id`) is sent once
(memory keeps the ids of the records sent, a short string each).

Without a target (`--dry-run`) the same reading happens and only the counts come back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files.inputs import RunFiles
from evaltrace.collector.otlp.send.exporters import OtlpTarget, Sender
from evaltrace.collector.otlp.send.sdk_objects import ResourceCache, hex_id, readable_span
from evaltrace.collector.otlp.wire import decode
from evaltrace.collector.runfiles.jsonvalue import loads_attributes
from evaltrace.collector.runfiles.reader import iter_traces
from evaltrace.collector.runfiles.runfiles import read_columns
from evaltrace.collector.runfiles.schema import LOG_COLUMNS

DEFAULT_BATCH = 512
"""Spans or log records per export request (the SDK batch processor's default)."""


@dataclass
class ReplayCounts:
    """What a replay read (and, unless a dry run, delivered)."""

    span_files: int = 0
    log_files: int = 0
    traces: int = 0
    spans: int = 0
    log_records: int = 0
    duplicate_log_records: int = 0
    """Copies of a record already sent (the same `log_id` in two files), left out."""


def replay(
    files: RunFiles, target: OtlpTarget | None, batch_size: int = DEFAULT_BATCH, *, logs: bool = True
) -> ReplayCounts:
    """Send the spans and log records of `files` (resolved PATHs) to `target`; count only when `target` is `None`.

    With `logs` false, log-record files are left out (for backends without an OTLP logs endpoint).

    Raises:
        InputError: a file is unreadable or not a run file, or the backend could not be reached
            or refused a batch (spans are sent before log records).
    """
    span_files, log_files = files.span_files, files.log_files if logs else []
    counts = ReplayCounts(span_files=len(span_files), log_files=len(log_files))
    spans = Sender(target, "traces") if target is not None and span_files else None
    logs_sender = Sender(target, "logs") if target is not None and log_files else None
    try:
        if logs_sender is not None:
            # A backend without a logs endpoint (Phoenix answers 405) is found before any span is
            # sent, so running again with `logs=False` sends no span twice.
            logs_sender.send_empty()
        if span_files:
            _deliver(spans, batch_size, _span_stream(span_files, counts))
        if log_files:
            _deliver(logs_sender, batch_size, _log_stream(log_files, counts))
    finally:
        for sender in (spans, logs_sender):
            if sender is not None:
                sender.close()
    return counts


def _deliver(sender: Sender | None, batch_size: int, items: Iterator[Any]) -> None:
    for batch in _batches(items, batch_size):
        if sender is not None:
            sender.send(batch)


def _batches(items: Iterator[Any], size: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _span_stream(files: Sequence[Path], counts: ReplayCounts) -> Iterator[Any]:
    resources = ResourceCache()
    for trace in iter_traces(files):
        counts.traces += 1
        counts.spans += len(trace)
        for span in trace:
            yield readable_span(span, resources)


def _log_stream(files: Sequence[Path], counts: ReplayCounts) -> Iterator[Any]:
    resources = ResourceCache()
    seen: set[str] = set()
    for path in files:
        for columns in read_columns(path, LOG_COLUMNS):
            for row in range(len(columns["log_id"])):
                log_id = columns["log_id"][row]
                if log_id in seen:
                    counts.duplicate_log_records += 1
                    continue
                seen.add(log_id)
                counts.log_records += 1
                yield _log_record(path, columns, row, resources)


def _log_record(path: Path, columns: dict[str, list[Any]], row: int, resources: ResourceCache) -> Any:
    """One stored log record as the SDK record its OTLP log exporters encode."""

    def value(name: str) -> Any:
        return columns[name][row]

    def decoded(name: str, parse: Callable[[str | None], Any]) -> Any:
        try:
            return parse(value(name))
        except (ValueError, RecursionError) as exc:
            what = f"log record {value('log_id')} (row {row})"
            raise InputError(f"{path}: {what}: malformed {name} JSON ({' '.join(str(exc).split())[:200]})") from None

    fields = decode.LogFields(
        time=value("time") or 0,
        observed_time=value("observed_time"),
        severity_number=value("severity_number") or 0,
        severity_text=value("severity_text") or "",
        body=decoded("body", _any_value),
        attributes=decoded("attributes", loads_attributes),
        event_name=value("event_name") or "",
        ids=(hex_id(value("trace_id")), hex_id(value("span_id"))),
        flags=value("trace_flags") or 0,
        dropped_attributes=value("dropped_attributes_count") or 0,
    )
    scope = decode.new_scope(value("scope_name") or "", value("scope_version") or "", "", {})
    return decode.new_log_record(fields, resources.get(decoded("resource", loads_attributes)), scope)


def _any_value(text: str | None) -> Any:
    """A body's JSON text back to its value (non-finite float markers included); `None` stays `None`."""
    if text is None:
        return None
    return loads_attributes('{"v":' + text + "}")["v"]
