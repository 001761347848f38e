"""Builders of `Trace` records for the rule-scorer unit tests (scorers are pure functions of a Trace)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from evaltrace.collector.traces.records import Iteration, ToolCall, ToolSchema, Trace, Usage
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec, compile_spec, parse_spec_text, validate_spec_data

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def call(name: str, arguments: Any = None, **fields: Any) -> ToolCall:
    return ToolCall(name=name, arguments={} if arguments is None else arguments, **fields)


def trace(*calls: ToolCall, **fields: Any) -> Trace:
    fields.setdefault("status", "success")
    return Trace(trace_id="0" * 32, tool_calls=list(calls), **fields)


def iteration(index: int, model: str | None = "gpt-4o", seconds: float | None = None, **usage: int) -> Iteration:
    start = T0 + timedelta(seconds=index * 10)
    end = None if seconds is None else start + timedelta(seconds=seconds)
    return Iteration(index=index, model=model, usage=Usage(**usage), start_time=start, end_time=end)


def schema(name: str, parameters: dict[str, Any] | None = None, description: str | None = None) -> ToolSchema:
    return ToolSchema(name=name, parameters=parameters, description=description)


def load(text: str) -> LoadedSpec:
    """A spec compiled from YAML text, as `load_spec` does from a file named spec.yaml."""
    return compile_spec(validate_spec_data(parse_spec_text(text, "spec.yaml"), "spec.yaml"), "spec.yaml")
