"""Record agent spans to local Parquet files, read them back, and rebuild agent traces.

Names are imported on first use (PEP 562): importing the records or the pytest plugin must not
pay for pyarrow and the OTel SDK until something actually reads or writes spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaltrace.collector._lazy import lazy_exports

if TYPE_CHECKING:
    from evaltrace.collector._redact import RedactionSettings
    from evaltrace.collector.agent_run import AgentRun, agent_run
    from evaltrace.collector.convert import convert_spans, convert_trace, group_conversations, read_traces
    from evaltrace.collector.errors import EvaltraceError, InputError
    from evaltrace.collector.exporter import ParquetSpanExporter
    from evaltrace.collector.log_exporter import ParquetLogExporter
    from evaltrace.collector.reader import (
        RunsSummary,
        TraceSummary,
        clean_stale_inflight,
        find_stale_inflight,
        find_trace_ids,
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

_EXPORTS: dict[str, str] = {
    "AgentRun": "evaltrace.collector.agent_run",
    "Conversation": "evaltrace.collector.records",
    "EvaltraceError": "evaltrace.collector.errors",
    "InputError": "evaltrace.collector.errors",
    "Iteration": "evaltrace.collector.records",
    "Message": "evaltrace.collector.records",
    "MessagePart": "evaltrace.collector.records",
    "ParquetLogExporter": "evaltrace.collector.log_exporter",
    "ParquetSpanExporter": "evaltrace.collector.exporter",
    "Recorder": "evaltrace.collector.recording",
    "RedactionSettings": "evaltrace.collector._redact",
    "RunsSummary": "evaltrace.collector.reader",
    "ToolCall": "evaltrace.collector.records",
    "ToolSchema": "evaltrace.collector.records",
    "Trace": "evaltrace.collector.records",
    "TraceSummary": "evaltrace.collector.reader",
    "Usage": "evaltrace.collector.records",
    "agent_run": "evaltrace.collector.agent_run",
    "clean_stale_inflight": "evaltrace.collector.reader",
    "convert_spans": "evaltrace.collector.convert",
    "convert_trace": "evaltrace.collector.convert",
    "find_stale_inflight": "evaltrace.collector.reader",
    "find_trace_ids": "evaltrace.collector.reader",
    "group_conversations": "evaltrace.collector.convert",
    "iter_traces": "evaltrace.collector.reader",
    "read_spans": "evaltrace.collector.reader",
    "read_traces": "evaltrace.collector.convert",
    "record": "evaltrace.collector.recording",
    "resolve_paths": "evaltrace.collector.reader",
    "summarize_runs": "evaltrace.collector.reader",
}

__all__ = [
    "AgentRun",
    "Conversation",
    "EvaltraceError",
    "InputError",
    "Iteration",
    "Message",
    "MessagePart",
    "ParquetLogExporter",
    "ParquetSpanExporter",
    "Recorder",
    "RedactionSettings",
    "RunsSummary",
    "ToolCall",
    "ToolSchema",
    "Trace",
    "TraceSummary",
    "Usage",
    "agent_run",
    "clean_stale_inflight",
    "convert_spans",
    "convert_trace",
    "find_stale_inflight",
    "find_trace_ids",
    "group_conversations",
    "iter_traces",
    "read_spans",
    "read_traces",
    "record",
    "resolve_paths",
    "summarize_runs",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
