"""The fields of the records assembly builds: a trace's, an iteration's, a run's outcome.

Records are built without validation (`_construct`) from values the assembly computed; the texts
among them come from recorded attributes and are checked to be text first, as `_construct` says.
"""

from __future__ import annotations

from typing import Any

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._calls import prompt_of
from evaltrace.collector.traces._construct import RecordFactory, texts_or_none
from evaltrace.collector.traces._normalized import NormalizedSpan
from evaltrace.collector.traces._pair_calls import usable_id
from evaltrace.collector.traces._provider import stop_reason
from evaltrace.collector.traces._spanutil import error_type, ns_to_datetime
from evaltrace.collector.traces.records import Iteration, ToolCall, Trace, TraceStatus, Usage

_ITERATION = RecordFactory(Iteration)
assert _ITERATION.names == (
    *("index", "span_id", "model", "provider", "input_messages", "output_messages", "tool_calls"),
    *("finish_reasons", "usage", "start_time", "end_time", "error"),
    *("stop_reason", "merged_span_ids", "duplicate_call_ids"),
)  # `iteration`'s order
_TRACE = RecordFactory(Trace)


def new_trace(tops: list[Span], heads: list[NormalizedSpan], placeholders: set[str], values: dict[str, Any]) -> Trace:
    """The trace of `tops`: what their spans say, and the assembled `values`.

    Built once, every field at hand: each later attribute assignment would cost a pydantic
    `__setattr__`. The containers in `values` are the assembly's own (none is shared).
    """
    first = tops[0]
    first_agent = heads[0].agent.name if heads[0].agent else None
    handoffs = [agent_name(head) for head in heads[1:]]
    values.update(
        trace_id=first.trace_id,
        root_span_id=first.span_id if first.span_id not in placeholders else None,
        name=first.name,
        agent_name=first_agent,
        start_time=ns_to_datetime(first.start_time_ns),
        end_time=ns_to_datetime(max(top.end_time_ns for top in tops)),
        run_id=first.run_id,
        service_name=first.service_name,
        handoffs=handoffs,
    )
    # As for iterations: texts read from attributes go through validation unless they are text.
    texts = (values["input"], values["output"], values["error"], values["conversation_id"], values["convention"])
    if type(first.trace_id) is str and texts_or_none(first.span_id, first.name, first_agent, first.run_id, *texts):
        if texts_or_none(first.service_name, *handoffs):
            return _TRACE.build(**values)
    return Trace(**values)


def agent_name(normalized: NormalizedSpan) -> str:
    """The agent's name, else its span's."""
    return (normalized.agent.name if normalized.agent else None) or normalized.span.name


def iteration(index: int, normalized: NormalizedSpan, histories: bool) -> Iteration:
    """The iteration of a model-call span (its prompt only with `histories`)."""
    llm = normalized.llm
    assert llm is not None
    span = normalized.span
    inputs, outputs = llm.inputs() if histories else None, llm.output_messages
    calls, duplicates = one_per_call_id(llm.tool_calls)
    reason = stop_reason(llm.finish_reasons) if texts_or_none(*llm.finish_reasons) else None
    values = (  # in `Iteration`'s field order
        index,
        span.span_id,
        llm.model,
        llm.provider,
        None if inputs is None else list(inputs),
        None if outputs is None else list(outputs),
        # Placeholders: `_tool_calls` replaces them with the merged calls (copies, iteration set).
        calls,
        list(llm.finish_reasons),
        llm.usage,
        ns_to_datetime(span.start_time_ns),
        ns_to_datetime(span.end_time_ns),
        normalized.error,
        reason,
        list(llm.merged_span_ids),
        duplicates,
    )
    # The texts come from recorded attributes: one that is not text (a hostile file's) is left to
    # validation, which converts or rejects it as it always did. The converter made the rest.
    if texts_or_none(llm.model, llm.provider, normalized.error) and texts_or_none(*llm.finish_reasons, *duplicates):
        return _ITERATION.make(*values)
    return Iteration(**dict(zip(_ITERATION.names, values, strict=True)))


def one_per_call_id(calls: list[ToolCall]) -> tuple[list[ToolCall], list[str]]:
    """A reply's calls with each call id once, and the ids recorded more than once.

    One span may record one call twice, in two attribute families (OpenInference's Anthropic
    instrumentation writes each `tool_use` under `message.tool_calls` and `message.contents`):
    the same call id twice in one reply is one call, whose first record is kept (its arguments
    taken from the second when the first has none). Calls without a usable id are all kept.
    """
    kept: list[ToolCall] = []
    by_id: dict[str, int] = {}
    duplicates: list[str] = []
    for call in calls:
        key = usable_id(call.call_id)
        if key is None or key not in by_id:
            if key is not None:
                by_id[key] = len(kept)
            kept.append(call)
            continue
        if key not in duplicates:
            duplicates.append(key)
        first = kept[by_id[key]]
        if first.arguments is None and call.arguments is not None:
            kept[by_id[key]] = call
    return kept, duplicates


def outcome(heads: list[NormalizedSpan], iterations: list[Iteration], llms: list[NormalizedSpan]) -> dict[str, Any]:
    """Input from the first agent, output from the last (a handoff chain), the error of the last that failed."""
    first, last = heads[0].agent, heads[-1].agent
    reply = iterations[-1].output_text if iterations else None
    output = last.output if last and last.output is not None else reply
    if reply is not None and output is not None and output.strip() == reply.strip():
        # The agent span re-renders the last reply (Strands' `str(AgentResult)` ends each text block
        # with a newline): the model's own words are the answer.
        output = reply
    failed = [head for head in heads if head.error is not None]
    outcome = failed[-1] if failed else heads[-1]
    return {
        "input": first.input if first and first.input is not None else _first_user_text(llms),
        "output": output,
        "error": outcome.error,
        "usage": Usage.combined(it.usage for it in iterations),
        "models": list(dict.fromkeys(it.model for it in iterations if it.model)),
        "status": status(outcome),
    }


def _first_user_text(llms: list[NormalizedSpan]) -> str | None:
    for normalized in llms[:1]:
        for message in reversed(prompt_of(normalized) or []):
            if message.role == "user" and message.text is not None:
                return message.text
    return None


def status(head: NormalizedSpan) -> TraceStatus:
    """`success`, or the kind of failure the span's error names (`timeout` or `error`)."""
    if head.error is None:
        return "success"
    kind = (error_type(head.span) or "") + " " + head.error
    return "timeout" if "timeout" in kind.lower() or "timedout" in kind.lower() else "error"
