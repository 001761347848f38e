"""One model call, one iteration; agent definitions are no trace; LlamaIndex and OpenLLMetry-LangChain envelopes.

Spans are made with a real tracer (the OTel SDK) and converted as recorded; the real-run tests of
these frameworks are tests/frameworks/test_llamaindex.py and test_langgraph_openllmetry.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from evaltrace.collector.runfiles.spans import span_from_readable
from evaltrace.collector.traces.conventions.envelopes import unwrap_arguments, unwrap_result
from evaltrace.collector.traces.conventions.payload import output_text
from evaltrace.collector.traces.rebuild import convert_spans
from evaltrace.collector.traces.records import Trace

PROMPT = "What's the weather in Paris?"
LANGCHAIN_SCOPE = "opentelemetry.instrumentation.langchain"


class Recorder:
    """Spans from a real tracer, converted on `traces()`."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @contextmanager
    def span(self, name: str, scope: str = "test", error: str | None = None, **attributes: Any) -> Iterator[None]:
        tracer = self.provider.get_tracer(scope)
        with tracer.start_as_current_span(name, attributes=attributes) as span:
            yield
            if error is not None:
                span.set_status(Status(StatusCode.ERROR, error))

    def prepare(self) -> None:
        """LlamaIndex's `_prepare_chat_with_tools`: an LLM span with the request, no reply."""
        request = json.dumps({"messages": [f"ChatMessage(role=user, text={PROMPT!r})"], "tools": []})
        output = {"output.value": request, "output.mime_type": "application/json"}
        with self.span("OpenAI._prepare_chat_with_tools", **_llm(), **output):
            pass

    def call(self, reply: str | None, *, error: str | None = None, tokens: int | None = 10) -> None:
        attrs = _llm()
        attrs["llm.input_messages.0.message.role"] = "user"
        attrs["llm.input_messages.0.message.content"] = PROMPT
        if reply is not None:
            attrs["llm.output_messages.0.message.role"] = "assistant"
            attrs["llm.output_messages.0.message.content"] = reply
        if tokens is not None:
            attrs["llm.token_count.prompt"] = tokens
            attrs["llm.token_count.completion"] = 2
        with self.span("OpenAI.chat", error=error, **attrs):
            pass

    def traces(self) -> list[Trace]:
        return convert_spans([span_from_readable(s) for s in self.exporter.get_finished_spans()])


def _llm() -> dict[str, Any]:
    return {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini"}


@pytest.fixture
def rec() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.provider.shutdown()


def _agent(rec: Recorder) -> Any:
    return rec.span("FunctionAgent.run", **{"openinference.span.kind": "CHAIN", "input.value": "{}"})


def test_a_span_that_only_prepared_the_next_model_call_is_no_iteration(rec: Recorder) -> None:
    with _agent(rec):
        for reply in ("One.", "Two."):
            with rec.span("run_agent_step", **{"openinference.span.kind": "CHAIN"}):
                rec.prepare()
                rec.call(reply)
    (trace,) = rec.traces()
    assert [it.output_text for it in trace.iterations] == ["One.", "Two."]
    assert trace.input == PROMPT  # from the call's prompt: the preparation span holds none
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (20, 4)


def test_a_failed_model_call_without_a_reply_stays_an_iteration(rec: Recorder) -> None:
    with _agent(rec):
        rec.call(None, error="rate limited", tokens=None)
        rec.call("Done.")
    (trace,) = rec.traces()
    assert len(trace.iterations) == 2
    assert trace.iterations[0].error is not None


def test_model_calls_recording_no_reply_are_each_an_iteration(rec: Recorder) -> None:
    # Content capture off and no usage: nothing says one of them only prepared the other.
    with _agent(rec):
        rec.call(None, tokens=None)
        rec.call(None, tokens=None)
    (trace,) = rec.traces()
    assert len(trace.iterations) == 2


def test_a_preparation_span_followed_by_a_tool_not_a_model_call_is_kept(rec: Recorder) -> None:
    with _agent(rec):
        rec.prepare()
        with rec.span("get_weather", **{"openinference.span.kind": "TOOL", "tool.name": "get_weather"}):
            pass
    (trace,) = rec.traces()
    assert len(trace.iterations) == 1


def test_a_tree_of_create_agent_spans_alone_is_no_trace(rec: Recorder) -> None:
    with rec.span("create_agent agent", LANGCHAIN_SCOPE, **{"gen_ai.operation.name": "create_agent"}):
        pass
    with rec.span("invoke_agent agent", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "agent"}):
        with rec.span("create_agent helper", **{"gen_ai.operation.name": "create_agent"}):
            pass
        rec.call("Hi.")
    (trace,) = rec.traces()  # the run keeps its trace, a create_agent span inside it included
    assert trace.output == "Hi."
    assert trace.span_count == 3


@pytest.mark.parametrize(
    ("recorded", "requested", "expected"),
    [
        ({"kwargs": {"city": "Paris"}}, {"city": "Paris"}, {"city": "Paris"}),
        ({"kwargs": {"city": "Paris"}}, {"kwargs": {"city": "Paris"}}, {"kwargs": {"city": "Paris"}}),
        ({"kwargs": {"city": "Paris"}, "other": 1}, None, {"kwargs": {"city": "Paris"}, "other": 1}),
        (
            {"input_str": "{'city': 'Paris'}", "tags": [], "metadata": {}, "inputs": {"city": "Paris"}, "kwargs": {}},
            None,
            {"city": "Paris"},
        ),
        ({"input_str": "x", "inputs": "not a dict"}, None, {"input_str": "x", "inputs": "not a dict"}),
        ({"input_str": "x", "inputs": {"a": 1}, "extra": 2}, None, {"input_str": "x", "inputs": {"a": 1}, "extra": 2}),
    ],
)
def test_llama_index_and_openllmetry_langchain_argument_envelopes(recorded: Any, requested: Any, expected: Any) -> None:
    assert unwrap_arguments(recorded, requested) == expected


def test_llama_index_tool_output_gives_the_return_value() -> None:
    output = {
        "blocks": [{"text": "18C"}],
        "tool_name": "w",
        "raw_input": {},
        "raw_output": {"t": 18},
        "is_error": False,
    }
    assert unwrap_result(output) == {"t": 18}
    assert unwrap_result({"tool_name": "w", "raw_output": 1}) == {"tool_name": "w", "raw_output": 1}


def test_openllmetry_langchain_tool_output_only_on_its_spans() -> None:
    message = {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", "ToolMessage"]}
    recorded = {"output": {**message, "kwargs": {"content": "18C", "tool_call_id": "c1"}}, "kwargs": {"color": "x"}}
    assert unwrap_result(recorded, LANGCHAIN_SCOPE) == "18C"
    assert unwrap_result({"output": {"value": 3}}, LANGCHAIN_SCOPE) == {"value": 3}
    assert unwrap_result(recorded, "another.scope") == recorded  # a tool may return {"output": ...} itself


def test_a_printed_stop_event_holds_no_answer_and_a_callback_record_does() -> None:
    assert output_text("StopEvent(result=AgentOutput(response=ChatMessage(role=<MessageRole.ASSISTANT...") is None
    assert output_text("StopEvents are fun.") == "StopEvents are fun."
    record = {"outputs": {"messages": [["user", PROMPT], ["ai", "18C."]]}, "kwargs": {"tags": []}}
    assert output_text(json.dumps(record)) == "18C."
