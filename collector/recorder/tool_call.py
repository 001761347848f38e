"""`tool_call`: one `execute_tool` span around a tool a hand-written loop runs.

An instrumented model client records the model asking for a tool; nothing records the tool
running, its result or its failure unless the loop writes that span. `tool_call` writes it by the
GenAI conventions the converter reads for every framework (`execute_tool {name}`,
`gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments` / `.result` as JSON text
unless already text). An exception raised inside is the call's error and propagates. Outside any
span it is still recorded, as a trace of its own, and the `evaltrace` logger warns once: a tool
span with no run around it is no agent's tool call, so the converter rebuilds none from it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span

from evaltrace.collector.recorder.span_scope import SpanScope, as_text, started_span

__all__ = ["ToolCallRun", "tool_call"]

_TRACER_NAME = "evaltrace.collector.tool_call"
logger = logging.getLogger("evaltrace")
_warned_outside_run = False


class ToolCallRun:
    """The handle of one tool call: set `result` to what the tool returned."""

    def __init__(self, span: Span, name: str, arguments: Any, call_id: str | None) -> None:
        self.span = span
        self.name = name
        self.arguments = arguments
        self.call_id = call_id
        self._result: Any = None

    @property
    def result(self) -> Any:
        """What the tool returned, as given (`None` until set)."""
        return self._result

    @result.setter
    def result(self, value: Any) -> None:
        self._result = value
        if value is not None:
            self.span.set_attribute("gen_ai.tool.call.result", as_text(value))


class tool_call(SpanScope[ToolCallRun]):  # lower case: used as a function (`with tool_call(...)`)
    """Make one `execute_tool` span around a tool's run (a context manager, sync or async).

    Args:
        name: the tool's name (`gen_ai.tool.name`; the span is `execute_tool {name}`).
        arguments: the call's arguments (`gen_ai.tool.call.arguments`): a mapping or value kept as
            JSON, or the JSON text the model sent.
        call_id: the model's id for the call (`gen_ai.tool.call.id`), which pairs the run with
            the request in the model's reply.
        tracer_provider: the provider to make the span with (default: the global one).
    """

    def __init__(
        self,
        name: str,
        arguments: Any = None,
        call_id: str | None = None,
        *,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.name = name
        self.arguments = arguments
        self.call_id = call_id
        self.tracer_provider = tracer_provider
        super().__init__()

    def _attributes(self) -> dict[str, str]:
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self.name}
        if self.call_id is not None:
            attributes["gen_ai.tool.call.id"] = self.call_id
        if self.arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = as_text(self.arguments)
        return attributes

    @contextmanager
    def _open(self) -> Iterator[ToolCallRun]:
        outside = not trace.get_current_span().get_span_context().is_valid
        name = f"execute_tool {self.name}"
        with started_span(_TRACER_NAME, self.tracer_provider, name, self._attributes()) as span:
            if outside and span.is_recording():
                _warn_outside_run(self.name)
            yield ToolCallRun(span, self.name, self.arguments, self.call_id)


def _warn_outside_run(name: str) -> None:
    global _warned_outside_run
    if not _warned_outside_run:  # once per process: a loop would repeat it for every call
        _warned_outside_run = True
        logger.warning(
            "tool_call %r ran outside any agent_run: recorded as a trace of its own, which no agent run "
            "holds; wrap the loop in agent_run(...) to record it as the run's tool call",
            name,
        )
