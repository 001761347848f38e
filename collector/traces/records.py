"""Records rebuilt from spans: what scorers see of an agent run.

A `Trace` is one agent run: the user's input, one `Iteration` per model call, the `ToolCall`s
the agent made (in the order it made them), the final output or error, token usage summed over
model calls only, and the tool definitions the model was offered. Nested agents (an agent used
as a tool) become child traces reachable from the tool call that started them. A run handed over
from agent to agent (OpenAI Agents SDK handoffs) is one trace: its tool calls and iterations span
the whole chain, and each handoff call's `child` is the run from the target agent on.

Content that was not captured is `None`, never an empty string: scorers must be able to tell
"the agent said nothing" from "the instrumentation did not record what it said".
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from evaltrace.collector.traces._construct import RecordFactory
from evaltrace.collector.traces.arguments import Rules, iter_argument_diffs

TraceStatus = Literal["success", "error", "timeout", "unknown"]
STOP_REASONS = ("stop", "tool_call", "length", "content_filter", "error")
"""The normalised stop reasons (`Iteration.stop_reason`); other recorded reasons are kept lower-cased."""
PartType = Literal["text", "tool_call", "tool_result", "other"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Usage(_Record):
    """Token counts. `None` means no model call reported that count."""

    input_tokens: int | None = None
    """Prompt tokens, cached and uncached together."""
    output_tokens: int | None = None
    """Completion tokens, reasoning tokens included."""
    cache_read_tokens: int | None = None
    """Part of `input_tokens` served from the provider's prompt cache."""
    reasoning_tokens: int | None = None
    """Part of `output_tokens` spent on hidden reasoning."""

    @property
    def total_tokens(self) -> int | None:
        """Input plus output tokens, or `None` when neither was reported."""
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def __add__(self, other: Usage) -> Usage:
        return Usage.combined((self, other))

    @classmethod
    def combined(cls, usages: Iterable[Usage]) -> Usage:
        """The sum of `usages`; a count stays `None` only when none of them reported it."""
        # One record for the whole sum: summing with `+` builds (and validates) one per term.
        totals: dict[str, int | None] = dict.fromkeys(_USAGE_COUNTS)
        for usage in usages:
            for name in _USAGE_COUNTS:
                value = getattr(usage, name)
                if value is not None:
                    totals[name] = (totals[name] or 0) + value
        if cls is Usage:  # sums of validated counts: no validation again (`_construct`)
            return _USAGE.build(**totals)
        return cls(**totals)


_USAGE_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens")


class MessagePart(_Record):
    """One part of a chat message."""

    type: PartType
    text: str | None = None
    """Text content (`type == "text"`), or a textual rendering of an `other` part."""
    call_id: str | None = None
    """Tool call id (`tool_call` and `tool_result` parts)."""
    name: str | None = None
    """Tool name (`tool_call`, and `tool_result` where recorded)."""
    arguments: Any = None
    """Tool call arguments: a JSON object when they parse as one, else the raw value."""
    result: Any = None
    """Tool result (`tool_result` parts)."""
    error: str | None = None
    """A `tool_result` part that reports a failure (a provider's `is_error` block): the text the model was told."""


class Message(_Record):
    """A chat message: a role and its parts."""

    role: str
    """`system`, `user`, `assistant` or `tool` (provider synonyms such as `model` are normalised)."""
    parts: list[MessagePart] = Field(default_factory=list)
    name: str | None = None

    @property
    def text(self) -> str | None:
        """The text parts joined by newlines, or `None` when the message has no text part."""
        texts = [p.text for p in self.parts if p.type == "text" and p.text is not None]
        return "\n".join(texts) if texts else None


class ToolSchema(_Record):
    """A tool definition offered to the model."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    """JSON Schema of the arguments, when recorded."""


class ToolCall(_Record):
    """One tool call made by the agent, with its outcome."""

    call_id: str | None = None
    name: str
    arguments: Any = None
    """A JSON object when the recorded arguments parse as one; else the raw value; `None` if not captured."""
    result: Any = None
    """The tool's result (text, or parsed JSON when the instrumentation stored structured data)."""
    error: str | None = None
    """Error text when the tool failed (span status ERROR or an exception event)."""
    iteration: int | None = None
    """Index of the iteration (model call) that requested this call, when known."""
    span_id: str | None = None
    """The tool's own span, when one was recorded."""
    start_time: datetime | None = None
    end_time: datetime | None = None
    arguments_truncated: bool = False
    """The recorded arguments were cut mid-JSON; `arguments` holds the raw text."""
    child: Trace | None = None
    """The nested agent run this call started (agent-as-tool), or the run it handed over to (`handoff`)."""
    handoff: bool = False
    """This call handed the run over to another agent: `child` is the run from that agent on, and
    its calls already follow this one in the same `tool_calls` list (so nested traversal skips it)."""

    @property
    def duration_seconds(self) -> float | None:
        """Wall time of the tool span, when recorded."""
        if self.start_time is None or self.end_time is None:
            return None
        return (self.end_time - self.start_time).total_seconds()


class Iteration(_Record):
    """One model call inside the agent loop."""

    index: int
    span_id: str | None = None
    model: str | None = None
    provider: str | None = None
    input_messages: list[Message] | None = None
    """The prompt sent (system instructions first), `None` when not captured or when the traces
    were read with `histories=False` (as `evaltrace score` does when no scorer reads prompts)."""
    output_messages: list[Message] | None = None
    """The model's reply, `None` when not captured."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Tool calls the model requested in this reply."""
    finish_reasons: list[str] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    start_time: datetime | None = None
    end_time: datetime | None = None
    error: str | None = None
    stop_reason: str | None = None
    """Why the model stopped, normalised from the provider's finish reason (`finish_reasons` keeps it as
    recorded): `stop`, `tool_call`, `length` (cut by a token limit: the reply is incomplete),
    `content_filter`, `error`, or the recorded reason lower-cased when it is none of those."""
    merged_span_ids: list[str] = Field(default_factory=list)
    """Other spans that described this same model call (a second instrumentation, nested or beside
    `span_id`; the same response id), read as this one iteration: their usage is not counted again."""
    duplicate_call_ids: list[str] = Field(default_factory=list)
    """Call ids this model call's spans recorded more than once (in two attribute families), each read as one call."""

    @property
    def output_text(self) -> str | None:
        """The reply's text parts, or `None`."""
        if not self.output_messages:
            return None
        texts = [m.text for m in self.output_messages if m.text is not None]
        return "\n".join(texts) if texts else None

    @property
    def duration_seconds(self) -> float | None:
        """Wall time of the model call."""
        if self.start_time is None or self.end_time is None:
            return None
        return (self.end_time - self.start_time).total_seconds()


class Trace(_Record):
    """One agent run rebuilt from its spans."""

    trace_id: str
    root_span_id: str | None = None
    name: str | None = None
    """Name of the root span."""
    agent_name: str | None = None
    input: str | None = None
    """The user's message text."""
    output: str | None = None
    """The final answer text."""
    error: str | None = None
    status: TraceStatus = "unknown"
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """The run's tool calls in the order made, across handoffs; nested agents' calls (agent as tool)
    live in `ToolCall.child`."""
    iterations: list[Iteration] = Field(default_factory=list)
    tool_schemas: list[ToolSchema] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    """Summed over model calls only (agent spans often repeat their children's totals)."""
    models: list[str] = Field(default_factory=list)
    start_time: datetime | None = None
    end_time: datetime | None = None
    conversation_id: str | None = None
    case_id: str | None = None
    run_id: str | None = None
    service_name: str | None = None
    convention: str | None = None
    """The span convention(s) the trace was read from, e.g. `genai`, `openinference`."""
    span_count: int = 0
    attributes: dict[str, Any] = Field(default_factory=dict)
    """`evaltrace.*` attributes found on the trace's spans (case id, repeat index, ...)."""
    handoffs: list[str] = Field(default_factory=list)
    """The agents the run was handed over to, in order (`agent_name` started it); empty without handoffs."""
    warnings: list[str] = Field(default_factory=list)
    """What could not be recovered (orphan spans, truncated JSON, missing content)."""

    def all_tool_calls(self, *, nested: bool = False) -> list[ToolCall]:
        """The tool calls in order; with `nested`, nested agents' calls follow the call that started them.

        A handoff's calls are already in `tool_calls` (after the handoff call), so they are not repeated.
        """
        if not nested:
            return list(self.tool_calls)
        calls: list[ToolCall] = []
        for call in self.tool_calls:
            calls.append(call)
            if call.child is not None and not call.handoff:
                calls.extend(call.child.all_tool_calls(nested=True))
        return calls

    def has_error(self) -> bool:
        """Whether the run or any of its tool calls or model calls failed."""
        return bool(self.errors())

    def errors(self) -> list[str]:
        """Every error text: the run's, then each failed model call's and tool call's."""
        found = [self.error] if self.error else []
        found += [it.error for it in self.iterations if it.error]
        found += [f"{c.name}: {c.error}" for c in self.tool_calls if c.error]
        return found

    def final_answer(self) -> str | None:
        """The final output text, falling back to the last model reply's text."""
        if self.output is not None:
            return self.output
        for iteration in reversed(self.iterations):
            if iteration.output_text is not None:
                return iteration.output_text
        return None

    @property
    def duration_seconds(self) -> float | None:
        """Total execution time of the run."""
        if self.start_time is None or self.end_time is None:
            return None
        return (self.end_time - self.start_time).total_seconds()

    def assert_tool_call(
        self,
        expected_name: str,
        expected_arguments: dict[str, Any] | None = None,
        *,
        exact: bool = False,
        nested: bool = False,
    ) -> ToolCall:
        """Assert the agent called `expected_name` (with matching arguments) and return that call.

        Arguments match as a subset by default (every expected key present with an equal value,
        recursively); with `exact`, the arguments must have the same keys at every depth. The
        comparison is the scorers' (`collector/traces/arguments.py`): numbers compare by value
        (`1 == 1.0`), booleans never equal numbers, and each difference reads
        `path: expected X, got Y`, `path: missing (...)` or `path: unexpected argument (...)`.

        Args:
            expected_name: The tool name.
            expected_arguments: Arguments the call must have; `None` accepts any.
            exact: Require equal arguments rather than a subset.
            nested: Also search the calls of nested agents.

        Raises:
            AssertionError: No call matched; the message lists the calls made and the differences.
        """
        calls = self.all_tool_calls(nested=nested)
        named = [c for c in calls if c.name == expected_name]
        if not named:
            made = ", ".join(repr(c.name) for c in calls) or "none"
            raise AssertionError(f"expected a call of tool {expected_name!r}; calls made: {made}")
        if expected_arguments is None:
            return named[0]
        rules = Rules(mode="exact" if exact else "subset")
        report = []
        for call in named:
            differences = list(iter_argument_diffs(expected_arguments, call.arguments, call.arguments_truncated, rules))
            if not differences:
                return call
            report.append(f"  call {call.call_id or '?'}: " + "; ".join(differences))
        mode = "exactly" if exact else "including"
        raise AssertionError(
            f"no call of tool {expected_name!r} has arguments {mode} {expected_arguments!r}:\n" + "\n".join(report)
        )

    def to_contract_json(self) -> dict[str, Any]:
        """The JSON object `evaltrace traces --json` prints (the documented keys first).

        A nested run is written once, as the `child` of its call in `tool_calls`: the same call in
        `iterations` has no `child` key, and a handoff call's child (the rest of the chain, whose
        calls and iterations follow in this trace's lists) has no `tool_calls` and `iterations`.
        Written whole everywhere, the output doubled with each level of nesting.
        """
        return self.model_dump(mode="json", exclude=_written_once(self))


class Conversation(_Record):
    """The traces of one conversation (turns), ordered by start time."""

    conversation_id: str
    traces: list[Trace] = Field(default_factory=list)


def _written_once(trace: Trace) -> dict[Any, Any]:
    """`model_dump`'s `exclude` writing each nested run once, built without recursion (see `to_contract_json`)."""
    order, stack, seen = [], [trace], {id(trace)}
    while stack:  # every trace reachable, parents before children
        current = stack.pop()
        order.append(current)
        for call in current.tool_calls:
            if call.child is not None and not call.handoff and id(call.child) not in seen:
                seen.add(id(call.child))
                stack.append(call.child)
    made: dict[int, dict[Any, Any]] = {}
    for current in reversed(order):  # children first
        calls: dict[Any, Any] = {}
        for index, call in enumerate(current.tool_calls):
            if call.child is not None:
                calls[index] = {"child": _HANDOFF_CHILD if call.handoff else made[id(call.child)]}
        made[id(current)] = {**_ITERATION_CHILDREN, **({"tool_calls": calls} if calls else {})}
    return made[id(trace)]


_ITERATION_CHILDREN: Final = {"iterations": {"__all__": {"tool_calls": {"__all__": {"child"}}}}}
_HANDOFF_CHILD: Final = {"iterations": True, "tool_calls": True}
"""A handoff's child is the rest of the chain, whose calls and iterations follow in the same lists."""


ToolCall.model_rebuild()
_USAGE = RecordFactory(Usage)
