"""OpenLLMetry (traceloop) extractor, on spans made with the real OTel SDK.

No OpenLLMetry instrumentation is installed in the project's environment. The LLM attribute sets
in `test_conv_openllmetry/*.json` were captured from the real `opentelemetry-instrumentation-openai`
0.47.5 (the last flattened `gen_ai.prompt.<i>` generation; 0.62 writes GenAI JSON messages instead)
calling `tests/fake_llm.py`, plain and streaming, in a scratch virtualenv. The workflow-layer spans
are started here exactly as traceloop-sdk 0.47.5's decorators start them (`decorators/base.py`:
span name `<entity>.<kind>`, `traceloop.span.kind`, `traceloop.entity.name`, entity input
`{"args": [...], "kwargs": {...}}` and output as JSON, ERROR status plus `record_exception`).
The spans go through the real exporter, reader and converter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from conftest import SpanRecorder
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span as OtelSpan
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from evaltrace.collector.runfiles.spans import Span, span_from_readable
from evaltrace.collector.traces.conventions.openllmetry import extract

FIXTURES = Path(__file__).parent / "test_conv_openllmetry"
USER = "What's the weather in Paris?"
SESSION = {"traceloop.association.properties.session_id": "conv-42", "traceloop.association.properties.user_id": "u1"}


def captured(name: str) -> list[dict[str, Any]]:
    spans: list[dict[str, Any]] = json.loads((FIXTURES / name).read_text())["spans"]
    return spans


@contextmanager
def entity(tracer: Tracer, name: str, kind: str, args: list[Any], kwargs: dict[str, Any]) -> Iterator[OtelSpan]:
    """A traceloop-sdk decorator span; the body sets the output with `set_output`."""
    with tracer.start_as_current_span(f"{name}.{kind}", record_exception=False, set_status_on_exception=False) as span:
        span.set_attribute("traceloop.span.kind", kind)
        span.set_attribute("traceloop.entity.name", name)
        span.set_attribute("traceloop.workflow.name", "weather_workflow")
        for key, value in SESSION.items():
            span.set_attribute(key, value)
        span.set_attribute("traceloop.entity.input", json.dumps({"args": args, "kwargs": kwargs}))
        try:
            yield span
        except Exception as exc:
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            span.record_exception(exc)


def set_output(span: OtelSpan, value: Any) -> None:
    span.set_attribute("traceloop.entity.output", json.dumps(value))


def llm_span(tracer: Tracer, recorded: dict[str, Any]) -> None:
    """Replay one captured OpenLLMetry LLM span (attributes and events as the instrumentation set them)."""
    attributes = dict(recorded["attributes"], **SESSION)
    with tracer.start_as_current_span(recorded["name"], kind=SpanKind[recorded["kind"]], attributes=attributes) as span:
        for event in recorded["events"]:
            span.add_event(event)


def tool(tracer: Tracer, name: str, kwargs: dict[str, Any], result: str | None, error: Exception | None = None) -> None:
    with entity(tracer, name, "tool", [], kwargs) as span:
        if error is not None:
            raise error
        set_output(span, result)


@pytest.mark.parametrize("fixture", ["chat_tool_calls.json", "chat_tool_calls_stream.json"])
def test_workflow_with_parallel_tool_calls_round_trip(span_recorder: SpanRecorder, fixture: str) -> None:
    first, second = captured(fixture)
    tracer = span_recorder.provider.get_tracer("traceloop.tracer")
    with entity(tracer, "weather_workflow", "workflow", [USER], {}) as workflow:
        llm_span(tracer, first)
        tool(tracer, "get_weather", {"city": "Paris"}, "18C in Paris")
        tool(tracer, "get_time", {}, "noon")
        llm_span(tracer, second)
        set_output(workflow, "It is 18C in Paris.")

    (trace,) = span_recorder.traces()

    assert trace.convention == "openllmetry"
    assert (trace.input, trace.output, trace.error) == (USER, "It is 18C in Paris.", None)
    assert trace.conversation_id == "conv-42"
    assert [(c.call_id, c.name, c.arguments, c.result, c.error) for c in trace.tool_calls] == [
        ("call_0_0", "get_weather", {"city": "Paris"}, "18C in Paris", None),
        ("call_0_1", "get_time", {}, "noon", None),
    ]
    # The fake server's default token counts: turn k uses 100(k+1)+7 in and 10(k+1)+3 out.
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (107 + 207, 13 + 23)
    assert len(trace.iterations) == 2
    assert trace.iterations[0].finish_reasons == ["tool_calls"]
    assert trace.iterations[1].output_text == "It is 18C in Paris."
    assert [s.name for s in trace.tool_schemas] == ["get_weather", "get_time"]
    assert trace.tool_schemas[0].parameters == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }


def test_failing_tool_and_results_from_the_next_prompt(span_recorder: SpanRecorder) -> None:
    first, second = captured("chat_tool_calls.json")
    tracer = span_recorder.provider.get_tracer("traceloop.tracer")
    with entity(tracer, "weather_workflow", "workflow", [], {"question": USER}) as workflow:
        llm_span(tracer, first)
        tool(tracer, "get_weather", {"city": "Paris"}, None, error=ValueError("kaboom"))
        llm_span(tracer, second)
        set_output(workflow, {"answer": "It is 18C in Paris."})

    (trace,) = span_recorder.traces()

    assert (trace.input, trace.output) == (USER, "It is 18C in Paris.")
    weather, time = trace.tool_calls
    assert (weather.name, weather.error) == ("get_weather", "ValueError: kaboom")
    # get_time has no tool span: its result is the next model call's `role=tool` prompt.
    assert (time.call_id, time.name, time.arguments, time.result) == ("call_0_1", "get_time", {}, "noon")


# --- single spans -----------------------------------------------------------------------------


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def make(self, name: str, attributes: dict[str, Any]) -> Span:
        self.provider.get_tracer("t").start_span(name, attributes=attributes).end()
        readable = self.exporter.get_finished_spans()[-1]
        return span_from_readable(readable)


@pytest.fixture
def spans() -> Iterator[Spans]:
    maker = Spans()
    yield maker
    maker.provider.shutdown()


def test_llm_span_newer_usage_names_definitions_and_multimodal_prompt(spans: Spans) -> None:
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.system": "Anthropic",
        "gen_ai.request.model": "claude-x",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": json.dumps(
            [{"type": "text", "text": "Look"}, {"type": "image_url", "image_url": {}}]
        ),
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "A cat.",
        "gen_ai.completion.0.finish_reason": "stop",
        "gen_ai.usage.input_tokens": 40,
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.usage.cache_read_input_tokens": 30,
        "gen_ai.tool.definitions": json.dumps(
            [{"name": "see", "description": "Look.", "parameters": {"type": "object"}}]
        ),
    }
    normalized = extract(spans.make("anthropic.chat", attrs))
    assert normalized is not None and normalized.role == "llm" and normalized.llm is not None
    llm = normalized.llm
    assert (llm.model, llm.provider) == ("claude-x", "Anthropic")
    assert llm.input_messages is not None and llm.input_messages[0].text == "Look"
    assert llm.output_messages is not None and llm.output_messages[0].text == "A cat."
    assert (llm.usage.input_tokens, llm.usage.output_tokens, llm.usage.cache_read_tokens) == (40, 4, 30)
    assert [s.name for s in llm.tool_schemas] == ["see"]
    assert llm.finish_reasons == ["stop"]


def test_prompt_index_gaps_and_truncated_arguments(spans: Spans) -> None:
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "hi",
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.content": "hello",
        "gen_ai.completion.1.role": "assistant",
        "gen_ai.completion.1.tool_calls.0.id": "c1",
        "gen_ai.completion.1.tool_calls.0.name": "search",
        "gen_ai.completion.1.tool_calls.0.arguments": '{"q": "cut he',
    }
    normalized = extract(spans.make("openai.chat", attrs))
    assert normalized is not None and normalized.llm is not None
    assert normalized.llm.input_messages is not None
    assert [(m.role, m.text) for m in normalized.llm.input_messages] == [("user", "hi"), ("assistant", "hello")]
    (call,) = normalized.llm.tool_calls
    assert (call.call_id, call.arguments, call.arguments_truncated) == ("c1", '{"q": "cut he', True)
    assert any("cut short" in w for w in normalized.warnings)


def test_truncated_entity_input_is_kept_raw(spans: Spans) -> None:
    attrs = {
        "traceloop.span.kind": "tool",
        "traceloop.entity.name": "search",
        "traceloop.entity.input": '{"args": [], "kw',
    }
    normalized = extract(spans.make("search.tool", attrs))
    assert normalized is not None and normalized.tool is not None
    assert (normalized.tool.arguments, normalized.tool.arguments_truncated) == ('{"args": [], "kw', True)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ({"args": [], "kwargs": {"city": "Paris"}}, {"city": "Paris"}),
        ({"args": [{"city": "Paris"}], "kwargs": {}}, {"city": "Paris"}),
        ({"args": ["Paris", 3], "kwargs": {}}, {"args": ["Paris", 3], "kwargs": {}}),
    ],
)
def test_tool_arguments_from_call_record(spans: Spans, call: dict[str, Any], expected: Any) -> None:
    attrs = {"traceloop.span.kind": "tool", "traceloop.entity.input": json.dumps(call)}
    tool_exec = extract(spans.make("get_weather.tool", attrs)).tool  # type: ignore[union-attr]
    assert tool_exec is not None and tool_exec.name == "get_weather" and tool_exec.arguments == expected


def test_roles_of_the_workflow_layer_and_foreign_spans(spans: Spans) -> None:
    task = extract(spans.make("step.task", {"traceloop.span.kind": "task"}))
    assert task is not None and task.role == "chain"
    agent = extract(spans.make("planner.agent", {"traceloop.span.kind": "agent", "traceloop.entity.input": '"hi"'}))
    assert agent is not None and agent.role == "agent" and agent.agent is not None and agent.agent.input == "hi"
    embedding = extract(spans.make("openai.embeddings", {"llm.request.type": "embedding"}))
    assert embedding is not None and embedding.role == "other"
    # Newer OpenLLMetry writes GenAI JSON messages: left to the GenAI extractor.
    new_shape = {"llm.request.type": "chat", "gen_ai.input.messages": "[]", "gen_ai.operation.name": "chat"}
    assert extract(spans.make("openai.chat", new_shape)) is None
    assert extract(spans.make("chat gpt", {"gen_ai.operation.name": "chat"})) is None


def test_redacted_completion_is_not_text(spans: Spans) -> None:
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "[REDACTED]",
    }
    llm = extract(spans.make("openai.chat", attrs)).llm  # type: ignore[union-attr]
    assert llm is not None and llm.output_messages is not None and llm.output_messages[0].text is None
