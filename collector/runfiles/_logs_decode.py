"""Decode log-record files into `LogRow`s and attach them to their spans as span events.

A GenAI event recorded as a log record (`gen_ai.user.message`, `gen_ai.choice`,
`gen_ai.client.inference.operation.details`, ...) carries the same information an instrumentation
following the older conventions puts in a span event: the event name, and the body fields (for
the message events) or attributes (for the operation-details event). `attach_logs` turns each
record that names a span in the same trace into such an event on that span, named after the
event, its attributes the record's attributes overlaid with its body fields, so the converter's
existing event handling (`genai.extract_events`, `_content_attributes`) reads them as it
reads span events. Records are appended in the order they were written, which is the order the
application emitted them (a message history stays in order).

Records whose span is not in the files read (its span file is missing, or the spans were not
recorded) cannot be attached: `LogAttachment` counts them, so they are never dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles._decode import load_objects
from evaltrace.collector.runfiles.runfiles import column_values, iter_batches
from evaltrace.collector.runfiles.shard import RowFilter
from evaltrace.collector.runfiles.spans import Span, SpanEvent

LOG_READ_COLUMNS = ("trace_id", "span_id", "time", "observed_time", "event_name", "body", "attributes", "log_id")
LOG_KEY_PREFIX = "log:"
"""Prefix of a log record's key among the span ids of a trace group (span ids are bare hex)."""
UNNAMED_EVENT = "log"
"""Event name given to a record without one (a plain log line)."""


@dataclass(slots=True)
class LogRow:
    """One recorded log record, as the reader attaches it."""

    trace_id: str
    span_id: str | None
    time_ns: int
    event_name: str | None
    body: Any
    attributes: dict[str, Any]

    def event(self) -> SpanEvent:
        """This record as a span event: its attributes overlaid with its body's fields."""
        body = self.body
        merged = {**self.attributes, **body} if isinstance(body, dict) else dict(self.attributes)
        if body is not None and not isinstance(body, dict):
            merged["body"] = body
        return SpanEvent(self.event_name or UNNAMED_EVENT, self.time_ns, merged)


@dataclass
class LogAttachment:
    """What happened to the log records read with the spans."""

    attached: int = 0
    """Records added to their span as an event."""
    unattached: int = 0
    """Records naming a trace and span not in the files read (counted, not attached)."""
    without_trace: int = 0
    """Records emitted outside any span (no trace id): they belong to no trace."""
    unattached_events: dict[str, int] = field(default_factory=dict)
    """Event names of the unattached records, with their counts."""


def read_log_batches(
    path: Path, only: RowFilter | None = None, stats: LogAttachment | None = None
) -> Iterator[tuple[list[str], list[str], list[LogRow]]]:
    """Yield the log records of a file that have a trace id, batch by batch, keyed `log:<log_id>`.

    Records without a trace id are counted in `stats.without_trace` (when `only` is given they
    belong to no shard or id selection, and are left out without a count).

    Raises:
        InputError: the file is unreadable, or a body or attribute text is not JSON.
    """
    for batch in iter_batches(path, LOG_READ_COLUMNS, only):
        trace_ids: list[str | None] = batch.column("trace_id").to_pylist()
        if stats is not None and only is None:
            stats.without_trace += trace_ids.count(None)
        keep = [i for i, t in enumerate(trace_ids) if t is not None]
        if not keep:
            continue
        yield _decode(path, batch.take(pa.array(keep, pa.int64())) if len(keep) != len(trace_ids) else batch)


def _decode(path: Path, batch: pa.RecordBatch) -> tuple[list[str], list[str], list[LogRow]]:
    trace_ids: list[str] = batch.column("trace_id").to_pylist()
    span_ids: list[str | None] = batch.column("span_id").to_pylist()
    times: list[int | None] = column_values(batch.column("time"))
    observed: list[int] = column_values(batch.column("observed_time"))
    names: list[str | None] = batch.column("event_name").to_pylist()
    log_ids: list[str] = batch.column("log_id").to_pylist()

    def where(row: int) -> str:
        return f"{path}: log record {log_ids[row]} (row {row})"

    attributes = load_objects(batch.column("attributes").to_pylist(), where)
    bodies = [_body(text, where, row) for row, text in enumerate(batch.column("body").to_pylist())]
    rows = [
        LogRow(trace_ids[i], span_ids[i], times[i] or observed[i], names[i], bodies[i], attributes[i])
        for i in range(len(trace_ids))
    ]
    return trace_ids, [LOG_KEY_PREFIX + log_id for log_id in log_ids], rows


def _body(text: str | None, where: Any, row: int) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where(row)}: malformed body JSON ({' '.join(str(exc).split())})") from None


def attach_logs(group: Sequence[Span | LogRow], stats: LogAttachment | None = None) -> list[Span]:
    """The spans of one trace group, each with the group's log records for it appended as events."""
    spans = [item for item in group if isinstance(item, Span)]
    if len(spans) == len(group):
        return spans
    by_id = {span.span_id: span for span in spans}
    for item in group:
        if isinstance(item, Span):
            continue
        target = by_id.get(item.span_id) if item.span_id is not None else None
        if target is None:
            if stats is not None:
                stats.unattached += 1
                name = item.event_name or UNNAMED_EVENT
                stats.unattached_events[name] = stats.unattached_events.get(name, 0) + 1
            continue
        target.events.append(item.event())
        if stats is not None:
            stats.attached += 1
    return spans
