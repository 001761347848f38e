"""The cold rebuild's shortcuts give exactly what the plain code gives.

`_lenient_json._loads` must return `json.loads`'s value or raise its very error; the joined-keys
test must never rule out a key that is there (and must leave keys that are not text to the exact
scan); a rebuild pauses the cyclic GC only while it runs; the GenAI extractors still find flattened
OpenLLMetry keys and `evaltrace.*` attributes wherever they sit among a span's keys.
"""

from __future__ import annotations

import gc
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evaltrace.collector.traces._lenient_json as lenient
import evaltrace.collector.traces._spanutil as spanutil
from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._lenient_json import _loads, parse_json
from evaltrace.collector.traces._spanutil import keys_may_contain
from evaltrace.collector.traces.conventions import openllmetry
from evaltrace.collector.traces.rebuild import convert_trace

TEXTS = [
    "1",
    " 1",
    "1 ",
    '{"a": [1, {"b": 2}]}',
    '{"a":1,"a":2}',
    "[1,2",
    '"unterminated',
    '"x" y',
    "\ufeff[1]",
    "NaN",
    "[1e400]",
    "-0",
    '"\\ud800"',
    "",
    "tru",
    "[" * 5000 + "]" * 5000,
    "[" * 150 + "]" * 150,
    '{"a": "b"}\x0c',
]


def _outcome(parse: Any, text: str) -> tuple[str, str]:
    try:
        return "value", repr(parse(text))
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("text", TEXTS)
def test_loads_gives_json_loads_value_or_error(text: str) -> None:
    assert _outcome(_loads, text) == _outcome(json.loads, text)


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=40),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(),
            lambda c: st.lists(c) | st.dictionaries(st.text(), c),
            max_leaves=10,
        ).map(json.dumps),
    )
)
def test_loads_matches_json_loads_on_any_text(text: str) -> None:
    assert _outcome(_loads, text) == _outcome(json.loads, text)
    # The parse the extractors see: truncation flags and raw text included.
    assert repr(parse_json(text)) == repr(_reference_parse(text))


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.sampled_from(TEXTS),
        st.text(max_size=30),
        st.recursive(st.none() | st.integers() | st.text(max_size=5), lambda c: st.lists(c), max_leaves=8).map(
            lambda v: json.dumps(v) + " "
        ),
        st.recursive(st.integers(), lambda c: st.lists(c, max_size=2), max_leaves=150).map(json.dumps),
    )
)
def test_arguments_and_results_read_as_without_the_quick_path(text: str) -> None:
    warnings: list[str] = []
    quick = (
        spanutil.read_arguments(text, "here"),
        _outcome(lambda t: spanutil.read_content(t, "here", warnings), text),
    )
    saved = lenient.whole_value
    lenient.whole_value = _never_whole
    try:
        slow_warnings: list[str] = []
        slow = (
            spanutil.read_arguments(text, "here"),
            _outcome(lambda t: spanutil.read_content(t, "here", slow_warnings), text),
        )
    finally:
        lenient.whole_value = saved
    assert repr(quick) == repr(slow) and warnings == slow_warnings
    whole, value = lenient.whole_value(text)
    if whole:
        assert parse_json(text).parsed and repr(parse_json(text).value) == repr(value)


def _never_whole(text: str) -> tuple[bool, Any]:
    return False, None


def _reference_parse(text: str) -> Any:
    # `parse_json` with `json.loads` itself (no fixture: hypothesis runs this many times per test).
    saved = lenient._loads
    lenient._loads = _json_loads
    try:
        return parse_json(text)
    finally:
        lenient._loads = saved


def _json_loads(text: str) -> Any:
    return json.loads(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=20), max_size=8), st.sampled_from(["evaltrace.", "gen_ai.prompt.", "a\nb"]))
def test_joined_keys_never_rule_out_a_key_that_holds_the_fragment(keys: list[str], fragment: str) -> None:
    attributes = dict.fromkeys(keys, 1)
    if any(fragment in key for key in keys):
        assert keys_may_contain(attributes, fragment)


def test_joined_keys_rule_out_and_leave_odd_keys_to_the_exact_scan() -> None:
    assert not keys_may_contain({"gen_ai.operation.name": "chat", "x": 1}, "evaltrace.", "gen_ai.prompt.")
    assert keys_may_contain({"a": 1, "gen_ai.prompt.0.content": "hi"}, "gen_ai.prompt.")
    assert keys_may_contain({1: "not text"}, "evaltrace.")  # type: ignore[dict-item]


def _span(span_id: str, parent: str | None, name: str, attributes: dict[str, Any]) -> Span:
    return Span(
        trace_id="t1",
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind="INTERNAL",
        status_code="UNSET",
        status_message=None,
        start_time_ns=1_000 + len(span_id),
        end_time_ns=9_000,
        attributes=attributes,
    )


def test_flattened_openllmetry_keys_are_found_among_others() -> None:
    attrs = {"llm.request.type": "chat", "gen_ai.system": "openai", "gen_ai.completion.0.content": "hi"}
    assert openllmetry._is_llm_span(attrs)
    assert openllmetry._is_llm_span({"x": 1, "gen_ai.prompt.0.role": "user"})
    assert not openllmetry._is_llm_span({"x": 1, "my.gen_ai.prompt.0": "no: not at the start"})


def test_evaltrace_attributes_from_any_span_and_gc_state_restored() -> None:
    spans = [
        _span("a1", None, "invoke_agent demo", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "demo"}),
        _span("a22", "a1", "chat m", {"gen_ai.operation.name": "chat", "z": 1, "evaltrace.case_id": "case-7"}),
    ]
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            (trace,) = convert_trace(spans)
            assert gc.isenabled() is enabled
        finally:
            gc.enable()
        assert trace.case_id == "case-7" and trace.attributes == {"evaltrace.case_id": "case-7"}
        assert trace.span_count == 2 and len(trace.iterations) == 1
