"""The records the converter builds most (tool calls, iterations, usage), without re-validation.

A cold rebuild makes about ten of these a trace from values the converter has just made itself:
ids and names it read as text, datetimes it computed, records pydantic already validated.
Validating them again through the model's `__init__` was a tenth of the rebuild. Each builder
here checks every value with exact-type tests (C-speed `type(x) is ...`) and, when all pass,
builds the record as validation would have (the same `__dict__`, in field order, and the same
fields-set); any other value goes through the validating constructor, so an odd value is coerced
or rejected exactly as before. The records are equal either way.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, TypeVar

from pydantic import BaseModel

from evaltrace.collector.convert.records import Iteration, Message, ToolCall, Trace, Usage

M = TypeVar("M", bound=BaseModel)

_new = object.__new__
_set = object.__setattr__

_CALL_FIELDS: Final = (
    "call_id",
    "name",
    "arguments",
    "result",
    "error",
    "iteration",
    "span_id",
    "start_time",
    "end_time",
    "arguments_truncated",
    "child",
    "handoff",
)
_ITERATION_FIELDS: Final = (
    "index",
    "span_id",
    "model",
    "provider",
    "input_messages",
    "output_messages",
    "tool_calls",
    "finish_reasons",
    "usage",
    "start_time",
    "end_time",
    "error",
)
_USAGE_FIELDS: Final = ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens")
_REQUESTED_FIELDS: Final = frozenset(("call_id", "name", "arguments"))


def _check_models() -> None:
    # The builders below spell each model's fields out: fail loudly when records.py changes them.
    for model, names in ((ToolCall, _CALL_FIELDS), (Iteration, _ITERATION_FIELDS), (Usage, _USAGE_FIELDS)):
        if tuple(model.model_fields) != names or model.__pydantic_post_init__ or model.__pydantic_root_model__:
            raise RuntimeError(f"{model.__name__} fields changed: update evaltrace.collector.convert._trusted")


_check_models()


def _record(model: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    """What the model's `__init__` makes of `values` (every field, in field order) once validated."""
    record = _new(model)
    _set(record, "__dict__", values)
    _set(record, "__pydantic_fields_set__", fields_set)
    _set(record, "__pydantic_extra__", None)
    _set(record, "__pydantic_private__", None)
    return record


def _text(value: Any) -> bool:
    return value is None or type(value) is str


def _count(value: Any) -> bool:
    return value is None or type(value) is int


def _time(value: Any) -> bool:
    return value is None or type(value) is datetime


def usage(
    input_tokens: int | None, output_tokens: int | None, cache_read_tokens: int | None, reasoning_tokens: int | None
) -> Usage:
    """`Usage(...)` with all four counts given."""
    if _count(input_tokens) and _count(output_tokens) and _count(cache_read_tokens) and _count(reasoning_tokens):
        values = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_tokens": cache_read_tokens,
            "reasoning_tokens": reasoning_tokens,
        }
        return _record(Usage, values, set(_USAGE_FIELDS))
    return Usage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        reasoning_tokens=reasoning_tokens,
    )


def requested_call(call_id: str | None, name: str, arguments: Any) -> ToolCall:
    """`ToolCall(call_id=..., name=..., arguments=...)`: a call as a model's reply requests it."""
    if _text(call_id) and type(name) is str:
        values = dict.fromkeys(_CALL_FIELDS)
        values.update(call_id=call_id, name=name, arguments=arguments, arguments_truncated=False, handoff=False)
        return _record(ToolCall, values, set(_REQUESTED_FIELDS))
    return ToolCall(call_id=call_id, name=name, arguments=arguments)


def tool_call(**values: Any) -> ToolCall:
    """`ToolCall(**values)` with every field given (keywords in any order)."""
    ordered = {name: values[name] for name in _CALL_FIELDS}  # a missing field is a bug: KeyError
    child = ordered["child"]
    if (
        len(values) == len(_CALL_FIELDS)
        and _text(ordered["call_id"])
        and type(ordered["name"]) is str
        and _text(ordered["error"])
        and _count(ordered["iteration"])
        and _text(ordered["span_id"])
        and _time(ordered["start_time"])
        and _time(ordered["end_time"])
        and type(ordered["arguments_truncated"]) is bool
        and (child is None or type(child) is Trace)
        and type(ordered["handoff"]) is bool
    ):
        return _record(ToolCall, ordered, set(_CALL_FIELDS))
    return ToolCall(**values)


def _messages(value: Any) -> bool:
    return value is None or (type(value) is list and all(type(m) is Message for m in value))


def iteration(**values: Any) -> Iteration:
    """`Iteration(**values)` with every field given (keywords in any order); lists are copied, as validation does."""
    ordered = {name: values[name] for name in _ITERATION_FIELDS}  # a missing field is a bug: KeyError
    calls, reasons = ordered["tool_calls"], ordered["finish_reasons"]
    if (
        len(values) == len(_ITERATION_FIELDS)
        and type(ordered["index"]) is int
        and _text(ordered["span_id"])
        and _text(ordered["model"])
        and _text(ordered["provider"])
        and _messages(ordered["input_messages"])
        and _messages(ordered["output_messages"])
        and type(calls) is list
        and all(type(c) is ToolCall for c in calls)
        and type(reasons) is list
        and all(type(r) is str for r in reasons)
        and type(ordered["usage"]) is Usage
        and _time(ordered["start_time"])
        and _time(ordered["end_time"])
        and _text(ordered["error"])
    ):
        for name in ("input_messages", "output_messages", "tool_calls", "finish_reasons"):
            if ordered[name] is not None:
                ordered[name] = list(ordered[name])
        return _record(Iteration, ordered, set(_ITERATION_FIELDS))
    return Iteration(**values)
