"""What a set of run files holds, for `evaltrace runs`: counts, services, run ids, time range.

Reads only the small columns (ids, names, status, times, service, run id), never the payload
columns, and groups through the same streaming, deduplicating pass as `reader.iter_traces`.
Log-record files are counted in that pass too: records per event name, and those that the
reader cannot attach to a span (their span is not in the files, or they have no trace id).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from evaltrace.collector.runfiles import runfiles
from evaltrace.collector.runfiles._grouping import Batch, stream_groups
from evaltrace.collector.runfiles.inflight import find_stale_inflight
from evaltrace.collector.runfiles.schema import SIGNAL_LOGS

# (trace_id, span_id, parent_span_id, name, status_code, start ns, end ns, service, run_id)
_Row = tuple[str, str, str | None, str, str, int, int, str | None, str | None]
_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "status_code",
    "start_time",
    "end_time",
    "service_name",
    "run_id",
)


class TraceSummary(BaseModel):
    """One trace of a run, as listed by `evaltrace runs --traces`."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    spans: int
    """Distinct spans (duplicates across files counted once)."""
    root: str | None
    """Name of the earliest span without a recorded parent, or None when every parent is missing."""
    errors: int
    """Spans whose status is ERROR."""
    service_name: str | None
    run_id: str | None
    start_time: datetime
    end_time: datetime
    start_time_ns: int = 0
    """`start_time` to the nanosecond as recorded (epoch ns); a datetime holds microseconds."""
    end_time_ns: int = 0
    """`end_time` to the nanosecond as recorded (epoch ns)."""
    log_records: int = 0
    """Log records (GenAI events) recorded for this trace's spans."""


class SpansPerTrace(BaseModel):
    """Distribution of span counts over traces."""

    model_config = ConfigDict(frozen=True)

    min: int
    median: float
    max: int


class RunsSummary(BaseModel):
    """What the files hold, in total."""

    model_config = ConfigDict(frozen=True)

    files: list[str]
    spans: int
    """Distinct spans."""
    duplicate_spans: int
    """Rows ignored because the same (trace_id, span_id) was already read."""
    traces: int
    error_spans: int
    spans_per_trace: SpansPerTrace | None
    services: dict[str, int]
    """Spans per service name."""
    run_ids: dict[str, int]
    """Spans per run id."""
    start_time: datetime | None
    end_time: datetime | None
    start_time_ns: int | None = None
    """`start_time` to the nanosecond as recorded (epoch ns)."""
    end_time_ns: int | None = None
    """`end_time` to the nanosecond as recorded (epoch ns)."""
    dropped_spans: int
    """Spans the recording processes' batch processors dropped on a full queue (never recorded)."""
    unwritten_spans: int
    """Spans the recording processes could not write (failed writes beyond the buffer bound)."""
    stale_inflight: list[str]
    """Temporary files left by writers that died (`evaltrace clean` removes them)."""
    trace_list: list[TraceSummary]
    log_files: int = 0
    """Files of log records (`*.logs.parquet`) among `files`."""
    log_records: int = 0
    """Distinct log records (GenAI events and other logs), with or without a trace."""
    log_events: dict[str, int] = {}
    """Log records per event name (`(none)` for plain log lines)."""
    unattached_log_records: int = 0
    """Records naming a span that is not in the files: they are in no rebuilt trace."""
    log_records_without_trace: int = 0
    """Records emitted outside any span (no trace id): they belong to no trace."""
    dropped_log_records: int = 0
    """Log records the recording processes' batch processors dropped on a full queue."""
    unwritten_log_records: int = 0
    """Log records the recording processes could not write."""


class _LogEntry(NamedTuple):
    """The small columns of one log record, as the summary pass groups them."""

    trace_id: str
    span_id: str | None
    event_name: str | None


class _LogCounts:
    """Log records seen in the summary pass."""

    def __init__(self) -> None:
        self.events: Counter[str] = Counter()
        self.unattached = 0
        self.seen_without_trace: set[str] = set()


def _time(ns: int) -> datetime:
    # Integer arithmetic, as the converter's `ns_to_datetime`: a float of epoch seconds has ~0.2 us
    # resolution today, so `ns / 1e9` could move a time to the neighbouring microsecond.
    return _EPOCH + timedelta(microseconds=ns // 1000)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _read_rows(path: Path, counter: list[int], tally: runfiles.LossTally) -> Iterator[Batch[_Row]]:
    for columns in runfiles.read_columns(path, _COLUMNS, tally):
        rows: list[_Row] = list(zip(*(columns[c] for c in _COLUMNS), strict=True))
        counter[0] += len(rows)
        yield columns["trace_id"], columns["span_id"], rows


_LOG_COLUMNS = ("trace_id", "span_id", "event_name", "log_id")


def _read_logs(path: Path, counts: _LogCounts, tally: runfiles.LossTally) -> Iterator[Batch[_LogEntry]]:
    for columns in runfiles.read_columns(path, _LOG_COLUMNS, tally):
        entries, trace_ids, keys = [], [], []
        for trace_id, span_id, name, log_id in zip(*(columns[c] for c in _LOG_COLUMNS), strict=True):
            if trace_id is None:  # in no trace: counted here, once per record
                if log_id not in counts.seen_without_trace:
                    counts.seen_without_trace.add(log_id)
                    counts.events[name or "(none)"] += 1
                continue
            entries.append(_LogEntry(trace_id, span_id, name))
            trace_ids.append(trace_id)
            keys.append("log:" + log_id)
        yield trace_ids, keys, entries


def _split(group: list[Any], counts: _LogCounts) -> tuple[list[_Row], int]:
    """The span rows of a group, and how many of its log records name one of its spans."""
    rows = [r for r in group if not isinstance(r, _LogEntry)]
    if len(rows) == len(group):
        return rows, 0
    ids = {r[1] for r in rows}
    attached = 0
    for entry in group:
        if isinstance(entry, _LogEntry):
            counts.events[entry.event_name or "(none)"] += 1
            if entry.span_id in ids:
                attached += 1
            else:
                counts.unattached += 1
    return rows, attached


def _summarize_trace(rows: list[_Row]) -> TraceSummary:
    ids = {r[1] for r in rows}
    roots = sorted((r[5], r[1], r[3]) for r in rows if r[2] is None or r[2] not in ids)
    first = min(rows, key=lambda r: (r[5], r[1]))
    end = max(r[6] for r in rows)
    return TraceSummary(
        trace_id=rows[0][0],
        spans=len(rows),
        root=roots[0][2] if roots else None,
        errors=sum(1 for r in rows if r[4] == "ERROR"),
        service_name=first[7],
        run_id=first[8],
        start_time=_time(first[5]),
        end_time=_time(end),
        start_time_ns=first[5],
        end_time_ns=end,
    )


def summarize_runs(files: Sequence[Path]) -> RunsSummary:
    """Count what span files hold, reading only their small columns (no payloads).

    Args:
        files: the run files, as `resolve_paths` returns them.

    Returns:
        Totals, per-service and per-run-id span counts, the time range, one `TraceSummary` per
        trace and the stale in-flight files found next to the files.

    Raises:
        InputError: a file is unreadable or not an evaltrace span file.
    """
    read_rows = [0]
    traces: list[TraceSummary] = []
    services: Counter[str] = Counter()
    run_ids: Counter[str] = Counter()
    tally = runfiles.LossTally()
    log_tally = runfiles.LossTally(SIGNAL_LOGS)
    log_files = {p for p in files if runfiles.file_signal(p) == SIGNAL_LOGS}
    counts = _LogCounts()

    def read(path: Path) -> Iterator[Batch[Any]]:
        if path in log_files:
            return _read_logs(path, counts, log_tally)
        return _read_rows(path, read_rows, tally)

    for group in stream_groups(files, read):
        rows, attached = _split(group, counts)
        if not rows:
            continue
        summary = _summarize_trace(rows)
        traces.append(summary.model_copy(update={"log_records": attached}) if attached else summary)
        services.update(r[7] or "(none)" for r in rows)
        run_ids.update(r[8] or "(none)" for r in rows)
    totals = _totals(files, traces, read_rows[0], services, run_ids, tally.total())
    log_losses = log_tally.total()
    return totals.model_copy(
        update={
            "log_files": len(log_files),
            "log_records": sum(counts.events.values()),
            "log_events": dict(counts.events.most_common()),
            "unattached_log_records": counts.unattached,
            "log_records_without_trace": len(counts.seen_without_trace),
            "dropped_log_records": log_losses.dropped,
            "unwritten_log_records": log_losses.unwritten,
        }
    )


def _totals(
    files: Sequence[Path],
    traces: list[TraceSummary],
    rows: int,
    services: Counter[str],
    run_ids: Counter[str],
    losses: runfiles.RecordingLosses,
) -> RunsSummary:
    counts = [t.spans for t in traces]
    spans = sum(counts)
    per_trace = SpansPerTrace(min=min(counts), median=statistics.median(counts), max=max(counts)) if counts else None
    folders = dict.fromkeys(p.parent for p in files)
    return RunsSummary(
        files=[str(p) for p in files],
        spans=spans,
        duplicate_spans=rows - spans,
        traces=len(traces),
        error_spans=sum(t.errors for t in traces),
        spans_per_trace=per_trace,
        services=dict(services.most_common()),
        run_ids=dict(run_ids.most_common()),
        start_time=min((t.start_time for t in traces), default=None),
        end_time=max((t.end_time for t in traces), default=None),
        start_time_ns=min((t.start_time_ns for t in traces), default=None),
        end_time_ns=max((t.end_time_ns for t in traces), default=None),
        dropped_spans=losses.dropped,
        unwritten_spans=losses.unwritten,
        stale_inflight=[str(p) for folder in folders for p in find_stale_inflight(folder)],
        trace_list=traces,
    )
