"""Record agent spans to local Parquet files, read them back, and rebuild agent traces.

Names are imported on first use (PEP 562): importing the records or the pytest plugin must not
pay for pyarrow and the OTel SDK until something actually reads or writes spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaltrace.collector.lazy import lazy_package

if TYPE_CHECKING:
    from evaltrace.collector.errors import EvaltraceError as EvaltraceError
    from evaltrace.collector.errors import InputError as InputError
    from evaltrace.collector.otlp.files.inputs import RunFiles as RunFiles
    from evaltrace.collector.otlp.files.inputs import resolve_paths as resolve_paths
    from evaltrace.collector.recorder.agent_run import AgentRun as AgentRun
    from evaltrace.collector.recorder.agent_run import agent_run as agent_run
    from evaltrace.collector.recorder.exporter import ParquetSpanExporter as ParquetSpanExporter
    from evaltrace.collector.recorder.log_exporter import ParquetLogExporter as ParquetLogExporter
    from evaltrace.collector.recorder.recording import Recorder as Recorder
    from evaltrace.collector.recorder.recording import record as record
    from evaltrace.collector.recorder.redact import RedactionSettings as RedactionSettings
    from evaltrace.collector.recorder.tool_call import ToolCallRun as ToolCallRun
    from evaltrace.collector.recorder.tool_call import tool_call as tool_call
    from evaltrace.collector.runfiles.reader import RunsSummary as RunsSummary
    from evaltrace.collector.runfiles.reader import TraceSummary as TraceSummary
    from evaltrace.collector.runfiles.reader import clean_stale_inflight as clean_stale_inflight
    from evaltrace.collector.runfiles.reader import find_stale_inflight as find_stale_inflight
    from evaltrace.collector.runfiles.reader import find_trace_ids as find_trace_ids
    from evaltrace.collector.runfiles.reader import iter_traces as iter_traces
    from evaltrace.collector.runfiles.reader import read_spans as read_spans
    from evaltrace.collector.runfiles.reader import summarize_runs as summarize_runs
    from evaltrace.collector.traces.rebuild import convert_spans as convert_spans
    from evaltrace.collector.traces.rebuild import convert_trace as convert_trace
    from evaltrace.collector.traces.rebuild import group_conversations as group_conversations
    from evaltrace.collector.traces.rebuild import read_traces as read_traces
    from evaltrace.collector.traces.records import Conversation as Conversation
    from evaltrace.collector.traces.records import Iteration as Iteration
    from evaltrace.collector.traces.records import Message as Message
    from evaltrace.collector.traces.records import MessagePart as MessagePart
    from evaltrace.collector.traces.records import ToolCall as ToolCall
    from evaltrace.collector.traces.records import ToolSchema as ToolSchema
    from evaltrace.collector.traces.records import Trace as Trace
    from evaltrace.collector.traces.records import Usage as Usage

__getattr__, __dir__, __all__ = lazy_package(__name__)
