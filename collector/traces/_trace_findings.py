"""What one rebuilt trace shows that would mislead scoring: the doctor's per-trace findings.

Each predicate reads only the `Trace` the converter rebuilt, so the doctor judges what scoring sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # records load pydantic: `doctor` without a path needs none
    from evaltrace.collector.traces.records import Iteration, Trace


def has_content(trace: Trace) -> bool:
    """Whether any content was recorded: an input, an answer, message text, tool arguments or results."""
    # With content capture off the messages keep their shape (roles, part types, call ids and tool
    # names): only text, arguments and results tell that content was recorded.
    if trace.input is not None or trace.output is not None:
        return True
    if any(call.arguments is not None or call.result is not None for call in trace.tool_calls):
        return True
    for iteration in trace.iterations:
        for message in (iteration.input_messages or []) + (iteration.output_messages or []):
            if any(p.text is not None or p.arguments is not None or p.result is not None for p in message.parts):
                return True
    return False


def doubled(iterations: list[Iteration]) -> bool:
    """Whether two iterations are one model call described twice.

    An agent's model calls follow one another; two with the same model and the same input and
    output token counts whose times overlap are one request that two spans described (two
    instrumentations of one client), which doubles the iterations and the tokens.
    """
    seen: dict[tuple[str | None, int, int], list[Iteration]] = {}
    for iteration in iterations:
        usage = iteration.usage
        if usage.input_tokens is None or usage.output_tokens is None or iteration.start_time is None:
            continue
        key = (iteration.model, usage.input_tokens, usage.output_tokens)
        for other in seen.get(key, []):
            if _overlap(iteration, other):
                return True
        seen.setdefault(key, []).append(iteration)
    return False


def _overlap(a: Iteration, b: Iteration) -> bool:
    # Both have a start time (`doubled` skips the others); a missing end is taken as the start.
    if a.start_time is None or b.start_time is None:
        return False
    return a.start_time <= (b.end_time or b.start_time) and b.start_time <= (a.end_time or a.start_time)


def unanswered_tool_stop(trace: Trace) -> bool:
    """Whether a model reply stopped to call a tool while no call was rebuilt for it."""
    # A tool span that matched no request has no iteration: it may be the call such a stop asked
    # for, so only a trace without such calls is said to lack one.
    if any(call.iteration is None for call in trace.tool_calls):
        return False
    answered = {call.iteration for call in trace.tool_calls}
    for iteration in trace.iterations:
        # `stop_reason` is the converter's normalised finish reason (tool_calls, tool_use, ... -> tool_call).
        if iteration.stop_reason != "tool_call" or iteration.tool_calls or iteration.index in answered:
            continue
        # A reply whose call part was read as the run's answer (a final-result tool) did ask for it.
        if not any(p.type == "tool_call" for m in iteration.output_messages or [] for p in m.parts):
            return True
    return False
