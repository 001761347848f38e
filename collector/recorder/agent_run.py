"""`agent_run`: one `invoke_agent` root span around an agent that makes none of its own.

A plain model-and-tools loop instrumented by a client library (openai-v2, for instance) records
one span per model call, each its own trace: nothing says the calls belong together, what the
user asked or what the agent answered. `agent_run` makes that span by the OTel GenAI conventions
(`invoke_agent {name}`, `gen_ai.agent.name`, `gen_ai.conversation.id`, the input and answer as
`gen_ai.input.messages` / `gen_ai.output.messages`, `evaltrace.case_id`), so every span started
inside it is its child and the run is one trace. A context manager or a decorator (sync or async;
docs/recording.md shows both): without `input=`, the function's first `str` argument is the input
and a `str` return value the output. An exception is recorded on the span and re-raised.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ParamSpec, TypeVar, cast

from opentelemetry import trace
from opentelemetry.trace import Span

from evaltrace.collector.recorder.span_scope import SpanScope, as_text, started_span

__all__ = ["AgentRun", "agent_run"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_TRACER_NAME = "evaltrace.collector.agent_run"


def _messages(role: str, text: str, **extra: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}], **extra}], ensure_ascii=False)


class AgentRun:
    """The handle of one agent run: `input` is what it was given; set `output` to the answer before it ends."""

    def __init__(self, span: Span, input_value: Any = None) -> None:
        self.span = span
        self._input = input_value
        self._output: str | None = None

    @property
    def trace_id(self) -> str:
        """The run's trace id (32 lowercase hex), e.g. for `evaltrace show`."""
        return f"{self.span.get_span_context().trace_id:032x}"

    @property
    def output(self) -> str | None:
        """The agent's answer (`None` until set)."""
        return self._output

    @output.setter
    def output(self, value: Any) -> None:
        self._output = None if value is None else as_text(value)
        if self._output is not None:
            self.span.set_attribute(
                "gen_ai.output.messages", _messages("assistant", self._output, finish_reason="stop")
            )

    @property
    def input(self) -> Any:
        """The input the run was given (`input=`, the decorated function's, or set later), as given."""
        return self._input

    @input.setter
    def input(self, value: Any) -> None:
        """Set the input when it was not known at the start."""
        self._input = value
        if value is not None:
            self.span.set_attribute("gen_ai.input.messages", _messages("user", as_text(value)))


class agent_run(SpanScope[AgentRun]):  # lower case: used as a function (`with agent_run(...)`, `@agent_run(...)`)
    """Make one `invoke_agent` span around an agent run (context manager or decorator).

    Args:
        name: the agent's name (`gen_ai.agent.name`; the span is `invoke_agent {name}`).
        input: the user's message (`gen_ai.input.messages`). As a decorator, when left out, the
            function's first `str` argument.
        case_id: the spec case this run answers (`evaltrace.case_id`).
        conversation_id: the conversation the run belongs to (`gen_ai.conversation.id`).
        tracer_provider: the provider to make the span with (default: the global one).
    """

    def __init__(
        self,
        name: str,
        input: Any = None,  # the GenAI name for what the user asked
        *,
        case_id: str | None = None,
        conversation_id: str | None = None,
        tracer_provider: trace.TracerProvider | None = None,
    ) -> None:
        self.name = name
        self.tracer_provider = tracer_provider
        self.input = input
        self.case_id = case_id
        self.conversation_id = conversation_id
        super().__init__()

    def _attributes(self, input_value: Any) -> dict[str, str]:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.name}
        if self.conversation_id is not None:
            attributes["gen_ai.conversation.id"] = self.conversation_id
        if self.case_id is not None:
            attributes["evaltrace.case_id"] = self.case_id
        if input_value is not None:
            attributes["gen_ai.input.messages"] = _messages("user", as_text(input_value))
        return attributes

    @contextmanager
    def _run(self, input_value: Any) -> Iterator[AgentRun]:
        attributes = self._attributes(input_value)
        with started_span(_TRACER_NAME, self.tracer_provider, f"invoke_agent {self.name}", attributes) as span:
            yield AgentRun(span, input_value)

    def _open(self) -> AbstractContextManager[AgentRun]:
        return self._run(self.input)

    # -- decorator ------------------------------------------------------------------------

    def __call__(self, func: Callable[_P, _R]) -> Callable[_P, _R]:
        """Wrap `func` (sync or async) so that each call is one agent run."""
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: _P.args, **kwargs: _P.kwargs) -> Any:
                with self._run(self._input_of(args, kwargs)) as handle:
                    result = await func(*args, **kwargs)
                    self._set_output(handle, result)
                    return result

            return cast(Callable[_P, _R], run_async)

        @functools.wraps(func)
        def run_sync(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with self._run(self._input_of(args, kwargs)) as handle:
                result = func(*args, **kwargs)
                self._set_output(handle, result)
                return result

        return run_sync

    def _input_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.input is not None:
            return self.input
        return next((value for value in (*args, *kwargs.values()) if isinstance(value, str)), None)

    @staticmethod
    def _set_output(handle: AgentRun, result: Any) -> None:
        if handle.output is None and isinstance(result, str):
            handle.output = result
