"""`agent_run` as a context manager and as a decorator (sync, async), error path, and its rebuild."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.collector import agent_run, resolve_paths
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.runfiles.reader import read_spans
from evaltrace.collector.traces.rebuild import read_traces
from evaltrace.collector.traces.records import Trace


@pytest.fixture
def provider(tmp_path: Path) -> TracerProvider:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(tmp_path, run_id="t")))
    return tracer_provider


def _traces(provider: TracerProvider, folder: Path) -> list[Trace]:
    provider.shutdown()
    return sorted(read_traces(resolve_paths([folder])), key=lambda t: t.start_time or 0)


def test_context_manager_makes_one_root_with_children(provider: TracerProvider, tmp_path: Path) -> None:
    tracer = provider.get_tracer("app")
    with agent_run("weather", input="Paris?", case_id="c1", conversation_id="conv-1", tracer_provider=provider) as run:
        with tracer.start_as_current_span("execute_tool get_weather", attributes=_tool()):
            pass
        run.output = "18C"
    (trace,) = _traces(provider, tmp_path)
    assert (trace.input, trace.output, trace.case_id, trace.conversation_id) == ("Paris?", "18C", "c1", "conv-1")
    assert trace.agent_name == "weather" and trace.span_count == 2
    assert [(c.name, c.arguments, c.result) for c in trace.tool_calls] == [("get_weather", {"city": "Paris"}, "18C")]
    root = next(s for s in read_spans(resolve_paths([tmp_path])) if s.parent_span_id is None)
    assert root.name == "invoke_agent weather" and root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert json.loads(root.attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Paris?"}]}
    ]
    assert json.loads(root.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == "18C"


def _tool() -> dict[str, str]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": '{"city": "Paris"}',
        "gen_ai.tool.call.result": "18C",
    }


def test_decorator_takes_the_first_str_argument_and_str_result(provider: TracerProvider, tmp_path: Path) -> None:
    @agent_run("sync-agent", case_id="s", tracer_provider=provider)
    def answer(limit: int, question: str) -> str:
        return f"{question} -> ok {limit}"

    @agent_run("async-agent", tracer_provider=provider)
    async def answer_async(question: str) -> dict[str, str]:
        await asyncio.sleep(0)
        return {"not": "text"}  # not a str: no output recorded

    assert answer(3, "first") == "first -> ok 3"
    assert asyncio.run(answer_async("second")) == {"not": "text"}
    assert answer.__name__ == "answer"
    sync_trace, async_trace = _traces(provider, tmp_path)
    assert (sync_trace.input, sync_trace.output, sync_trace.case_id) == ("first", "first -> ok 3", "s")
    assert (async_trace.input, async_trace.output, async_trace.agent_name) == ("second", None, "async-agent")


def test_explicit_input_wins_over_arguments(provider: TracerProvider, tmp_path: Path) -> None:
    @agent_run("a", input="the real question", tracer_provider=provider)
    def run(prompt: str) -> str:
        return "done"

    run("a template")
    (trace,) = _traces(provider, tmp_path)
    assert trace.input == "the real question" and trace.output == "done"


def test_errors_are_recorded_and_reraised(provider: TracerProvider, tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="boom"), agent_run("a", input="q", tracer_provider=provider):
        raise KeyError("boom")

    @agent_run("b", tracer_provider=provider)
    async def failing(question: str) -> str:
        raise ValueError("bad " + question)

    with pytest.raises(ValueError, match="bad q2"):
        asyncio.run(failing("q2"))
    first, second = _traces(provider, tmp_path)
    assert first.status == "error" and "KeyError" in (first.error or "") and "boom" in (first.error or "")
    assert second.status == "error" and "bad q2" in (second.error or "")
    roots = [s for s in read_spans(resolve_paths([tmp_path]))]
    assert all(s.status_code == "ERROR" and any(e.name == "exception" for e in s.events) for s in roots)
    assert sorted(s.attributes["error.type"] for s in roots) == ["KeyError", "ValueError"]
