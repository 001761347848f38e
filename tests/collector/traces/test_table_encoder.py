"""The traces table's encoder: its shortcuts (JSON texts remembered by object, columns built as lists) change nothing.

The round trips of every record shape are in `test_traces_table.py`; these hold the shortcuts'
own hazards: objects shared between traces, ids reused by new objects, batches taken midway.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces._table_encode import to_json
from evaltrace.collector.traces.records import Iteration, Message, MessagePart, ToolCall, ToolSchema, Trace
from evaltrace.collector.traces.table import SCHEMA, TableEncoder, comparable_text, from_table, to_table


def _parameters() -> dict[str, Any]:
    return {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _trace(number: int, parameters: dict[str, Any], history: list[Message]) -> Trace:
    call = ToolCall(call_id=f"c{number}", name="weather", arguments={"city": f"city {number}"}, result=[number, 0.5])
    said = Message(role="assistant", parts=[MessagePart(type="tool_call", call_id=call.call_id, arguments={"n": 1})])
    return Trace(
        trace_id=f"t{number}",
        tool_calls=[call],
        tool_schemas=[ToolSchema(name="weather", parameters=parameters)],
        iterations=[
            Iteration(index=0, input_messages=history, output_messages=[said], tool_calls=[call]),
            Iteration(index=1, input_messages=[*history, said], tool_calls=[]),
        ],
    )


def _history() -> list[Message]:
    return [Message(role="user", parts=[MessagePart(type="text", text="hi", arguments={"k": [1, None, True]})])]


def test_objects_shared_between_traces_encode_as_copies_do() -> None:
    # As the converter does: the same parameters and history objects in every trace.
    parameters, history = _parameters(), _history()
    shared = to_table([_trace(number, parameters, history) for number in range(5)])
    copies = to_table([_trace(number, _parameters(), _history()) for number in range(5)])
    assert shared.equals(copies)
    assert from_table(shared) == [_trace(number, _parameters(), _history()) for number in range(5)]


def test_a_new_object_at_a_freed_objects_id_gets_its_own_text() -> None:
    # Each trace and its values are dropped once added: CPython hands their memory (their ids)
    # to the next trace's objects, whose texts differ.
    encoder = TableEncoder()
    for number in range(40):
        encoder.add(_trace(number, {"number": number}, [Message(role="user", parts=[MessagePart(type="text")])]))
    column = encoder.take().column(SCHEMA.get_field_index("tool_schemas")).to_pylist()
    assert [row[0]["parameters_json"] for row in column] == [f'{{"number":{number}}}' for number in range(40)]


def test_batches_taken_midway_hold_the_same_rows() -> None:
    parameters, history = _parameters(), _history()
    traces = [_trace(number, parameters, history) for number in range(7)]
    encoder = TableEncoder()
    batches = []
    for trace in traces:
        encoder.add(trace)
        if encoder.pending >= 3:
            batches.append(encoder.take())
    batches.append(encoder.take())
    assert [batch.num_rows for batch in batches] == [3, 3, 1]
    assert pa.Table.from_batches(batches, schema=SCHEMA).equals(to_table(traces))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(st.characters(codec="utf-8")),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4) | st.integers() | st.floats(allow_nan=False), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_json_texts_are_json_dumps_compact_texts(value: Any) -> None:
    expected = None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    assert to_json(value) == expected


def test_not_a_json_value_raises() -> None:
    for value in ({1, 2}, {"x": object()}, [math.inf, b"bytes"]):
        try:
            to_json(value)
        except TypeError:
            continue
        raise AssertionError(f"{value!r} was encoded")


class _Object(dict[str, Any]):
    """A JSON object that can be weakly referenced."""


def test_a_value_that_failed_leaves_nothing_behind() -> None:
    # One encoder serves every value: what was open when one failed is neither kept alive nor in the
    # way of the next value, and a real cycle is still refused.
    failed = _Object(x=math.nan)
    alive = weakref.ref(failed)
    for _ in range(2):  # the second time too: not taken for a cycle
        with pytest.raises(ValueError, match="Out of range"):
            comparable_text([[failed]])
    del failed
    assert alive() is None
    assert comparable_text([[{"x": 1}]]) == '[[{"x":1}]]'
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular"):
        to_json(cycle)


class _PausingDict(dict[str, Any]):
    """A mapping whose encoding waits, mid-value, for the other thread to be inside the same value."""

    barrier = threading.Barrier(2, timeout=10)

    def items(self) -> Any:  # the C encoder asks a dict subclass for its items
        self.barrier.wait()
        return super().items()


def test_two_threads_encode_one_shared_value_at_once() -> None:
    # Scorers compare texts on the time limit's helper thread, and one past its limit is abandoned still
    # running while the next call runs: with one circular-check dict between them, the shared list's
    # id, open in one thread, would be taken for a cycle in the other.
    shared = [_PausingDict(city="Paris"), 1]
    texts: list[str] = []
    errors: list[BaseException] = []

    def encode() -> None:
        try:
            texts.append(comparable_text(shared))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=encode) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert errors == []
    assert texts == ['[{"city":"Paris"},1]'] * 2
