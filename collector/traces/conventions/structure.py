"""Structure without content: what `gen_ai.operation.name` and its sibling attributes say.

With content capture off (the GenAI default), spans still say what they are: an inference call
with its model, token counts and finish reasons; a tool execution with its name and call id; an
agent run with its name. That is enough to rebuild iterations, the tool calls made and usage, so
this extractor is the last in the detection order and the base the GenAI extractors fill in.

A span counts as an inference call when `gen_ai.operation.name` is `chat`, `generate_content` or
`text_completion`, or, for emitters predating that attribute, when it has `gen_ai.system` and
`gen_ai.request.model` and no other operation.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _attributes as A
from evaltrace.collector.traces._lenient_json import json_list
from evaltrace.collector.traces._normalized import AgentRun, LlmCall, NormalizedSpan, SpanRole, ToolExec
from evaltrace.collector.traces._spanutil import as_str, first_attr, genai_usage, span_error

CONVENTION = "structure"
# `base` and `llm_structure` build these positionally: fail loudly if their fields move.
assert [f.name for f in fields(NormalizedSpan)][:8] == [
    *("span", "role", "convention", "llm", "tool", "agent", "conversation_id", "error"),
]
assert [f.name for f in fields(LlmCall)][:7] == [
    *("model", "provider", "input_messages", "output_messages", "tool_calls", "usage", "finish_reasons"),
]
_CONVERSATION_KEYS = frozenset(A.CONVERSATION_KEYS)


def genai_role(span: Span) -> SpanRole | None:
    """The role `gen_ai.operation.name` (or the older model attributes) give the span, if any."""
    attrs = span.attributes
    operation = as_str(attrs.get(A.OPERATION_NAME))
    if operation in A.LLM_OPERATIONS:
        return "llm"
    if operation == A.TOOL_OPERATION:
        return "other" if as_str(attrs.get(A.TOOL_NAME)) in A.RESTATED_TOOL_NAMES else "tool"
    if operation in A.AGENT_OPERATIONS:
        return "agent"
    if operation is not None:
        return "other"
    if attrs.get(A.SYSTEM) is not None and attrs.get(A.REQUEST_MODEL) is not None:
        return "llm"
    return None


def base(span: Span, role: SpanRole, convention: str = CONVENTION) -> NormalizedSpan:
    """A `NormalizedSpan` with the structural fields of `role` filled in, content left `None`."""
    attrs = span.attributes
    llm, tool, agent = None, None, None
    if role == "llm":
        llm = llm_structure(attrs)
    elif role == "tool":
        tool = ToolExec(
            name=as_str(attrs.get(A.TOOL_NAME)) or _name_suffix(span.name, A.TOOL_OPERATION) or span.name,
            call_id=as_str(attrs.get(A.TOOL_CALL_ID)),
            description=as_str(attrs.get(A.TOOL_DESCRIPTION)),
        )
    elif role == "agent":
        agent = AgentRun(name=agent_name(span))
    # Positional (every span of every convention comes through here): span, role, convention, the
    # role's part, conversation id, error; `warnings` keeps its default.
    return NormalizedSpan(span, role, convention, llm, tool, agent, _conversation_id(attrs), span_error(span))


def llm_structure(attrs: dict[str, Any]) -> LlmCall:
    """Model, provider, usage and finish reasons of an inference span."""
    model = as_str(attrs.get(A.RESPONSE_MODEL)) or as_str(attrs.get(A.REQUEST_MODEL))
    provider = as_str(first_attr(attrs, (A.PROVIDER_NAME, A.SYSTEM)))
    reasons = finish_reasons(first_attr(attrs, (A.FINISH_REASONS, *A.PROVIDER_STOP_REASONS)))
    # Positional, for every model call: model, provider, no messages yet, no tool calls, usage, finish reasons.
    llm = LlmCall(model, provider, None, None, [], genai_usage(attrs), reasons)
    llm.response_id = as_str(attrs.get(A.RESPONSE_ID))
    return llm


def finish_reasons(value: Any) -> list[str]:
    """Finish reasons from a string array, a JSON-encoded array (MAF) or a single string."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, str):
        parsed = json_list(value)
        return [str(v) for v in parsed] if parsed is not None else [value]
    return []


def agent_name(span: Span) -> str | None:
    """The agent or workflow name: GenAI attributes, pydantic-ai's `agent_name`, else the span name's tail."""
    attrs = span.attributes
    found = as_str(first_attr(attrs, (A.AGENT_NAME, A.WORKFLOW_NAME, A.PYDANTIC_AGENT_NAME)))
    if found:
        return found
    operation = as_str(attrs.get(A.OPERATION_NAME))
    return (_name_suffix(span.name, operation) if operation else None) or span.name or None


def _name_suffix(span_name: str, prefix: str) -> str | None:
    head, _, tail = span_name.partition(" ")
    return tail.strip() or None if head == prefix else None


def _conversation_id(attrs: dict[str, Any]) -> str | None:
    if _CONVERSATION_KEYS.isdisjoint(attrs.keys()):  # most spans: one C-level test instead of a get per key
        return None
    value = first_attr(attrs, A.CONVERSATION_KEYS)
    return str(value) if value is not None and value != "" else None


def extract(span: Span) -> NormalizedSpan | None:
    """Classify a span by `gen_ai.operation.name` alone; `None` when it has no GenAI structure."""
    role = genai_role(span)
    if role is None:
        return None
    return base(span, role)
