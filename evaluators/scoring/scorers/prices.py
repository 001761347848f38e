"""A default price table for the `cost` scorer: an estimate, not a bill.

Prices are USD per million tokens, list prices of the providers' standard (non-batch) APIs as
published in 2025; they change, and discounts, batch rates, long-context tiers and regional
pricing are not modelled. Override or extend them with the `cost` scorer's `prices` option.

A model name matches a table entry exactly, else by the longest entry that is a prefix of it
followed by `-` or `@` (so `gpt-4o-mini-2024-07-18` uses `gpt-4o-mini`, not `gpt-4o`); a
provider prefix such as `openai/` is ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field


class TokenCounts(Protocol):
    """What `call_cost` reads of a model call's usage: a `Usage` record, or a table row's values."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None


class ModelPrice(BaseModel):
    """Price of one model, USD per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    input_per_mtok: float = Field(ge=0.0)
    """Price of a million input tokens."""
    output_per_mtok: float = Field(ge=0.0)
    """Price of a million output tokens."""
    cached_input_per_mtok: float | None = Field(default=None, ge=0.0)
    """Price of a million input tokens read from the prompt cache (default: the input price)."""


def _p(inp: float, out: float, cached: float | None = None) -> ModelPrice:
    return ModelPrice(input_per_mtok=inp, output_per_mtok=out, cached_input_per_mtok=cached)


DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "gpt-4o": _p(2.50, 10.00, 1.25),
    "gpt-4o-mini": _p(0.15, 0.60, 0.075),
    "gpt-4.1": _p(2.00, 8.00, 0.50),
    "gpt-4.1-mini": _p(0.40, 1.60, 0.10),
    "gpt-4.1-nano": _p(0.10, 0.40, 0.025),
    "gpt-5": _p(1.25, 10.00, 0.125),
    "gpt-5-mini": _p(0.25, 2.00, 0.025),
    "gpt-5-nano": _p(0.05, 0.40, 0.005),
    "o3": _p(2.00, 8.00, 0.50),
    "o4-mini": _p(1.10, 4.40, 0.275),
    "claude-3-5-haiku": _p(0.80, 4.00, 0.08),
    "claude-3-5-sonnet": _p(3.00, 15.00, 0.30),
    "claude-3-7-sonnet": _p(3.00, 15.00, 0.30),
    "claude-sonnet-4": _p(3.00, 15.00, 0.30),
    "claude-sonnet-4-5": _p(3.00, 15.00, 0.30),
    "claude-haiku-4-5": _p(1.00, 5.00, 0.10),
    "claude-opus-4": _p(15.00, 75.00, 1.50),
    "gemini-2.0-flash": _p(0.10, 0.40, 0.025),
    "gemini-2.5-flash": _p(0.30, 2.50, 0.075),
    "gemini-2.5-pro": _p(1.25, 10.00, 0.31),
}
"""Built-in estimates (USD per million tokens)."""


def find_price(model: str, prices: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price entry for `model` (exact, then longest `name-` prefix), or `None`."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    table = {k.lower(): v for k, v in prices.items()}
    if name in table:
        return table[name]
    prefixes = [k for k in table if name.startswith(k) and name[len(k)] in "-@"]
    return table[max(prefixes, key=len)] if prefixes else None


def call_cost(usage: TokenCounts, price: ModelPrice) -> float:
    """Estimated USD of one model call: uncached input, cache reads and output, each at its price.

    The one formula for both the report's run cost and the `cost` scorer. `Usage` counts cache
    reads as part of `input_tokens`, as the OTel GenAI conventions, OpenInference and OpenAI
    report them (OpenAI's `cached_tokens` is a subset of `prompt_tokens`). Anthropic's API
    reports them apart (`input_tokens` excludes `cache_read_input_tokens`), and an
    instrumentation that passes both counts through unchanged records more cache reads than
    input tokens: a subset cannot exceed its whole, so the input count is then taken as the
    uncached part and the cache reads are priced on top, rather than clipped to the input count
    (an undercount) or subtracted into a negative number.
    """
    inputs = usage.input_tokens or 0
    cached = usage.cache_read_tokens or 0
    uncached = inputs - cached if cached <= inputs else inputs
    cached_price = price.input_per_mtok if price.cached_input_per_mtok is None else price.cached_input_per_mtok
    outputs = usage.output_tokens or 0
    return (uncached * price.input_per_mtok + cached * cached_price + outputs * price.output_per_mtok) / 1_000_000
