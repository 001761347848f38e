"""The structural rules for one call or one model call recorded twice, provider stop reasons and content blocks.

Spans are made with the real OTel SDK and written by `ParquetSpanExporter` (`span_recorder`); each
test shapes them as an instrumentation would, by attributes only (no framework is named):

- one call recorded twice in one span (the same call id in two attribute families) is one call;
- one model call described by two spans, nested or side by side (the same response id, or two
  instrumentations' spans of it), is one iteration with its usage counted once;
- provider stop reasons are normalised, and a reply cut by a length limit makes the run a failure;
- provider content blocks (`text`, `tool_use`, `tool_result` with `is_error`) and the providers'
  message shape (`content`, `tool_calls`) are read wherever messages are; a result handed over as
  a list of text blocks is its text; `is_error` is the call's error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from conftest import SpanRecorder

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import iter_traces
from evaltrace.collector.traces.explain import explain_trace
from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.scorers.outcome import trace_outcome

QUESTION = "Weather in Paris?"
ANSWER = "18C in Paris."


def _json(value: Any) -> str:
    return json.dumps(value)


@contextmanager
def _run(recorder: SpanRecorder) -> Iterator[None]:
    tracer = recorder.provider.get_tracer("app")
    user = [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]
    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a", "gen_ai.input.messages": _json(user)}
    with tracer.start_as_current_span("invoke_agent a", attributes=agent):
        yield


def _chat(recorder: SpanRecorder, scope: str, output: list[Any], usage: tuple[int, int], **extra: Any) -> Any:
    """A GenAI chat span of `scope` (not yet ended: the caller's `with` ends it)."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.output.messages": _json(output),
        "gen_ai.usage.input_tokens": usage[0],
        "gen_ai.usage.output_tokens": usage[1],
        **extra,
    }
    return recorder.provider.get_tracer(scope).start_as_current_span("chat m", attributes=attributes)


def _call_reply(call_id: str = "c1") -> list[Any]:
    part = {"type": "tool_call", "id": call_id, "name": "get_weather", "arguments": {"city": "Paris"}}
    return [{"role": "assistant", "parts": [part]}]


TEXT_REPLY = [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]


def _only(recorder: SpanRecorder) -> Trace:
    traces = recorder.traces()
    assert len(traces) == 1, traces
    return traces[0]


# --- one call recorded twice in one span --------------------------------------------------------


def _openinference_call_twice(recorder: SpanRecorder) -> None:
    tracer = recorder.provider.get_tracer("oi")
    prefix = "llm.output_messages.0.message"
    call = {"id": "c1", "function.name": "get_weather", "function.arguments": '{"city": "Paris"}'}
    first = {"openinference.span.kind": "LLM", f"{prefix}.role": "assistant", "llm.token_count.prompt": 10}
    first.update({f"{prefix}.tool_calls.0.tool_call.{k}": v for k, v in call.items()})
    first.update({f"{prefix}.contents.0.tool_call.{k}": v for k, v in call.items()})
    first[f"{prefix}.contents.0.message_content.type"] = "tool_use"
    history = {
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": QUESTION,
        "llm.input_messages.1.message.role": "tool",
        "llm.input_messages.1.message.tool_call_id": "c1",
        "llm.input_messages.1.message.content": "18C",
    }
    final = {"openinference.span.kind": "LLM", f"{prefix}.role": "assistant", f"{prefix}.content": ANSWER, **history}
    with _run(recorder):
        with tracer.start_as_current_span("messages.create", attributes=first):
            pass
        with tracer.start_as_current_span("messages.create", attributes=final):
            pass


def test_one_call_under_two_attribute_families_of_one_span_is_one_call(span_recorder: SpanRecorder) -> None:
    _openinference_call_twice(span_recorder)
    trace = _only(span_recorder)
    assert [(c.call_id, c.name, c.arguments, c.result) for c in trace.tool_calls] == [
        ("c1", "get_weather", {"city": "Paris"}, "18C")
    ]
    assert [it.duplicate_call_ids for it in trace.iterations] == [["c1"], []]
    assert [len(it.tool_calls) for it in trace.iterations] == [1, 0]


def test_one_call_twice_in_genai_parts_is_one_call(span_recorder: SpanRecorder) -> None:
    twice = [{"role": "assistant", "parts": _call_reply()[0]["parts"] * 2}]
    with _run(span_recorder):
        with _chat(span_recorder, "a", twice, (10, 1)):
            pass
        with _chat(span_recorder, "a", TEXT_REPLY, (20, 2)):
            pass
    trace = _only(span_recorder)
    assert [c.call_id for c in trace.tool_calls] == ["c1"]
    assert trace.iterations[0].duplicate_call_ids == ["c1"]


def test_calls_without_ids_are_never_merged(span_recorder: SpanRecorder) -> None:
    part = {"type": "tool_call", "name": "get_weather", "arguments": {"city": "Paris"}}
    with _run(span_recorder):
        with _chat(span_recorder, "a", [{"role": "assistant", "parts": [part, part]}], (10, 1)):
            pass
    trace = _only(span_recorder)
    assert [c.name for c in trace.tool_calls] == ["get_weather", "get_weather"]
    assert trace.iterations[0].duplicate_call_ids == []


# --- one model call described by two spans ---------------------------------------------------------


def test_sibling_spans_with_one_response_id_are_one_iteration(span_recorder: SpanRecorder) -> None:
    with _run(span_recorder):
        for response_id, reply, usage in (("r1", _call_reply(), (10, 1)), ("r2", TEXT_REPLY, (20, 2))):
            # An instrumentation's span and the SDK's own, side by side; the SDK's has no finish reason.
            with _chat(span_recorder, "instrumentation", reply, usage, **{"gen_ai.response.id": response_id}):
                pass
            with _chat(span_recorder, "sdk", reply, usage, **{"gen_ai.response.id": response_id}) as sdk:
                sdk.set_attribute("anthropic.message.stop_reason", "tool_use" if response_id == "r1" else "end_turn")
    trace = _only(span_recorder)
    assert len(trace.iterations) == 2
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (30, 3)
    assert [len(it.merged_span_ids) for it in trace.iterations] == [1, 1]
    assert [it.stop_reason for it in trace.iterations] == ["tool_call", "stop"]  # taken from the merged span
    assert [c.call_id for c in trace.tool_calls] == ["c1"]


def test_two_responses_are_two_model_calls_even_from_two_scopes(span_recorder: SpanRecorder) -> None:
    with _run(span_recorder):
        with _chat(span_recorder, "one", _call_reply(), (10, 1), **{"gen_ai.response.id": "r1"}):
            pass
        with _chat(span_recorder, "two", _call_reply("c2"), (10, 1), **{"gen_ai.response.id": "r2"}):
            pass
    trace = _only(span_recorder)
    assert len(trace.iterations) == 2 and trace.usage.input_tokens == 20


def test_overlapping_calls_of_one_instrumentation_stay_two(span_recorder: SpanRecorder) -> None:
    tracer = span_recorder.provider.get_tracer("one")
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 1}
    with _run(span_recorder):
        first = tracer.start_span("chat m", attributes=attributes)
        second = tracer.start_span("chat m", attributes=attributes)  # parallel calls of one client
        second.end()
        first.end()
    trace = _only(span_recorder)
    assert len(trace.iterations) == 2 and trace.usage.input_tokens == 20


def test_sibling_spans_of_two_instrumentations_without_ids_are_one_iteration(span_recorder: SpanRecorder) -> None:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 1}
    with _run(span_recorder):
        outer = span_recorder.provider.get_tracer("one").start_span("chat m", attributes=attributes)
        inner = span_recorder.provider.get_tracer("two").start_span("chat m", attributes=attributes)
        inner.end()
        outer.end()
        other = span_recorder.provider.get_tracer("two").start_span("chat m", attributes=attributes)
        other.end()  # a later call, outside the first one's window: its own iteration
    trace = _only(span_recorder)
    assert len(trace.iterations) == 2 and trace.usage.input_tokens == 20
    assert [len(it.merged_span_ids) for it in trace.iterations] == [1, 0]


def test_nested_second_instrumentation_is_merged_and_fills_the_stop_reason(span_recorder: SpanRecorder) -> None:
    with _run(span_recorder):
        with _chat(span_recorder, "instrumentation", TEXT_REPLY, (10, 1)):
            with _chat(span_recorder, "sdk", TEXT_REPLY, (10, 1)) as sdk:
                sdk.set_attribute("anthropic.message.stop_reason", "max_tokens")
    trace = _only(span_recorder)
    (iteration,) = trace.iterations
    assert trace.usage.input_tokens == 10
    assert iteration.stop_reason == "length" and iteration.finish_reasons == ["max_tokens"]
    assert len(iteration.merged_span_ids) == 1
    assert trace_outcome(trace)[0] == "failure"  # the answer was cut by the token limit


def test_explain_names_merged_spans_and_duplicate_calls(span_recorder: SpanRecorder) -> None:
    twice = [{"role": "assistant", "parts": _call_reply()[0]["parts"] * 2}]
    with _run(span_recorder):
        with _chat(span_recorder, "instrumentation", twice, (10, 1), **{"gen_ai.response.id": "r1"}):
            pass
        with _chat(span_recorder, "sdk", twice, (10, 1), **{"gen_ai.response.id": "r1"}):
            pass
    span_recorder.provider.shutdown()
    (spans,) = list(iter_traces(resolve_paths([span_recorder.directory])))
    (trace,) = _only_from(spans)
    readings = {r.span_id: r for r in explain_trace(spans, trace)}
    (iteration,) = trace.iterations
    kept, merged = readings[iteration.span_id], readings[iteration.merged_span_ids[0]]
    assert kept.became[:2] == ["iteration 0", "call ids recorded twice in it, each read as one call: c1"]
    assert merged.became == ["merged into iteration 0: the same model call (its usage not counted again)"]
    assert merged.set_aside is None


def _only_from(spans: list[Any]) -> list[Trace]:
    from evaltrace.collector.traces.rebuild import convert_trace

    return convert_trace(spans)


# --- stop reasons ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "normalised"),
    [
        ("tool_use", "tool_call"),
        ("tool_calls", "tool_call"),
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("STOP", "stop"),
        ("max_tokens", "length"),
        ("MAX_TOKENS", "length"),
        ("length", "length"),
        ("SAFETY", "content_filter"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
    ],
)
def test_provider_stop_reasons_are_normalised(span_recorder: SpanRecorder, recorded: str, normalised: str) -> None:
    with _run(span_recorder):
        with _chat(span_recorder, "a", TEXT_REPLY, (10, 1), **{"gen_ai.response.finish_reasons": [recorded]}):
            pass
    (iteration,) = _only(span_recorder).iterations
    assert (iteration.finish_reasons, iteration.stop_reason) == ([recorded], normalised)


def test_a_reply_cut_by_the_length_limit_is_a_failure(span_recorder: SpanRecorder) -> None:
    with _run(span_recorder):
        with _chat(span_recorder, "sdk", TEXT_REPLY, (10, 1), **{"anthropic.message.stop_reason": "max_tokens"}):
            pass
    trace = _only(span_recorder)
    assert trace.iterations[0].stop_reason == "length"
    outcome, evidence = trace_outcome(trace)
    assert outcome == "failure" and "cut short" in evidence


def test_a_reply_stopped_by_a_providers_safety_filter_is_a_failure(span_recorder: SpanRecorder) -> None:
    with _run(span_recorder):
        with _chat(span_recorder, "gemini", TEXT_REPLY, (10, 1), **{"gen_ai.response.finish_reasons": ["SAFETY"]}):
            pass
    assert trace_outcome(_only(span_recorder)) == (
        "failure",
        "the run returned but its last model call was cut short (content_filter: safety)",
    )


# --- content blocks and the providers' message shape ----------------------------------------------


def _blocks_conversation(is_error: bool) -> list[Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "boom"}]}
    if is_error:
        result["is_error"] = True
    return [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"code": "X1"}}]},
        {"role": "user", "content": [result]},
    ]


@pytest.mark.parametrize("is_error", [True, False])
def test_anthropic_blocks_in_messages_are_read(span_recorder: SpanRecorder, is_error: bool) -> None:
    use = {"type": "tool_use", "id": "t1", "name": "lookup", "input": {"code": "X1"}}
    tracer = span_recorder.provider.get_tracer("sdk")
    first = {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": _json([{"role": "assistant", "content": [use]}]),
    }
    first["gen_ai.input.messages"] = _json(_blocks_conversation(is_error)[:1])
    final = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": _json(_blocks_conversation(is_error)),
        "gen_ai.output.messages": _json([{"role": "assistant", "content": [{"type": "text", "text": "failed"}]}]),
    }
    with tracer.start_as_current_span("root", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat", attributes=first):
            pass
        with tracer.start_as_current_span("chat", attributes=final):
            pass
    trace = _only(span_recorder)
    assert (trace.input, trace.output) == (QUESTION, "failed")
    (call,) = trace.tool_calls
    assert (call.call_id, call.name, call.arguments, call.result) == ("t1", "lookup", {"code": "X1"}, "boom")
    assert call.error == ("boom" if is_error else None)


def test_results_in_text_block_lists_are_their_text(span_recorder: SpanRecorder) -> None:
    response = [{"type": "text", "text": "18C"}]
    history = [
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        *_call_reply(),
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1", "response": response}]},
    ]
    with _run(span_recorder):
        with _chat(span_recorder, "sdk", _call_reply(), (10, 1)):
            pass
        with _chat(span_recorder, "sdk", TEXT_REPLY, (20, 2), **{"gen_ai.input.messages": _json(history)}):
            pass
    (call,) = _only(span_recorder).tool_calls
    assert call.result == "18C" and call.error is None


def test_openai_chat_shaped_messages_are_read_not_dropped(span_recorder: SpanRecorder) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]
    history = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
    ]
    tracer = span_recorder.provider.get_tracer("x")
    first = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": _json(history[:1])}
    first["gen_ai.output.messages"] = _json(history[1:2])
    final = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": _json(history)}
    final["gen_ai.output.messages"] = _json([{"role": "assistant", "content": ANSWER}])
    with tracer.start_as_current_span("root", attributes={"gen_ai.operation.name": "invoke_agent"}):
        with tracer.start_as_current_span("chat", attributes=first):
            pass
        with tracer.start_as_current_span("chat", attributes=final):
            pass
    trace = _only(span_recorder)
    assert (trace.input, trace.output) == (QUESTION, ANSWER)
    assert [(c.call_id, c.arguments, c.result) for c in trace.tool_calls] == [("c1", {"city": "Paris"}, "18C")]


def test_openinference_keeps_is_error_in_its_raw_request(span_recorder: SpanRecorder) -> None:
    tracer = span_recorder.provider.get_tracer("oi")
    prefix = "llm.output_messages.0.message"
    first = {
        "openinference.span.kind": "LLM",
        f"{prefix}.role": "assistant",
        f"{prefix}.tool_calls.0.tool_call.id": "t1",
        f"{prefix}.tool_calls.0.tool_call.function.name": "lookup",
        f"{prefix}.tool_calls.0.tool_call.function.arguments": '{"code": "X1"}',
    }
    final = {
        "openinference.span.kind": "LLM",
        "input.value": _json({"model": "m", "messages": _blocks_conversation(True)}),
        "input.mime_type": "application/json",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": QUESTION,
        "llm.input_messages.1.message.role": "tool",
        "llm.input_messages.1.message.tool_call_id": "t1",
        "llm.input_messages.1.message.content": "boom",
        f"{prefix}.role": "assistant",
        f"{prefix}.content": "failed",
    }
    with _run(span_recorder):
        with tracer.start_as_current_span("messages.create", attributes=first):
            pass
        with tracer.start_as_current_span("messages.create", attributes=final):
            pass
    (call,) = _only(span_recorder).tool_calls
    assert (call.name, call.result, call.error) == ("lookup", "boom", "boom")


def test_a_tool_span_outcome_wins_over_the_history(span_recorder: SpanRecorder) -> None:
    """A call whose tool span recorded its run keeps that span's outcome; `is_error` only fills a span-less call."""
    history = [
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        *_call_reply(),
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "bad", "is_error": True}]},
    ]
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "c1"}
    with _run(span_recorder):
        with _chat(span_recorder, "a", _call_reply(), (10, 1)):
            pass
        with span_recorder.provider.get_tracer("a").start_as_current_span("execute_tool", attributes=tool) as span:
            span.set_attribute("gen_ai.tool.call.result", "18C")
        with _chat(span_recorder, "a", TEXT_REPLY, (20, 2), **{"gen_ai.input.messages": _json(history)}):
            pass
    (call,) = _only(span_recorder).tool_calls
    assert (call.result, call.error) == ("18C", None)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # Parallel calls of two clients, each instrumented by its own library: one window holds the
        # other and the usage is equal, but the models (or the calls each reply requested) differ.
        ({"gen_ai.request.model": "gpt-4o-mini"}, {"gen_ai.request.model": "claude-3-5-haiku"}),
        ({"gen_ai.output.messages": _json(_call_reply("c1"))}, {"gen_ai.output.messages": _json(_call_reply("c2"))}),
    ],
)
def test_two_instrumentations_parallel_calls_told_apart_stay_two(
    span_recorder: SpanRecorder, first: dict[str, Any], second: dict[str, Any]
) -> None:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 1}
    with _run(span_recorder):
        outer = span_recorder.provider.get_tracer("openai").start_span("chat", attributes={**attributes, **first})
        inner = span_recorder.provider.get_tracer("anthropic").start_span("chat", attributes={**attributes, **second})
        inner.end()
        outer.end()
    trace = _only(span_recorder)
    assert len(trace.iterations) == 2 and trace.usage.input_tokens == 20
    assert [it.merged_span_ids for it in trace.iterations] == [[], []]


def test_one_model_named_with_and_without_its_version_is_merged(span_recorder: SpanRecorder) -> None:
    attributes = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 1}
    with _run(span_recorder):
        outer = span_recorder.provider.get_tracer("one").start_span(
            "chat", attributes={**attributes, "gen_ai.request.model": "gpt-4o"}
        )
        inner = span_recorder.provider.get_tracer("two").start_span(
            "chat", attributes={**attributes, "gen_ai.response.model": "openai/GPT-4o-2024-08-06"}
        )
        inner.end()
        outer.end()
    trace = _only(span_recorder)
    assert len(trace.iterations) == 1 and trace.usage.input_tokens == 10
