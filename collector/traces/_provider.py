"""Provider shapes read wherever messages and model calls are read: stop reasons and content blocks.

Instrumentations record what the provider answered in the provider's own words as often as in
the conventions': Anthropic's `stop_reason` (`tool_use`, `end_turn`, `max_tokens`) beside
OpenAI's `finish_reason` (`tool_calls`, `stop`, `length`) and the conventions' (`tool_call`,
`stop`, `length`); Anthropic's content blocks (`text`, `tool_use`, `tool_result` with `is_error`)
beside the conventions' message parts. Each is read here once, by its shape, for every convention.
"""

from __future__ import annotations

from typing import Any

from evaltrace.collector.traces.records import STOP_REASONS

_STOP_REASONS = {
    # the conventions' own values
    "stop": "stop",
    "tool_call": "tool_call",
    "length": "length",
    "content_filter": "content_filter",
    "error": "error",
    # OpenAI (chat completions, Responses' incomplete reasons), Mistral
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "max_output_tokens": "length",
    "model_length": "length",
    # Anthropic, Bedrock
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_call",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "guardrail_intervened": "content_filter",
    "content_filtered": "content_filter",
    # Gemini (upper case on the wire), Cohere
    "complete": "stop",
    "safety": "content_filter",
    "recitation": "content_filter",
    "blocklist": "content_filter",
    "prohibited_content": "content_filter",
    "spii": "content_filter",
    "malformed_function_call": "error",
}
assert set(_STOP_REASONS.values()) == set(STOP_REASONS)  # every provider's word maps to a documented one


def stop_reason(finish_reasons: list[str]) -> str | None:
    """The first recorded finish reason, normalised (`Iteration.stop_reason`); `None` when none was recorded."""
    for reason in finish_reasons:
        text = reason.strip().lower()
        if text:
            return _STOP_REASONS.get(text, text)
    return None


# --- content blocks ---------------------------------------------------------------------------


def is_text_block(value: Any) -> bool:
    """A `{"type": "text", "text": ...}` content block (Anthropic, MCP, OpenAI's content parts)."""
    return isinstance(value, dict) and value.get("type") in ("text", "input_text", "output_text") and "text" in value


def unwrap_blocks(value: Any) -> Any:
    """A tool result given to the model as a list of text blocks, as the text they hold (joined).

    Anthropic's `tool_result` content, MCP's tool results and the Anthropic SDK's recorded
    `tool_call_response` are block lists; the tool returned the text. A list holding any other
    block (an image, a document) is kept as it is.
    """
    if not isinstance(value, list) or not value or not all(is_text_block(block) for block in value):
        return value
    texts = [block["text"] for block in value]
    if not all(isinstance(text, str) for text in texts):
        return value
    return "".join(texts) if len(texts) > 1 else texts[0]


def block_error(block: dict[str, Any], result: Any) -> str | None:
    """The error a `tool_result` block reports (`is_error: true`): the text the model was told."""
    if block.get("is_error") is not True:
        return None
    if isinstance(result, str) and result.strip():
        return result
    return "the tool result is marked is_error"
