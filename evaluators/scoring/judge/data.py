"""What judges are shown of a trace: plain JSON-ready dicts built from the records.

Only content is shown (input, answers, calls, results, errors); ids, timings and token counts
stay out, so the rendered prompt, and with it the cache key, changes only when something a judge
could base its verdict on changes.
"""

from __future__ import annotations

from typing import Any

from evaltrace.collector.traces.records import ToolCall, ToolSchema, Trace


def user_input(trace: Trace, case: Any | None) -> str | None:
    """The user's request: the trace's recorded input, else the case's input."""
    if trace.input is not None:
        return trace.input
    value = getattr(case, "input", None)
    return value if isinstance(value, str) else None


def call_data(call: ToolCall, *, with_result: bool = True) -> dict[str, Any]:
    """One tool call as the judge sees it."""
    data: dict[str, Any] = {"name": call.name, "arguments": call.arguments}
    if with_result:
        data["result"] = call.result
        if call.error is not None:
            data["error"] = call.error
    # A handoff's child is the rest of this same run (its answer is the final answer), not a nested agent.
    if call.child is not None and not call.handoff:
        data["nested_agent_answer"] = call.child.final_answer()
    return data


def steps_data(trace: Trace) -> list[dict[str, Any]]:
    """The tool calls in order, numbered from 1."""
    return [{"step": i, **call_data(call)} for i, call in enumerate(trace.tool_calls, start=1)]


def reasoning_data(trace: Trace) -> list[dict[str, Any]]:
    """The agent loop: each model reply's text and requested calls, with the calls' outcomes.

    Falls back to the tool calls alone when no model reply was recorded.
    """
    if not trace.iterations:
        return steps_data(trace)
    by_iteration: dict[int, list[ToolCall]] = {}
    for call in trace.tool_calls:
        if call.iteration is not None:
            by_iteration.setdefault(call.iteration, []).append(call)
    turns: list[dict[str, Any]] = []
    for iteration in trace.iterations:
        calls = by_iteration.get(iteration.index) or iteration.tool_calls
        turn: dict[str, Any] = {"turn": iteration.index + 1, "assistant_text": iteration.output_text}
        if calls:
            turn["tool_calls"] = [call_data(call) for call in calls]
        if iteration.error is not None:
            turn["error"] = iteration.error
        turns.append(turn)
    return turns


def has_reasoning(trace: Trace) -> bool:
    """Whether anything of the agent's path was recorded: reply text or tool calls."""
    return bool(trace.tool_calls) or any(it.output_text for it in trace.iterations)


def schema_data(schema: ToolSchema) -> dict[str, Any]:
    """A tool definition as the judge sees it."""
    return {"name": schema.name, "description": schema.description, "parameters": schema.parameters}


def argument_context(trace: Trace, index: int) -> dict[str, Any]:
    """Evidence for call `index`'s arguments: the user input and the calls before it with results."""
    call = trace.tool_calls[index]
    schema = next((s for s in trace.tool_schemas if s.name == call.name), None)
    data: dict[str, Any] = {
        "earlier_tool_calls": [call_data(c) for c in trace.tool_calls[:index]],
        "call_under_review": call_data(call, with_result=False),
    }
    if schema is not None:
        data["tool_definition"] = schema_data(schema)
    return data


def has_arguments(call: ToolCall) -> bool:
    """Whether a call has argument values a judge could check (captured and non-empty)."""
    if call.arguments is None:
        return False
    if isinstance(call.arguments, dict | list | str):
        return len(call.arguments) > 0
    return True
