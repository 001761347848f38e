"""OpenInference extractor and flattened-key re-nesting, on spans made with the real OTel SDK.

Attribute sets are the ones the OpenInference instrumentations write (checked against spans captured
from openinference-instrumentation-openai-agents 2.6 and -langchain 0.1.80; the whole-framework
runs are in test_frameworks_openinference.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, set_span_in_context

from evaltrace.collector.runfiles.spans import Span, span_from_readable
from evaltrace.collector.traces._flatten import nest_list
from evaltrace.collector.traces.conventions.openinference import extract


class Spans:
    """Makes real SDK spans and returns them as the converter sees them."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test")

    def make(self, name: str, attributes: dict[str, Any], *, error: Exception | None = None, root: bool = True) -> Span:
        parent = self.tracer.start_span("parent") if not root else None
        context = set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(name, context=context, attributes=attributes)
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end()
        if parent is not None:
            parent.end()
        finished = [s for s in self.exporter.get_finished_spans() if s.name == name]
        self.exporter.clear()
        return span_from_readable(finished[-1])


@pytest.fixture
def spans() -> Iterator[Spans]:
    maker = Spans()
    yield maker
    maker.provider.shutdown()


# --- flattened keys ---------------------------------------------------------------------------


def test_nest_list_orders_by_index_and_skips_gaps() -> None:
    attrs = {
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.10.message.role": "assistant",
        "llm.output_messages.0.message.role": "assistant",
    }
    items = nest_list(attrs, "llm.input_messages")
    assert items == [{"message": {"role": "user"}}, {"message": {"role": "tool"}}, {"message": {"role": "assistant"}}]


def test_nest_list_rebuilds_nested_lists() -> None:
    attrs = {
        "p.0.message.tool_calls.1.tool_call.id": "b",
        "p.0.message.tool_calls.0.tool_call.id": "a",
        "p.0.message.tool_calls.0.tool_call.function.name": "f",
        "p.0.message.contents.2.message_content.text": "hi",
    }
    assert nest_list(attrs, "p") == [
        {
            "message": {
                "tool_calls": [{"tool_call": {"id": "a", "function": {"name": "f"}}}, {"tool_call": {"id": "b"}}],
                "contents": [{"message_content": {"text": "hi"}}],
            }
        }
    ]


def test_nest_list_absent_is_none_and_prefix_must_end_at_a_dot() -> None:
    assert nest_list({"llm.input_messages_x.0": 1}, "llm.input_messages") is None
    assert nest_list({}, "p") is None
    assert nest_list({"p.0": "leaf", "p.2": "other"}, "p") == ["leaf", "other"]


def test_nest_keeps_deeper_structure_on_leaf_prefix_conflict() -> None:
    assert nest_list({"p.0.b": 1, "p.0.b.c": 2}, "p") == [{"b": {"c": 2}}]
    assert nest_list({"p.0.b.c": 2, "p.0.b": 1}, "p") == [{"b": {"c": 2}}]
    assert nest_list({"p.0.x.0": 1, "p.0.x.1": 2, "p.0.y.k": 3}, "p") == [{"x": [1, 2], "y": {"k": 3}}]


# --- LLM spans --------------------------------------------------------------------------------

AGENTS_RESPONSE_LLM = {
    "openinference.span.kind": "LLM",
    "llm.system": "openai",
    "llm.model_name": "gpt-test",
    "llm.input_messages.1.message.role": "user",
    "llm.input_messages.1.message.content": "Weather in Paris and the time?",
    "llm.output_messages.0.message.role": "assistant",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_a",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
    "llm.output_messages.0.message.tool_calls.1.tool_call.id": "call_b",
    "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "get_time",
    "output.mime_type": "application/json",
    "output.value": json.dumps(
        {
            "object": "response",
            "output": [
                {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'},
                {"type": "function_call", "call_id": "call_b", "name": "get_time", "arguments": "{}"},
            ],
        }
    ),
    "llm.token_count.prompt": 120,
    "llm.token_count.completion": 30,
    "llm.token_count.total": 150,
    "llm.token_count.prompt_details.cache_read": 100,
    "llm.token_count.completion_details.reasoning": 20,
    "llm.tools.0.tool.json_schema": json.dumps(
        {"type": "function", "name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}}
    ),
    "llm.finish_reason": "stop",
}


def test_llm_span_messages_calls_usage_and_dropped_empty_arguments(spans: Spans) -> None:
    normalized = extract(spans.make("response", AGENTS_RESPONSE_LLM))
    assert normalized is not None and normalized.role == "llm" and normalized.llm is not None
    llm = normalized.llm
    assert llm.model == "gpt-test" and llm.provider == "openai"
    assert llm.input_messages is not None and [(m.role, m.text) for m in llm.input_messages] == [
        ("user", "Weather in Paris and the time?")
    ]
    # The bridge drops arguments equal to "{}"; they come back from the response JSON.
    assert [(c.call_id, c.name, c.arguments) for c in llm.tool_calls] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_time", {}),
    ]
    # Detail counts are subsets of the totals, never added to them.
    assert (llm.usage.input_tokens, llm.usage.output_tokens) == (120, 30)
    assert (llm.usage.cache_read_tokens, llm.usage.reasoning_tokens) == (100, 20)
    assert [(s.name, s.description, s.parameters) for s in llm.tool_schemas] == [
        ("get_weather", "Weather.", {"type": "object"})
    ]
    assert llm.finish_reasons == ["stop"]


def test_dropped_arguments_without_a_recorded_response_stay_unknown(spans: Spans) -> None:
    attrs = {k: v for k, v in AGENTS_RESPONSE_LLM.items() if not k.startswith("output.")}
    llm = extract(spans.make("response", attrs)).llm  # type: ignore[union-attr]
    assert llm is not None
    assert [c.arguments for c in llm.tool_calls] == [{"city": "Paris"}, None]


def test_truncated_arguments_keep_raw_text_and_flag(spans: Spans) -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"query": "long que',
    }
    normalized = extract(spans.make("ChatOpenAI", attrs))
    assert normalized is not None and normalized.llm is not None
    (call,) = normalized.llm.tool_calls
    assert call.arguments == '{"query": "long que' and call.arguments_truncated
    assert any("cut short" in w for w in normalized.warnings)


def test_redacted_content_is_not_text(spans: Spans) -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "__REDACTED__",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "__REDACTED__",
        "llm.token_count.prompt": 5,
    }
    llm = extract(spans.make("ChatOpenAI", attrs)).llm  # type: ignore[union-attr]
    assert llm is not None and llm.input_messages is not None and llm.output_messages is not None
    assert [m.role for m in llm.input_messages] == ["user"]
    assert llm.input_messages[0].text is None and llm.output_messages[0].text is None
    assert llm.usage.input_tokens == 5


def test_messages_not_recorded_are_none(spans: Spans) -> None:
    llm = extract(spans.make("ChatOpenAI", {"openinference.span.kind": "LLM"})).llm  # type: ignore[union-attr]
    assert llm is not None and llm.input_messages is None and llm.output_messages is None


def test_contents_parts_tool_results_and_no_double_text(spans: Spans) -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Be brief.",
        "llm.input_messages.1.message.role": "tool",
        "llm.input_messages.1.message.tool_call_id": "call_a",
        "llm.input_messages.1.message.name": "get_weather",
        "llm.input_messages.1.message.content": "18C",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.contents.0.message_content.type": "text",
        "llm.output_messages.0.message.contents.0.message_content.text": "It is 18C.",
        "llm.output_messages.0.message.contents.1.message_content.type": "reasoning",
        "llm.output_messages.0.message.contents.1.message_content.text": "thinking",
        "llm.output_messages.0.message.content": "It is 18C.",
    }
    llm = extract(spans.make("response", attrs)).llm  # type: ignore[union-attr]
    assert llm is not None and llm.input_messages is not None and llm.output_messages is not None
    tool_message = llm.input_messages[1]
    assert tool_message.role == "tool"
    assert [(p.type, p.call_id, p.name, p.result) for p in tool_message.parts] == [
        ("tool_result", "call_a", "get_weather", "18C")
    ]
    assert llm.output_messages[0].text == "It is 18C."
    assert [p.type for p in llm.output_messages[0].parts] == ["text", "other"]


def test_streamed_agents_chat_reply_is_read_from_response_json(spans: Spans) -> None:
    responses = [
        {"object": "response", "output": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]},
    ]
    attrs = {
        "openinference.span.kind": "LLM",
        "output.mime_type": "application/json",
        "output.value": json.dumps(responses),
    }
    llm = extract(spans.make("generation", attrs)).llm  # type: ignore[union-attr]
    assert llm is not None
    assert [(c.call_id, c.name, c.arguments) for c in llm.tool_calls] == [("c1", "f", {})]
    text_reply = [{"object": "response", "output": [{"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "Done."}]}]}]  # fmt: skip
    attrs["output.value"] = json.dumps(text_reply)
    llm = extract(spans.make("generation", attrs)).llm  # type: ignore[union-attr]
    assert llm is not None and llm.output_messages is not None and llm.output_messages[0].text == "Done."


# --- TOOL spans -------------------------------------------------------------------------------


def test_agents_tool_span_without_call_id(spans: Spans) -> None:
    attrs = {
        "openinference.span.kind": "TOOL",
        "tool.name": "get_weather",
        "tool.description": "Weather.",
        "input.value": '{"city": "Paris"}',
        "input.mime_type": "application/json",
        "output.value": "18C",
    }
    normalized = extract(spans.make("get_weather", attrs, root=False))
    assert normalized is not None and normalized.role == "tool" and normalized.tool is not None
    tool = normalized.tool
    assert (tool.name, tool.call_id, tool.arguments, tool.result, tool.error) == (
        "get_weather",
        None,
        {"city": "Paris"},
        "18C",
        None,
    )
    assert tool.description == "Weather."


def test_failed_tool_span_error_from_exception_event(spans: Spans) -> None:
    attrs = {"openinference.span.kind": "TOOL", "tool.name": "boom", "input.value": '{"x": 1}'}
    normalized = extract(spans.make("boom", attrs, error=ValueError("kaboom"), root=False))
    assert normalized is not None and normalized.tool is not None
    assert normalized.tool.error == "ValueError: kaboom" and normalized.error == "ValueError: kaboom"


def test_langchain_tool_message_output_gives_result_call_id_and_error(spans: Spans) -> None:
    message = {"type": "tool", "data": {"content": "18C", "tool_call_id": "call_9", "status": "success", "name": "w"}}
    attrs = {
        "openinference.span.kind": "TOOL",
        "tool.name": "get_weather",
        "input.value": "Paris",
        "output.value": json.dumps(message),
        "output.mime_type": "application/json",
    }
    tool = extract(spans.make("get_weather", attrs, root=False)).tool  # type: ignore[union-attr]
    assert tool is not None and (tool.call_id, tool.arguments, tool.result) == ("call_9", "Paris", "18C")
    message["data"].update(content="Error: boom", status="error")  # type: ignore[attr-defined]
    attrs["output.value"] = json.dumps(message)
    normalized = extract(spans.make("get_weather", attrs, root=False))
    assert normalized is not None and normalized.tool is not None
    assert normalized.tool.error == "Error: boom" and normalized.error == "Error: boom"


def test_redacted_tool_io_is_not_captured(spans: Spans) -> None:
    attrs = {
        "openinference.span.kind": "TOOL",
        "tool.name": "t",
        "input.value": "__REDACTED__",
        "output.value": "__REDACTED__",
    }
    tool = extract(spans.make("t", attrs, root=False)).tool  # type: ignore[union-attr]
    assert tool is not None and tool.arguments is None and tool.result is None


def test_handoff_span_is_the_default_handoff_tool(spans: Spans) -> None:
    attrs = {"openinference.span.kind": "TOOL", "input.value": "Triage agent", "output.value": "Billing agent"}
    tool = extract(spans.make("handoff to Billing agent", attrs, root=False)).tool  # type: ignore[union-attr]
    assert tool is not None
    assert (tool.name, tool.call_id, tool.result) == ("transfer_to_billing_agent", None, "Billing agent")


# --- AGENT / CHAIN spans ----------------------------------------------------------------------

LANGGRAPH_STATE_IN = {"messages": [["user", "Weather in Paris?"]]}
LANGGRAPH_STATE_OUT = {
    "messages": [
        {"type": "human", "data": {"content": "Weather in Paris?", "type": "human"}},
        {"type": "ai", "data": {"content": "", "type": "ai", "tool_calls": [{"name": "w", "args": {}, "id": "c"}]}},
        {"type": "tool", "data": {"content": "18C", "type": "tool", "tool_call_id": "c"}},
        {"type": "ai", "data": {"content": "It is 18C.", "type": "ai"}},
    ]
}


def test_langgraph_root_chain_is_the_agent_run(spans: Spans) -> None:
    attrs = {
        "openinference.span.kind": "CHAIN",
        "input.value": json.dumps(LANGGRAPH_STATE_IN),
        "input.mime_type": "application/json",
        "output.value": json.dumps(LANGGRAPH_STATE_OUT),
        "output.mime_type": "application/json",
        "session.id": "thread-1",
        "metadata": json.dumps({"thread_id": "thread-1", "ls_integration": "langgraph"}),
    }
    normalized = extract(spans.make("LangGraph", attrs))
    assert normalized is not None and normalized.role == "agent" and normalized.agent is not None
    assert (normalized.agent.input, normalized.agent.output) == ("Weather in Paris?", "It is 18C.")
    assert normalized.conversation_id == "thread-1"
    nested = extract(spans.make("LangGraph", attrs, root=False))
    assert nested is not None and nested.role == "agent"


def test_langgraph_node_named_agent_is_a_step(spans: Spans) -> None:
    attrs = {
        "openinference.span.kind": "AGENT",
        "input.value": json.dumps(LANGGRAPH_STATE_IN),
        "metadata": json.dumps({"langgraph_node": "agent", "ls_integration": "langgraph"}),
    }
    normalized = extract(spans.make("agent", attrs, root=False))
    assert normalized is not None and normalized.role == "chain" and normalized.agent is None
    inner_chain = extract(spans.make("call_model", {"openinference.span.kind": "CHAIN"}, root=False))
    assert inner_chain is not None and inner_chain.role == "chain"


def test_agents_sdk_spans(spans: Spans) -> None:
    wrapper = extract(spans.make("Agent workflow", {"openinference.span.kind": "AGENT"}))
    assert wrapper is not None and wrapper.role == "chain"
    agent = extract(spans.make("Weather agent", {"openinference.span.kind": "AGENT", "agent.name": "Weather agent"}))
    assert agent is not None and agent.role == "agent" and agent.agent is not None
    assert (agent.agent.name, agent.agent.input, agent.agent.output) == ("Weather agent", None, None)


@pytest.mark.parametrize(
    ("value", "mime", "expected_in", "expected_out"),
    [
        ("plain question", "text/plain", "plain question", "plain question"),
        (
            json.dumps([{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}]),
            "application/json",
            "hi",
            None,
        ),
        (json.dumps({"task": "do it", "stream": False}), "application/json", "do it", None),
        (json.dumps({"output": "done"}), "application/json", None, "done"),
        ("__REDACTED__", "text/plain", None, None),
    ],
)
def test_agent_input_and_output_text(
    spans: Spans, value: str, mime: str, expected_in: str | None, expected_out: str | None
) -> None:
    attrs = {"openinference.span.kind": "AGENT", "input.value": value, "input.mime_type": mime, "output.value": value}
    agent = extract(spans.make("MyAgent.run", attrs)).agent  # type: ignore[union-attr]
    assert agent is not None and agent.input == expected_in
    if expected_out is not None or value == "__REDACTED__":
        assert agent.output == expected_out
    else:
        assert agent.output == value  # a structured result without a known text field is the answer as recorded


def test_agent_run_totals_are_informative_usage(spans: Spans) -> None:
    attrs = {"openinference.span.kind": "AGENT", "input.value": "q", "llm.token_count.prompt": 50}
    agent = extract(spans.make("CodeAgent.run", attrs)).agent  # type: ignore[union-attr]
    assert agent is not None and agent.usage is not None and agent.usage.input_tokens == 50


def test_other_kinds_and_foreign_spans(spans: Spans) -> None:
    retriever = extract(spans.make("retrieve", {"openinference.span.kind": "RETRIEVER"}, root=False))
    assert retriever is not None and retriever.role == "other"
    assert extract(spans.make("chat gpt", {"gen_ai.operation.name": "chat"})) is None
