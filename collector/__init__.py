"""Record agent spans to local Parquet files, read them back, and rebuild agent traces."""

from evaltrace.collector.errors import EvaltraceError, InputError
from evaltrace.collector.records import Conversation, Iteration, Message, MessagePart, ToolCall, ToolSchema, Trace, Usage

__all__ = [
    "Conversation",
    "EvaltraceError",
    "InputError",
    "Iteration",
    "Message",
    "MessagePart",
    "ToolCall",
    "ToolSchema",
    "Trace",
    "Usage",
]
