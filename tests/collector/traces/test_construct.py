"""Records the converter builds without validation (`convert/_construct.py`) equal validated ones.

Each golden scenario is recorded with the real OTel SDK, written to Parquet, read back and
converted twice: as shipped (records from `RecordFactory`), and with every factory of the
converter's modules swapped for one that validates (`Model(**values)`). The traces must be equal,
dump to the same JSON, hold values of the same types, and every list or dict a record holds must be
its own (validation copies them), never shared with another record or a cache.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from genai_scenarios import old_events_no_agent, parallel_nested, sequential, unfinished_parent
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call
from pydantic import BaseModel

import evaltrace.collector.traces as convert_package
from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _genai_messages
from evaltrace.collector.traces._construct import RecordFactory
from evaltrace.collector.traces._fields import iteration
from evaltrace.collector.traces._normalized import LlmCall, NormalizedSpan, ToolExec
from evaltrace.collector.traces._pair_calls import ToolSpan, merge
from evaltrace.collector.traces._spanutil import usage
from evaltrace.collector.traces.rebuild import read_traces
from evaltrace.collector.traces.records import Iteration, Message, ToolCall, Trace, Usage

SCENARIOS: dict[str, Callable[[Recorder], None]] = {
    "sequential": sequential,
    "parallel_nested": parallel_nested,
    "old_events_no_agent": old_events_no_agent,
    "unfinished_parent": unfinished_parent,
}


class _Validating:
    """A `RecordFactory` stand-in that builds through validation."""

    def __init__(self, factory: RecordFactory[Any]) -> None:
        self.model, self.names = factory.model, factory.names

    def make(self, *values: Any) -> Any:
        return self.model(**dict(zip(self.names, values, strict=True)))

    def build(self, **values: Any) -> Any:
        return self.model(**values)

    def build_all(self, columns: dict[str, list[Any]]) -> list[Any]:
        return [self.make(*row) for row in zip(*(columns[name] for name in self.names), strict=True)]


def _factories() -> Iterator[tuple[Any, str, RecordFactory[Any]]]:
    for info in pkgutil.walk_packages(convert_package.__path__, convert_package.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, RecordFactory):
                yield module, name, value


@pytest.fixture
def validating(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to make every converter factory validate, for the rest of the test."""

    def swap() -> None:
        found = list(_factories())
        assert len(found) >= 5  # messages, parts, calls, iterations, traces, usage: the cold path's
        for module, name, factory in found:
            monkeypatch.setattr(module, name, _Validating(factory))
        # Remembered messages (built either way) must not leak from one conversion into the other.
        monkeypatch.setattr(_genai_messages, "_recent", [])

    return swap


def _record(scenario: Callable[[Recorder], None], folder: Path) -> Path:
    rec = Recorder(folder)
    scenario(rec)
    rec.close()
    return folder


def _records(value: Any) -> Iterator[BaseModel]:
    """Every record reachable from `value` (each distinct one once)."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseModel):
            if id(item) in seen:
                continue
            seen.add(id(item))
            yield item
            stack.extend(item.__dict__.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def _shape(value: Any) -> Any:
    """`value` with every leaf replaced by (type, value): equal shapes mean equal values of equal types."""
    if isinstance(value, BaseModel):
        return (type(value).__name__, {k: _shape(v) for k, v in value.__dict__.items()})
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    return (type(value).__name__, value)


def _declared_containers(record: BaseModel) -> Iterator[Any]:
    """The record's values of fields declared as lists or dicts (not `Any`, which holds recorded JSON as is)."""
    for name, info in type(record).model_fields.items():
        value = record.__dict__[name]
        if isinstance(value, (list, dict)) and info.annotation is not Any:
            yield value


def _assert_own_containers(traces: list[Trace]) -> None:
    # The parsed-message cache's lists count as owned: a record holding one would change with it.
    owners = {id(messages): "the message cache" for _, messages in _genai_messages._recent}
    for record in _records(traces):
        for container in _declared_containers(record):
            assert id(container) not in owners, (
                f"{type(record).__name__} shares a container with {owners[id(container)]}"
            )
            owners[id(container)] = type(record).__name__


@pytest.mark.parametrize("histories", [True, False])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_records_built_without_validation_equal_validated_ones(
    scenario: str, histories: bool, tmp_path: Path, validating: Callable[[], None]
) -> None:
    folder = _record(SCENARIOS[scenario], tmp_path)
    fast = list(read_traces(resolve_paths([folder]), histories=histories))
    _assert_own_containers(fast)
    validating()
    slow = list(read_traces(resolve_paths([folder]), histories=histories))
    assert fast and fast == slow
    assert [t.model_dump_json() for t in fast] == [t.model_dump_json() for t in slow]
    assert _shape(fast) == _shape(slow)
    assert any(isinstance(r, Iteration) for r in _records(fast))


def test_peer_shaped_trace_equals_its_validated_build(tmp_path: Path, validating: Callable[[], None]) -> None:
    """An agent with parallel tool calls whose spans record arguments and results (the benchmark's shape)."""
    rec = Recorder(tmp_path)
    calls = [tool_call("c-1", "get_weather", {"city": "Paris"}), tool_call("c-2", "search", {"q": "x", "n": 2})]
    with rec.span("invoke_agent planner", agent_attrs("planner", **{"gen_ai.conversation.id": "conv-1"})):
        chat(rec, "gpt-x", messages(("user", [text("Plan")])), messages(("assistant", calls)), (10, 5), "tool_call")
        with rec.span("execute_tool get_weather", tool_attrs("get_weather", "c-1", '{"city": "Paris"}', '{"t": 18}')):
            rec.tick(2)
        with rec.span("execute_tool search", tool_attrs("search", "c-2", '{"q": "x", "n": 2}', "[1, 2]")):
            rec.tick(2)
        chat(rec, "gpt-x", None, messages(("assistant", [text("Done.")])), (20, 3))
    rec.close()
    fast = list(read_traces(resolve_paths([tmp_path]), histories=False))
    _assert_own_containers(fast)
    validating()
    slow = list(read_traces(resolve_paths([tmp_path]), histories=False))
    assert fast == slow and _shape(fast) == _shape(slow)
    assert [c.result for c in fast[0].tool_calls] == [{"t": 18}, [1, 2]]
    assert fast[0].usage == Usage(input_tokens=30, output_tokens=8)


def test_a_value_that_is_not_text_is_left_to_validation(tmp_path: Path) -> None:
    """A tool call named by a number (a hostile file): validation rejects the span's messages as before."""
    rec = Recorder(tmp_path)
    reply = json.dumps([{"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": 5}]}])
    with rec.span("invoke_agent a", agent_attrs("a")):
        chat(rec, "gpt-x", None, reply, (1, 1))
    rec.close()
    (trace,) = read_traces(resolve_paths([tmp_path]))
    assert trace.iterations == []  # the span failed its extractor and was ignored, with a warning
    assert any("span ignored" in w and "ValidationError" in w for w in trace.warnings)


def test_factory_defaults_are_fresh_and_equal_validation() -> None:
    factory = RecordFactory(Iteration)
    first, second = factory.build(index=0), factory.build(index=1)
    assert first == Iteration(index=0) and first.tool_calls is not second.tool_calls
    assert first.usage == Usage() and first.usage is not second.usage
    assert RecordFactory(Message).build(role="user").parts == []
    when = datetime(2026, 1, 1)
    call = RecordFactory(ToolCall).build(name="f", start_time=when)
    assert call == ToolCall(name="f", start_time=when) and call.model_fields_set == set(ToolCall.model_fields)
    with pytest.raises(TypeError):
        RecordFactory(Iteration).build()  # `index` has no default, as for the model  # type: ignore[call-arg]


class _Name(str):
    """A text of a `str` subclass: validation gives a plain `str` (`_construct` must leave it to validation)."""


class _Count(int):
    """A count of an `int` subclass, as an SDK attribute may hold one."""


def test_values_of_subclasses_are_converted_as_validation_converts_them() -> None:
    span = Span(
        trace_id="t1",
        span_id="s1",
        parent_span_id=None,
        name="chat m",
        kind="CLIENT",
        status_code="UNSET",
        status_message=None,
        start_time_ns=1_767_225_600_000_000_000,
        end_time_ns=1_767_225_601_000_000_000,
    )
    llm = LlmCall(model=_Name("m"), provider="p", finish_reasons=[_Name("stop")], usage=usage(_Count(3), 4))
    built = iteration(0, NormalizedSpan(span=span, role="llm", convention="genai", llm=llm), False)
    times = {"start_time": built.start_time, "end_time": built.end_time}
    assert built.start_time is not None and built.end_time is not None
    assert built == Iteration(
        index=0, span_id="s1", model="m", provider="p", finish_reasons=["stop"], usage=llm.usage, **times
    )
    assert type(built.model) is str and type(built.finish_reasons[0]) is str
    assert llm.usage == Usage(input_tokens=3, output_tokens=4) and type(llm.usage.input_tokens) is int
    tool = NormalizedSpan(
        span=span, role="tool", convention="genai", tool=ToolExec(name=_Name("f"), call_id=_Name("c"))
    )
    call = merge(None, ToolSpan(tool))
    assert (
        type(call.name) is str
        and type(call.call_id) is str
        and call == ToolCall(call_id="c", name="f", span_id="s1", start_time=call.start_time, end_time=call.end_time)
    )
