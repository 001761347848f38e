"""Converter rules on small span trees made with the real SDK (in memory, through `span_from_readable`)."""

from __future__ import annotations

import json

import pytest
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call

from evaltrace.collector._lenient_json import parse_json, parse_json_deep
from evaltrace.collector.convert import convert_spans, group_conversations
from evaltrace.collector.records import Trace
from evaltrace.collector.spans import span_from_readable


def _convert(rec: Recorder) -> list[Trace]:
    return convert_spans([span_from_readable(s) for s in rec.finished()])


def _one_call_agent(rec: Recorder, arguments: object, schema_params: dict[str, object], **agent: object) -> None:
    with rec.span("invoke_agent a", agent_attrs("a", **agent)):
        defs = json.dumps(
            [{"type": "function", "name": "search", "parameters": {"type": "object", "properties": schema_params}}]
        )
        chat(
            rec,
            "m",
            messages(("user", [text("find cats")])),
            messages(("assistant", [tool_call("s1", "search", arguments)])),
            (10, 1),
            "tool_call",
            **{"gen_ai.tool.definitions": defs},
        )


def test_bare_argument_becomes_object_when_schema_has_one_parameter() -> None:
    rec = Recorder()
    _one_call_agent(rec, '"cats"', {"query": {"type": "string"}})
    (trace,) = _convert(rec)
    assert trace.tool_calls[0].arguments == {"query": "cats"}
    assert trace.tool_calls[0].result is None and trace.tool_calls[0].span_id is None  # seen only in the reply


def test_bare_argument_stays_text_with_a_warning_when_schema_is_ambiguous() -> None:
    rec = Recorder()
    _one_call_agent(rec, "cats", {"query": {}, "limit": {}})
    (trace,) = _convert(rec)
    assert trace.tool_calls[0].arguments == "cats"
    assert any("arguments are text" in w for w in trace.warnings)


def test_tool_span_without_requesting_call_still_appears_after_its_iteration() -> None:
    rec = Recorder()
    with rec.span("invoke_agent a", agent_attrs("a")):
        chat(rec, "m", None, None, (1, 1))
        with rec.span("execute_tool t", tool_attrs("t", None, '{"k": 1}', "ok")):
            pass
        chat(rec, "m", None, None, (2, 2))
    (trace,) = _convert(rec)
    assert [(c.name, c.arguments, c.result, c.iteration) for c in trace.tool_calls] == [("t", {"k": 1}, "ok", None)]
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (3, 3)
    assert trace.input is None and trace.output is None  # content not captured is None, not ""


def test_name_and_order_matching_when_tool_spans_have_no_call_id() -> None:
    rec = Recorder()
    with rec.span("invoke_agent a", agent_attrs("a")):
        reply = messages(("assistant", [tool_call("x1", "f", {"n": 1}), tool_call("x2", "f", {"n": 2})]))
        chat(rec, "m", messages(("user", [text("go")])), reply, (1, 1), "tool_call")
        for n in (1, 2):
            with rec.span("execute_tool f", tool_attrs("f", "unknown", None, f"r{n}")):
                pass
    (trace,) = _convert(rec)
    assert [(c.call_id, c.arguments, c.result) for c in trace.tool_calls] == [
        ("x1", {"n": 1}, "r1"),
        ("x2", {"n": 2}, "r2"),
    ]


def test_timeout_status_and_agent_usage_not_double_counted() -> None:
    rec = Recorder()
    with rec.span("invoke_agent a", agent_attrs("a", **{"gen_ai.usage.input_tokens": 999}), error=TimeoutError("slow")):
        chat(rec, "m", None, None, (4, 5))
    (trace,) = _convert(rec)
    assert trace.status == "timeout" and trace.error == "TimeoutError: slow"
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (4, 5)


def test_nested_agent_without_tool_span_is_a_child_trace_not_iterations() -> None:
    rec = Recorder()
    with rec.span("invoke_agent outer", agent_attrs("outer")):
        chat(rec, "m", messages(("user", [text("hi")])), messages(("assistant", [text("handing off")])), (1, 1))
        with rec.span("invoke_agent inner", agent_attrs("inner")):
            chat(rec, "m", messages(("user", [text("hi")])), messages(("assistant", [text("done")])), (7, 7))
    (trace,) = _convert(rec)
    assert len(trace.iterations) == 1 and trace.usage.input_tokens == 1
    (handoff,) = trace.tool_calls
    assert handoff.name == "inner" and handoff.child is not None and handoff.child.output == "done"
    assert handoff.result == "done" and [c.name for c in trace.all_tool_calls(nested=True)] == ["inner"]


def test_conversations_group_by_id_in_start_order() -> None:
    rec = Recorder()
    for conv in ("b", "a", "b"):
        with rec.span("invoke_agent a", agent_attrs("a", **{"gen_ai.conversation.id": conv})):
            pass
    conversations = group_conversations(_convert(rec))
    assert [(c.conversation_id, len(c.traces)) for c in conversations] == [("b", 2), ("a", 1)]
    assert conversations[0].traces[0].start_time < conversations[0].traces[1].start_time


def test_assert_tool_call_subset_numbers_by_value_and_readable_diff() -> None:
    rec = Recorder()
    _one_call_agent(rec, {"query": "cats", "limit": 1, "deep": {"a": True}}, {})
    (trace,) = _convert(rec)
    assert trace.assert_tool_call("search", {"limit": 1.0}).call_id == "s1"
    trace.assert_tool_call("search", {"deep": {}})
    with pytest.raises(AssertionError, match=r"'limit': expected 2, got 1"):
        trace.assert_tool_call("search", {"limit": 2})
    with pytest.raises(AssertionError, match=r"unexpected 'deep'"):
        trace.assert_tool_call("search", {"query": "cats", "limit": 1}, exact=True)
    with pytest.raises(AssertionError, match=r"calls made: 'search'"):
        trace.assert_tool_call("missing")
    with pytest.raises(AssertionError):
        trace.assert_tool_call("search", {"deep": {"a": 1}})  # booleans never equal numbers


@pytest.mark.parametrize(
    ("raw", "parsed", "truncated"),
    [
        ('{"a": 1}', True, False),
        ('{"a": "b', False, True),
        ("[1, 2", False, True),
        ("plain text", False, False),
        ('{"a" 1}', False, False),
    ],
)
def test_lenient_json(raw: str, parsed: bool, truncated: bool) -> None:
    outcome = parse_json(raw)
    assert (outcome.parsed, outcome.truncated) == (parsed, truncated)
    assert outcome.value == (json.loads(raw) if parsed else raw)


def test_lenient_json_deep_unwraps_double_encoding() -> None:
    assert parse_json_deep(json.dumps(json.dumps({"x": 1}))).value == {"x": 1}
