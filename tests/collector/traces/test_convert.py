"""Converter rules on small span trees made with the real SDK (in memory, through `span_from_readable`)."""

from __future__ import annotations

import json

import pytest
from genai_spans import (
    Recorder,
    agent_attrs,
    chat,
    messages,
    text,
    tool_attrs,
    tool_call,
    tool_response,
    without_prompts,
)

from evaltrace.collector.runfiles.spans import span_from_readable
from evaltrace.collector.traces._lenient_json import parse_json, parse_json_deep
from evaltrace.collector.traces.rebuild import convert_spans, group_conversations
from evaltrace.collector.traces.records import Trace


def _convert(rec: Recorder, *, histories: bool = True) -> list[Trace]:
    return convert_spans([span_from_readable(s) for s in rec.finished()], histories=histories)


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
    with pytest.raises(AssertionError, match=r"call s1: arguments are not a JSON object \(got str 'cats'\)$"):
        trace.assert_tool_call("search", {"query": "cats"})


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


def test_conversation_id_on_a_wrapper_span_groups_the_turns() -> None:
    # A harness root (as `evaltrace run` writes) carries the id; the agent under it does not.
    rec = Recorder()
    for turn in (1, 2):
        with rec.span("evaltrace.case c1", {"gen_ai.conversation.id": "conv-7", "evaltrace.turn": turn}):
            with rec.span("invoke_agent a", agent_attrs("a")):
                pass
    traces = _convert(rec)
    assert [t.conversation_id for t in traces] == ["conv-7", "conv-7"]
    assert [(c.conversation_id, len(c.traces)) for c in group_conversations(traces)] == [("conv-7", 2)]


def test_assert_tool_call_subset_numbers_by_value_and_readable_diff() -> None:
    rec = Recorder()
    _one_call_agent(rec, {"query": "cats", "limit": 1, "deep": {"a": True}}, {})
    (trace,) = _convert(rec)
    assert trace.assert_tool_call("search", {"limit": 1.0}).call_id == "s1"
    trace.assert_tool_call("search", {"deep": {}})
    # The scorers' matcher and its messages: `path: expected X, got Y`, missing, unexpected.
    with pytest.raises(AssertionError, match=r"call s1: limit: expected 2, got 1$"):
        trace.assert_tool_call("search", {"limit": 2})
    with pytest.raises(AssertionError, match=r"call s1: deep: unexpected argument \(\{\"a\": true\}\)$"):
        trace.assert_tool_call("search", {"query": "cats", "limit": 1}, exact=True)
    with pytest.raises(AssertionError, match=r"call s1: page: missing \(expected 3\)$"):
        trace.assert_tool_call("search", {"page": 3})
    with pytest.raises(AssertionError, match=r"call s1: deep\.a: unexpected argument \(True\)$"):
        trace.assert_tool_call("search", {"query": "cats", "limit": 1, "deep": {}}, exact=True)  # at every depth
    with pytest.raises(AssertionError, match=r"calls made: 'search'"):
        trace.assert_tool_call("missing")
    with pytest.raises(AssertionError, match=r"deep\.a: expected 1, got True"):
        trace.assert_tool_call("search", {"deep": {"a": 1}})  # booleans never equal numbers
    with pytest.raises(AssertionError, match=r"query: expected 'CATS', got 'cats'"):
        trace.assert_tool_call("search", {"query": "CATS"})  # strings exactly (no casefold here)


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


# --- handoff chains (one run, several agents) ----------------------------------------------------

Step = tuple[str, str, object, str]
"""(call id, tool, arguments, the tool span's result) of one model call and its tool."""


def _agent(rec: Recorder, name: str, steps: list[Step], final: str | None, *, base: int) -> None:
    """An agent span: one model call per step (each requesting one tool, then its tool span), then a reply."""
    with rec.span(f"invoke_agent {name}", agent_attrs(name)):
        for n, (call_id, tool, arguments, result) in enumerate(steps):
            reply = messages(("assistant", [tool_call(call_id, tool, arguments)]))
            chat(rec, "m", messages(("user", [text("How much do I owe?")])), reply, (base + n, 1), "tool_call")
            with rec.span(f"execute_tool {tool}", tool_attrs(tool, None, None, result)):
                pass
        if final is not None:
            chat(
                rec,
                "m",
                messages(("user", [text("How much do I owe?")])),
                messages(("assistant", [text(final)])),
                (base + 9, 2),
            )


def _flat(trace: Trace) -> list[tuple[str, str | None, int | None, bool]]:
    return [(c.name, c.call_id, c.iteration, c.handoff) for c in trace.tool_calls]


def test_handoff_chain_is_one_trace_with_the_handed_off_calls_after_the_transfer() -> None:
    rec = Recorder()
    with rec.span("workflow"):  # a wrapper with no meaning of its own, like the Agents bridge's
        _agent(
            rec,
            "triage",
            [("t1", "lookup", {"q": "acct"}, "found"), ("t2", "transfer_to_billing", {}, "billing")],
            None,
            base=10,
        )
        _agent(rec, "billing", [("b1", "get_balance", {"who": "me"}, "5")], "You owe 5.", base=20)
    (trace,) = _convert(rec)
    assert (trace.agent_name, trace.handoffs) == ("triage", ["billing"])
    assert (trace.input, trace.output, trace.status) == ("How much do I owe?", "You owe 5.", "success")
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (10 + 11 + 20 + 29, 5)  # model calls only
    assert [it.index for it in trace.iterations] == [0, 1, 2, 3]
    assert _flat(trace) == [
        ("lookup", "t1", 0, False),
        ("transfer_to_billing", "t2", 1, True),
        ("get_balance", "b1", 2, False),
    ]
    assert [c.name for c in trace.iterations[2].tool_calls] == ["get_balance"]
    transfer = trace.tool_calls[1]
    assert transfer.result == "billing" and transfer.child is not None
    assert (transfer.child.agent_name, transfer.child.output, transfer.child.handoffs) == ("billing", "You owe 5.", [])
    assert _flat(transfer.child) == [("get_balance", "b1", 0, False)]
    assert transfer.child.usage.input_tokens == 20 + 29
    # The handed-off calls are in `tool_calls` already: nested traversal does not repeat them.
    assert [c.name for c in trace.all_tool_calls(nested=True)] == ["lookup", "transfer_to_billing", "get_balance"]
    trace.assert_tool_call("get_balance", {"who": "me"})


def test_three_agent_chain_children_are_the_rest_of_the_run() -> None:
    rec = Recorder()
    with rec.span("workflow"):
        _agent(rec, "a", [("1", "transfer_to_b", {}, "b")], None, base=10)
        _agent(rec, "b", [("2", "search", {"k": 1}, "hit"), ("3", "transfer_to_c", {}, "c")], None, base=20)
        _agent(rec, "c", [], "done", base=30)
    (trace,) = _convert(rec)
    assert (trace.agent_name, trace.handoffs, trace.output) == ("a", ["b", "c"], "done")
    assert [c.name for c in trace.tool_calls] == ["transfer_to_b", "search", "transfer_to_c"]
    assert [c.name for c in trace.all_tool_calls(nested=True)] == ["transfer_to_b", "search", "transfer_to_c"]
    rest = trace.tool_calls[0].child
    assert rest is not None and (rest.agent_name, rest.handoffs, rest.output) == ("b", ["c"], "done")
    assert _flat(rest) == [("search", "2", 0, False), ("transfer_to_c", "3", 1, True)]
    last = trace.tool_calls[2].child
    assert last is not None and (last.agent_name, last.tool_calls, last.output) == ("c", [], "done")
    assert (trace.usage.input_tokens, len(trace.iterations)) == (10 + 20 + 21 + 39, 4)


def test_handoff_target_failure_is_the_run_error() -> None:
    rec = Recorder()
    with rec.span("workflow"):
        _agent(rec, "triage", [("t1", "transfer_to_billing", {}, "billing")], None, base=10)
        with rec.span("invoke_agent billing", agent_attrs("billing"), error=RuntimeError("no ledger")):
            chat(rec, "m", messages(("user", [text("How much do I owe?")])), None, (5, 0))
    (trace,) = _convert(rec)
    assert (trace.status, trace.error, trace.handoffs) == ("error", "RuntimeError: no ledger", ["billing"])
    assert trace.tool_calls[0].child is not None and trace.tool_calls[0].child.error == "RuntimeError: no ledger"


def test_sibling_agents_without_a_handoff_stay_separate_child_runs() -> None:
    rec = Recorder()
    with rec.span("workflow"):
        _agent(rec, "writer", [("w1", "draft", {}, "a draft")], "Draft ready.", base=10)
        _agent(rec, "reviewer", [], "Looks good.", base=20)
    (trace,) = _convert(rec)
    assert trace.handoffs == [] and trace.iterations == []
    assert [(c.name, c.result, c.handoff) for c in trace.tool_calls] == [
        ("writer", "Draft ready.", False),
        ("reviewer", "Looks good.", False),
    ]
    assert [c.name for c in trace.all_tool_calls(nested=True)] == ["writer", "draft", "reviewer"]


def _outer_with_expert(rec: Recorder, answer: str) -> None:
    """Agent `outer` calls the tool `ask_expert`, which runs agent `expert` (agent-as-tool) and returns `answer`."""
    with rec.span("invoke_agent outer", agent_attrs("outer")):
        reply = messages(("assistant", [tool_call("o1", "ask_expert", {"q": "x"})]))
        chat(rec, "m", messages(("user", [text("help")])), reply, (1, 1), "tool_call")
        with rec.span("execute_tool ask_expert", tool_attrs("ask_expert", "o1", None, answer)):
            _agent(rec, "expert", [("e1", "search", {"k": 2}, "hit")], answer, base=50)
        chat(rec, "m", messages(("user", [text("help")])), messages(("assistant", [text("ok")])), (2, 2))


def test_agent_as_tool_stays_a_child_trace() -> None:
    rec = Recorder()
    _outer_with_expert(rec, "expert says hi")
    (trace,) = _convert(rec)
    assert trace.handoffs == [] and [it.index for it in trace.iterations] == [0, 1]
    assert (trace.usage.input_tokens, trace.output) == (3, "ok")  # the expert's model calls are not this run's
    (ask,) = trace.tool_calls
    assert (ask.name, ask.result, ask.handoff) == ("ask_expert", "expert says hi", False)
    assert ask.child is not None and (ask.child.agent_name, ask.child.usage.input_tokens) == ("expert", 50 + 59)
    assert [c.name for c in trace.all_tool_calls(nested=True)] == ["ask_expert", "search"]


def test_agent_as_tool_result_naming_the_next_agent_is_no_handoff() -> None:
    rec = Recorder()
    with rec.span("workflow"):
        _outer_with_expert(rec, "next")
        _agent(rec, "next", [], "bye", base=70)
    (trace,) = _convert(rec)
    assert trace.handoffs == [] and trace.iterations == []
    assert [(c.name, c.handoff) for c in trace.tool_calls] == [("outer", False), ("next", False)]
    assert [c.name for c in trace.all_tool_calls(nested=True)] == ["outer", "ask_expert", "search", "next"]


# --- arguments: tool span vs the model's call ------------------------------------------------------


def _tool_run(rec: Recorder, requested: object, recorded: object, params: dict[str, object] | None) -> None:
    extra = {}
    if params is not None:
        schema = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": params}}
        extra["gen_ai.tool.definitions"] = json.dumps([schema])
    with rec.span("invoke_agent a", agent_attrs("a")):
        parts = [tool_call("c1", "get_weather", requested)] if requested is not None else [text("checking")]
        chat(
            rec, "m", messages(("user", [text("Paris?")])), messages(("assistant", parts)), (1, 1), "tool_call", **extra
        )
        with rec.span("execute_tool get_weather", tool_attrs("get_weather", None, recorded, "18C")):
            pass


@pytest.mark.parametrize(
    ("requested", "recorded", "params", "expected"),
    [
        # LangChain records a one-argument tool's input as the bare value: the model's object wins.
        ({"city": "Paris"}, "Paris", None, {"city": "Paris"}),
        ({"city": "Paris"}, "Paris", {"city": {}, "unit": {}}, {"city": "Paris"}),
        ({"city": "Paris"}, 42, None, {"city": "Paris"}),
        # What the tool received wins when it is an object (or the model sent no object).
        ({"city": "Paris"}, '{"city": "Paris", "unit": "C"}', None, {"city": "Paris", "unit": "C"}),
        ('"Paris"', "Rome", {"city": {}}, {"city": "Rome"}),
        # Nothing recorded on the span: the model's arguments.
        ({"city": "Paris"}, None, None, {"city": "Paris"}),
        # No requesting call: a bare value is wrapped only when the schema names one parameter.
        (None, "Paris", {"city": {}}, {"city": "Paris"}),
        (None, "Paris", None, "Paris"),
    ],
)
def test_tool_span_and_requested_arguments_merge(
    requested: object, recorded: object, params: dict[str, object] | None, expected: object
) -> None:
    rec = Recorder()
    _tool_run(rec, requested, recorded, params)
    (trace,) = _convert(rec)
    (call,) = trace.tool_calls
    assert (call.arguments, call.result, call.arguments_truncated) == (expected, "18C", False)
    assert any("arguments are text" in w for w in trace.warnings) == isinstance(expected, str)


def test_cut_short_span_arguments_give_way_to_the_models_object() -> None:
    from evaltrace.collector.traces._normalized import ToolExec
    from evaltrace.collector.traces._pair_calls import merged_arguments
    from evaltrace.collector.traces.records import ToolCall

    execution = ToolExec(name="f", arguments='{"city": "Par', arguments_truncated=True)
    assert merged_arguments(execution, ToolCall(name="f", arguments={"city": "Paris"})) == ({"city": "Paris"}, False)
    assert merged_arguments(execution, None) == ('{"city": "Par', True)
    assert merged_arguments(ToolExec(name="f"), ToolCall(name="f")) == (None, False)


def test_without_histories_prompts_are_none_but_results_and_input_taken_from_them_stay() -> None:
    rec = Recorder()
    # No agent input and no tool span: the input and the tool's result exist only in the prompts.
    with rec.span("invoke_agent a", agent_attrs("a")):
        ask = ("user", [text("find cats")])
        request = ("assistant", [tool_call("s1", "search", {"q": "cats"})])
        chat(rec, "m", messages(ask), messages(request), (10, 1), "tool_call")
        reply = messages(("assistant", [text("3 cats")]))
        chat(rec, "m", messages(ask, request, ("tool", [tool_response("s1", "3 cats found")])), reply, (20, 2))
    (full,) = _convert(rec)
    (lean,) = _convert(rec, histories=False)
    assert full.input == lean.input == "find cats"
    assert [(c.name, c.result) for c in lean.tool_calls] == [("search", "3 cats found")]
    assert [len(it.input_messages or []) for it in full.iterations] == [1, 3]
    assert [it.input_messages for it in lean.iterations] == [None, None]
    assert lean.model_dump(mode="json") == without_prompts(full.model_dump(mode="json"))


@pytest.mark.parametrize(
    "definition",
    [
        # One reader for every convention's tool definitions (`payload.tool_schema`): GenAI's
        # definitions read parameters given as JSON text too, and empty names name no tool.
        {"type": "function", "name": "search", "parameters": json.dumps({"type": "object", "properties": {}})},
        {"name": "search", "inputSchema": {"type": "object", "properties": {}}},  # Strands
        {"name": "search", "input_schema": {"type": "object", "properties": {}}},  # Anthropic
    ],
)
def test_genai_tool_definitions_are_read_by_the_shared_reader(definition: dict[str, object]) -> None:
    rec = Recorder()
    with rec.span("invoke_agent a", agent_attrs("a")):
        defs = json.dumps([definition, {"name": "", "parameters": {}}])
        reply = messages(("assistant", [text("none needed")]))
        chat(rec, "m", messages(("user", [text("hi")])), reply, (1, 1), **{"gen_ai.tool.definitions": defs})
    (trace,) = _convert(rec)
    assert [(s.name, s.parameters) for s in trace.tool_schemas] == [("search", {"type": "object", "properties": {}})]
