"""Answer tools: a tool the framework makes the model call to end the run with its answer.

smolagents' `ToolCallingAgent` ends a run only when the model calls its built-in `final_answer`
tool (a text reply without a tool call is a parsing error, and the agent asks again); the call's
`answer` argument is the run's answer. That call is how the framework returns, not a step the
user's agent took with its tools: listed as a tool call, every trajectory check would have to
name it. So a successful call of an answer tool in the run's last model call becomes the answer
(where the agent span recorded none) and leaves the tool calls; the model call that made it stays
an iteration. A failed or earlier call (rejected by the framework's answer checks) stays a call.
"""

from __future__ import annotations

import json
from typing import Any, Final

from evaltrace.collector.traces.records import Iteration, ToolCall

ANSWER_TOOLS: Final[dict[str, str]] = {
    "final_answer": "smolagents ToolCallingAgent / CodeAgent: the built-in FinalAnswerTool ends the run",
}
"""Answer tool names, each with the framework that makes the model call it."""


def take_answer_call(calls: list[ToolCall], iterations: list[Iteration]) -> tuple[list[ToolCall], str | None]:
    """The calls without the run-ending answer call, and the answer it gave (`None` without one)."""
    if not iterations:
        return calls, None
    last = iterations[-1].index
    answers = [c for c in calls if c.name in ANSWER_TOOLS and c.iteration == last and c.error is None]
    if len(answers) != 1:
        return calls, None
    (answer,) = answers
    for iteration in iterations:
        iteration.tool_calls = [c for c in iteration.tool_calls if c is not answer]
    return [c for c in calls if c is not answer], _answer_of(answer)


def _answer_of(call: ToolCall) -> str | None:
    if call.result is not None:
        return _text(call.result)
    arguments: Any = call.arguments
    if isinstance(arguments, dict) and len(arguments) == 1:
        return _text(next(iter(arguments.values())))
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
