"""Record agent spans to local Parquet files, read them back, and rebuild agent traces."""

from evaltrace.collector._redact import RedactionSettings
from evaltrace.collector.convert import convert_spans, convert_trace, group_conversations, read_traces
from evaltrace.collector.errors import EvaltraceError, InputError
from evaltrace.collector.exporter import ParquetSpanExporter
from evaltrace.collector.reader import (
    RunsSummary,
    TraceSummary,
    clean_stale_inflight,
    find_stale_inflight,
    iter_traces,
    read_spans,
    resolve_paths,
    summarize_runs,
)
from evaltrace.collector.recording import Recorder, record
from evaltrace.collector.records import (
    Conversation,
    Iteration,
    Message,
    MessagePart,
    ToolCall,
    ToolSchema,
    Trace,
    Usage,
)

__all__ = [
    "Conversation",
    "EvaltraceError",
    "InputError",
    "Iteration",
    "Message",
    "MessagePart",
    "ParquetSpanExporter",
    "Recorder",
    "RedactionSettings",
    "RunsSummary",
    "ToolCall",
    "ToolSchema",
    "Trace",
    "TraceSummary",
    "Usage",
    "clean_stale_inflight",
    "convert_spans",
    "convert_trace",
    "find_stale_inflight",
    "group_conversations",
    "iter_traces",
    "read_spans",
    "read_traces",
    "record",
    "resolve_paths",
    "summarize_runs",
]
