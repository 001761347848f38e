"""One model call, one iteration: an LLM span that only prepared the call described by the next one.

Some instrumentations open two model-kind spans for one request. OpenInference's LlamaIndex
instrumentation records `OpenAI._prepare_chat_with_tools` (building the request: no reply, no
usage, no finish reason) and then `OpenAI.chat` / `astream_chat` (the request itself) as two
sibling `LLM` spans. Counted as two iterations, every model call would count twice. The rule is
structural: a model-kind span that records nothing of a reply, ended before its next sibling
model-kind span started, and is followed by one that does record a reply, is the same call's
preparation. A failed model call (an error, even with no reply) is always its own iteration.
"""

from __future__ import annotations

from evaltrace.collector.convert._normalized import NormalizedSpan
from evaltrace.collector.convert.records import Usage


def one_per_model_call(llms: list[NormalizedSpan]) -> list[NormalizedSpan]:
    """The model-call spans of one scope (in start order), each model call once."""
    kept: list[NormalizedSpan] = []
    for position, normalized in enumerate(llms):
        following = llms[position + 1] if position + 1 < len(llms) else None
        if following is not None and _prepares(normalized, following):
            continue
        kept.append(normalized)
    return kept


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
