"""One model call, one iteration: spans that describe the same model call are read as one.

Some instrumentations open two model-kind spans for one request:

- A span that only prepared the call described by the next one. OpenInference's LlamaIndex
  instrumentation records `OpenAI._prepare_chat_with_tools` (building the request: no reply, no
  usage, no finish reason) and then `OpenAI.chat` / `astream_chat` (the request itself) as two
  sibling `LLM` spans. A model-kind span that records nothing of a reply, ended before its next
  sibling model-kind span started, and is followed by one that does record a reply, is the same
  call's preparation: set aside. A failed model call (an error, even with no reply) is always its
  own iteration.
- Two instrumentations of one request, side by side. An SDK that writes its own span beside an
  instrumentation's (the Anthropic SDK beside OpenLLMetry's `anthropic.chat`) gives two sibling
  spans of one call. Two model-kind spans are the same call when they record the same response id
  (`gen_ai.response.id`); without one on both, when two instrumentations (two scopes) recorded
  them, one's time window holds the other's and they report the same token counts.
- Two instrumentations of one request, one inside the other (OpenInference's `messages.create`
  around the SDK's own span): the outer span is the iteration (`_assemble` never takes a model
  call inside another as one).

Either way the first span (the outer one) is the iteration, its usage counted once; what it left
unrecorded (the stop reason, the usage, the reply) is taken from the other, and the other's id is
kept in `Iteration.merged_span_ids`.
"""

from __future__ import annotations

from dataclasses import replace

from evaltrace.collector.traces._normalized import LlmCall, NormalizedSpan
from evaltrace.collector.traces.records import Usage


def one_per_model_call(
    llms: list[NormalizedSpan], nested: dict[str, list[NormalizedSpan]] | None = None
) -> list[NormalizedSpan]:
    """The model-call spans of one scope (in start order), each model call once.

    `nested` maps a model-call span's id to the model-kind spans inside it (other instrumentations of it).
    """
    kept: list[NormalizedSpan] = []
    by_response: dict[str, int] = {}
    for position, normalized in enumerate(llms):
        following = llms[position + 1] if position + 1 < len(llms) else None
        if following is not None and _prepares(normalized, following):
            continue
        partner = _partner(kept, by_response, normalized)
        if partner is None:
            partner = len(kept)
            kept.append(normalized)
        else:
            kept[partner] = merged(kept[partner], normalized)
        llm = kept[partner].llm
        response_id = llm.response_id if llm is not None else None
        if response_id is not None:
            by_response.setdefault(response_id, partner)
    if nested:
        kept = [_with_nested(normalized, nested.get(normalized.span.span_id, ())) for normalized in kept]
    return kept


_RECENT = 8
"""How many of the latest model calls a span without a shared response id is compared with: the two
spans of one call start together, while a long run has hundreds of calls."""


def _partner(kept: list[NormalizedSpan], by_response: dict[str, int], normalized: NormalizedSpan) -> int | None:
    """The kept model call `normalized` is another span of, if any."""
    response_id = normalized.llm.response_id if normalized.llm is not None else None
    if response_id is not None and response_id in by_response:
        return by_response[response_id]
    start = max(0, len(kept) - _RECENT)
    return next((k for k in range(len(kept) - 1, start - 1, -1) if same_model_call(kept[k], normalized)), None)


def _with_nested(outer: NormalizedSpan, inside: list[NormalizedSpan] | tuple[()]) -> NormalizedSpan:
    """`outer` with what the model-kind spans inside it add; only one of them, or one of its response id, fills in."""
    assert outer.llm is not None
    if not inside:
        return outer
    same_id = [n for n in inside if n.llm is not None and n.llm.response_id == outer.llm.response_id is not None]
    sources = same_id or (list(inside) if len(inside) == 1 else [])
    result = outer
    for other in sources:
        result = merged(result, other)
    rest = [n.span.span_id for n in inside if n not in sources]
    if rest:
        assert result.llm is not None
        result = replace(result, llm=replace(result.llm, merged_span_ids=[*result.llm.merged_span_ids, *rest]))
    return result


def same_model_call(first: NormalizedSpan, second: NormalizedSpan) -> bool:
    """Whether two model-kind spans of one scope (`first` started first) describe one model call."""
    a, b = first.llm, second.llm
    if a is None or b is None:
        return False
    if a.response_id is not None and b.response_id is not None:
        return a.response_id == b.response_id
    if first.span.scope_name == second.span.scope_name:
        return False  # one instrumentation's two spans are two calls (parallel calls overlap too)
    if _told_apart(a, b):
        return False  # parallel calls of two clients (each instrumented once) can match in window and usage
    holds = first.span.start_time_ns <= second.span.start_time_ns and second.span.end_time_ns <= first.span.end_time_ns
    counted = a.usage.input_tokens is not None and a.usage.output_tokens is not None
    return (
        holds
        and counted
        and (a.usage.input_tokens, a.usage.output_tokens)
        == (
            b.usage.input_tokens,
            b.usage.output_tokens,
        )
    )


def _told_apart(a: LlmCall, b: LlmCall) -> bool:
    """Whether what both spans recorded shows two calls: other models, or other requested call ids.

    A model named with and without its version or route (`gpt-4o`, `openai/gpt-4o-2024-08-06`) is one model.
    """
    if a.model and b.model:
        model_a, model_b = a.model.lower(), b.model.lower()
        if model_a not in model_b and model_b not in model_a:
            return True
    ids_a = {call.call_id for call in a.tool_calls if call.call_id}
    ids_b = {call.call_id for call in b.tool_calls if call.call_id}
    return bool(ids_a and ids_b and ids_a != ids_b)


def merged(kept: NormalizedSpan, other: NormalizedSpan) -> NormalizedSpan:
    """`kept` (the iteration) with what it left unrecorded taken from `other`, the same call's other span."""
    a, b = kept.llm, other.llm
    assert a is not None and b is not None
    fills: dict[str, object] = {"merged_span_ids": [*a.merged_span_ids, other.span.span_id, *b.merged_span_ids]}
    for name in ("model", "provider", "response_id", "output_messages"):
        if getattr(a, name) is None and getattr(b, name) is not None:
            fills[name] = getattr(b, name)
    if a.input_messages is None and a.input_loader is None:
        fills.update(input_messages=b.input_messages, input_loader=b.input_loader)
    if not a.tool_calls and a.output_messages is None:
        fills["tool_calls"] = b.tool_calls
    for name in ("finish_reasons", "tool_schemas"):
        if not getattr(a, name):
            fills[name] = getattr(b, name)
    if a.usage == _NO_USAGE:
        fills["usage"] = b.usage
    llm: LlmCall = replace(a, **fills)  # type: ignore[arg-type]
    return replace(kept, llm=llm, error=kept.error or other.error)


def _prepares(first: NormalizedSpan, following: NormalizedSpan) -> bool:
    return (
        first.error is None
        and first.span.parent_span_id == following.span.parent_span_id
        and first.span.end_time_ns <= following.span.start_time_ns
        and not records_reply(first)
        and records_reply(following)
    )


def records_reply(normalized: NormalizedSpan) -> bool:
    """Whether a model-kind span says anything of a model's reply: content, calls, usage or finish."""
    llm = normalized.llm
    if llm is None:
        return False
    replied = any(message.parts for message in llm.output_messages or [])
    return replied or bool(llm.tool_calls) or bool(llm.finish_reasons) or llm.usage != _NO_USAGE


_NO_USAGE = Usage()  # compared with, never handed out
