"""What one span says, independent of the convention that wrote it.

Each convention module (`conventions/genai.py`, `conventions/openinference.py`, ...)
exposes `extract(span) -> NormalizedSpan | None`: it returns `None` when the span is not in its
convention, so `rebuild.py` can try them in its detection order
(OpenInference, OpenLLMetry, GenAI new, GenAI old, framework fallbacks, bare structure).
`rebuild.py` then builds the span tree and assembles `Trace` records from these parts only, so
the assembly logic (iterations, tool-call matching, usage sums, nesting) is written once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces.records import Message, ToolCall, ToolSchema, Usage

SpanRole = Literal["agent", "llm", "tool", "chain", "other"]
"""`agent`: an agent or workflow run (a Trace root candidate); `llm`: one model call (an Iteration);
`tool`: one tool execution; `chain`: a wrapper without meaning of its own (steps, graph nodes);
`other`: anything else (HTTP, DB)."""


@dataclass(slots=True)
class LlmCall:
    """A model call: one iteration of the agent loop."""

    model: str | None = None
    provider: str | None = None
    input_messages: list[Message] | None = None
    """Prompt sent, system instructions first; `None` when content was not captured.
    Read it through `inputs()`: an extractor may leave it to `input_loader`."""
    output_messages: list[Message] | None = None
    """Reply; `None` when not captured."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Tool calls requested in the reply (name, call_id, arguments; no results yet)."""
    usage: Usage = field(default_factory=Usage)
    finish_reasons: list[str] = field(default_factory=list)
    tool_schemas: list[ToolSchema] = field(default_factory=list)
    """Tools offered to the model in this call."""
    input_loader: Callable[[], list[Message] | None] | None = None
    """Parses the prompt on first use. Prompts resend the whole conversation, so parsing them is
    up to a quarter of rebuilding a trace, and rule scorers rarely read them."""
    response_id: str | None = None
    """The provider's id of the reply (`gen_ai.response.id`): two spans with the same one describe one model call."""
    merged_span_ids: list[str] = field(default_factory=list)
    """Other spans of this same model call, read into this one (`_model_calls`)."""

    def inputs(self) -> list[Message] | None:
        """The prompt, parsed now if the extractor deferred it."""
        if self.input_loader is not None:
            self.input_messages, self.input_loader = self.input_loader(), None
        return self.input_messages


@dataclass(slots=True)
class ToolExec:
    """A tool execution span."""

    name: str
    call_id: str | None = None
    """`None` where the instrumentation records none (match by name and order then)."""
    arguments: Any = None
    arguments_truncated: bool = False
    result: Any = None
    error: str | None = None
    description: str | None = None


@dataclass(slots=True)
class AgentRun:
    """An agent or workflow run span."""

    name: str | None = None
    input: str | None = None
    """The user's message text, when the span records it."""
    output: str | None = None
    """The final answer text, when the span records it."""
    input_messages: list[Message] | None = None
    output_messages: list[Message] | None = None
    tool_schemas: list[ToolSchema] = field(default_factory=list)
    usage: Usage | None = None
    """Aggregated usage as the span reports it; informative only, never summed into Trace.usage."""


@dataclass(slots=True)
class NormalizedSpan:
    """One span's meaning in convention-neutral terms."""

    span: Span
    role: SpanRole
    convention: str
    """`genai`, `genai-events`, `openinference`, `openllmetry`, `pydantic-ai`, `structure`."""
    llm: LlmCall | None = None
    tool: ToolExec | None = None
    agent: AgentRun | None = None
    conversation_id: str | None = None
    error: str | None = None
    """Error text from status, `error.type` and exception events."""
    warnings: list[str] = field(default_factory=list)
