"""Converter rules for frameworks that make their own GenAI spans (Google ADK, Strands), on small real-SDK trees.

The real recordings are in tests/frameworks (test_google_adk.py, test_strands.py); these pin each
rule down on its own: a span that restates its sibling tool spans is set aside, a framework's
result envelope is unwrapped only on that framework's spans, a `gen_ai.choice` whose `message` is
the content itself is read, messages split over two operation-details events are both read, and an
agent span that re-renders the last reply with extra whitespace does not change the answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call, tool_response

from evaltrace.collector.runfiles.spans import span_from_readable
from evaltrace.collector.traces.rebuild import convert_spans
from evaltrace.collector.traces.records import Trace

ADK_SCOPE = "gcp.vertex.agent"
STRANDS_SCOPE = "strands.telemetry.tracer"


def _convert(rec: Recorder) -> list[Trace]:
    return convert_spans([span_from_readable(s) for s in rec.finished()])


@contextmanager
def _scope(rec: Recorder, name: str) -> Iterator[None]:
    """Spans started inside come from the instrumentation scope `name`, as a framework's own tracer makes them."""
    before = rec.tracer
    rec.tracer = rec.provider.get_tracer(name)
    try:
        yield
    finally:
        rec.tracer = before


def _adk_parallel_run(rec: Recorder, result_on_span: bool) -> None:
    """ADK's shape of two parallel calls: workflow > agent > model, two tools, the merged span, model."""
    prompt = messages(("user", [text("Weather in Paris and Rome?")]))
    calls = [tool_call("c1", "get_weather", {"city": "Paris"}), tool_call("c2", "get_weather", {"city": "Rome"})]
    wrapped = [{"result": "18C in Paris"}, {"result": "18C in Rome"}]
    with rec.span("invoke_workflow w", {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "w"}):
        with rec.span("invoke_agent w", agent_attrs("w")):
            chat(rec, "m", prompt, messages(("assistant", calls)), (10, 2))
            for call, result in zip(calls, wrapped, strict=True):
                attrs = tool_attrs("get_weather", call["id"], json.dumps(call["arguments"]))
                if result_on_span:
                    attrs["gen_ai.tool.call.result"] = json.dumps(result)
                with rec.span("execute_tool get_weather", attrs):
                    rec.tick()
            merged = {**tool_attrs("(merged tools)", "event-1"), "gen_ai.tool.description": "(merged tools)"}
            with rec.span("execute_tool (merged)", merged):
                pass
            history = json.loads(prompt) + [
                {"role": "assistant", "parts": calls},
                {"role": "user", "parts": [tool_response("c1", wrapped[0]), tool_response("c2", wrapped[1])]},
            ]
            chat(rec, "m", json.dumps(history), messages(("assistant", [text("Both 18C.")])), (20, 3))


def test_adk_run_is_one_trace_without_the_merged_span_and_envelopes() -> None:
    for result_on_span in (True, False):  # SPAN_ONLY content, and results read from the next model input
        rec = Recorder()
        with _scope(rec, ADK_SCOPE):
            _adk_parallel_run(rec, result_on_span)
        (trace,) = _convert(rec)
        assert (trace.input, trace.output, trace.agent_name) == ("Weather in Paris and Rome?", "Both 18C.", "w")
        got = [(c.name, c.arguments, c.result) for c in trace.tool_calls]
        assert got == [
            ("get_weather", {"city": "Paris"}, "18C in Paris"),
            ("get_weather", {"city": "Rome"}, "18C in Rome"),
        ]
        assert (len(trace.iterations), trace.usage.input_tokens, trace.usage.output_tokens) == (2, 30, 5)


def test_result_envelope_is_kept_on_other_frameworks_spans() -> None:
    rec = Recorder()
    _adk_parallel_run(rec, result_on_span=True)  # the same shape from another instrumentation scope
    (trace,) = _convert(rec)
    assert [c.result for c in trace.tool_calls] == [{"result": "18C in Paris"}, {"result": "18C in Rome"}]


def _event_span(rec: Recorder, name: str, attrs: dict[str, object], events: list[tuple[str, dict[str, str]]]) -> None:
    with rec.span(name, attrs) as span:
        for event_name, body in events:
            span.add_event(event_name, body, timestamp=rec.tick())


def test_strands_events_give_the_answer_tool_calls_and_unwrapped_results() -> None:
    rec = Recorder()
    prompt = ("gen_ai.user.message", {"content": json.dumps([{"text": "Weather in Paris?"}])})
    use = {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Paris"}}}
    agent = {**agent_attrs("Strands Agents"), "gen_ai.usage.input_tokens": 999}
    llm = {"gen_ai.operation.name": "chat", "gen_ai.system": "strands-agents", "gen_ai.request.model": "m"}
    with _scope(rec, STRANDS_SCOPE), rec.span("invoke_agent Strands Agents", agent) as root:
        root.add_event(*prompt)
        with rec.span("execute_event_loop_cycle", {"gen_ai.operation.name": "execute_event_loop_cycle"}):
            _event_span(
                rec,
                "chat",
                {**llm, "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 2},
                [prompt, ("gen_ai.choice", {"finish_reason": "tool_use", "message": json.dumps([use])})],
            )
            _event_span(
                rec,
                "execute_tool get_weather",
                tool_attrs("get_weather", "t1"),
                [
                    ("gen_ai.tool.message", {"role": "tool", "content": json.dumps({"city": "Paris"}), "id": "t1"}),
                    ("gen_ai.choice", {"message": json.dumps([{"text": "18C"}]), "id": "t1"}),
                ],
            )
        with rec.span("execute_event_loop_cycle", {"gen_ai.operation.name": "execute_event_loop_cycle"}):
            reply = ("gen_ai.choice", {"finish_reason": "end_turn", "message": json.dumps([{"text": "It is 18C."}])})
            _event_span(rec, "chat", {**llm, "gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 3}, [reply])
        root.add_event("gen_ai.choice", {"message": "It is 18C.\n", "finish_reason": "end_turn"})
    (trace,) = _convert(rec)
    assert (trace.input, trace.output) == ("Weather in Paris?", "It is 18C.")
    assert [(c.call_id, c.name, c.arguments, c.result, c.iteration) for c in trace.tool_calls] == [
        ("t1", "get_weather", {"city": "Paris"}, "18C", 0)
    ]
    assert [it.output_text for it in trace.iterations] == [None, "It is 18C."]
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (30, 5)  # not the agent span's 999


def test_messages_split_over_two_operation_details_events_are_both_read() -> None:
    rec = Recorder()
    llm = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 4}
    details = "gen_ai.client.inference.operation.details"
    with rec.span("invoke_agent a", agent_attrs("a")):
        _event_span(
            rec,
            "chat",
            llm,
            [
                (details, {"gen_ai.input.messages": messages(("user", [text("hi")]))}),
                (details, {"gen_ai.output.messages": messages(("assistant", [text("hello")]))}),
            ],
        )
    (trace,) = _convert(rec)
    assert (trace.input, trace.output, len(trace.iterations)) == ("hi", "hello", 1)


def _adk_legacy_run(rec: Recorder, content: bool) -> None:
    """ADK's legacy schema: `invocation` > agent > `call_llm` spans and tools with `gcp.vertex.agent.*` content."""
    user = {"role": "user", "parts": [{"text": "Weather in Paris?"}]}
    call = {
        "role": "model",
        "parts": [{"function_call": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}}}],
    }
    answer = {"role": "model", "parts": [{"text": "It is 18C."}]}
    response = {"role": "user", "parts": [{"function_response": {"id": "c1", "name": "get_weather", "response": {}}}]}
    config = {"system_instruction": "Be brief.", "tools": [{"function_declarations": [{"name": "get_weather"}]}]}

    def call_llm(contents: list[dict[str, object]], reply: dict[str, object], tokens: tuple[int, int]) -> None:
        attrs: dict[str, object] = {
            "gen_ai.system": "gcp.vertex.agent",
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": tokens[0],
            "gen_ai.usage.output_tokens": tokens[1],
            "gcp.vertex.agent.llm_request": json.dumps({"model": "m", "config": config, "contents": contents})
            if content
            else "{}",
            "gcp.vertex.agent.llm_response": json.dumps({"content": reply}) if content else "{}",
        }
        with rec.span("call_llm", attrs):
            chat(rec, "m", None, None, tokens)  # the model client's own span inside: not a second iteration

    with _scope(rec, ADK_SCOPE), rec.span("invocation"), rec.span("invoke_agent w", agent_attrs("w")):
        call_llm([user], call, (10, 2))
        tool = {
            **tool_attrs("get_weather", "c1"),
            "gcp.vertex.agent.tool_call_args": json.dumps({"city": "Paris"}) if content else "{}",
            "gcp.vertex.agent.tool_response": json.dumps({"result": "18C"}) if content else "{}",
        }
        with rec.span("execute_tool get_weather", tool):
            rec.tick()
        call_llm([user, call, response], answer, (20, 3))


def test_adk_legacy_vendor_attributes_give_every_fact() -> None:
    rec = Recorder()
    _adk_legacy_run(rec, content=True)
    (trace,) = _convert(rec)
    assert (trace.input, trace.output) == ("Weather in Paris?", "It is 18C.")
    assert [(c.call_id, c.name, c.arguments, c.result, c.iteration) for c in trace.tool_calls] == [
        ("c1", "get_weather", {"city": "Paris"}, "18C", 0)
    ]
    assert [s.name for s in trace.tool_schemas] == ["get_weather"]
    assert (len(trace.iterations), trace.usage.input_tokens, trace.usage.output_tokens) == (2, 30, 5)


def test_adk_legacy_content_switched_off_keeps_the_structure() -> None:
    rec = Recorder()
    _adk_legacy_run(rec, content=False)
    (trace,) = _convert(rec)
    assert (trace.input, trace.output) == (None, None)
    assert [(c.name, c.result) for c in trace.tool_calls] == [("get_weather", None)]
    assert (len(trace.iterations), trace.usage.input_tokens) == (2, 30)
