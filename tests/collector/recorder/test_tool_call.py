"""`tool_call`: a hand-written loop's tool runs, recorded with the real SDK, written by evaltrace's
exporter, read back by the reader and rebuilt by the converter (no converter code of its own)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.collector import RedactionSettings, agent_run, resolve_paths, tool_call
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.runfiles.reader import read_spans
from evaltrace.collector.traces.rebuild import read_traces
from evaltrace.collector.traces.records import Trace


def _provider(folder: Path, redaction: RedactionSettings | None = None) -> TracerProvider:
    provider = TracerProvider()
    exporter = ParquetSpanExporter(folder, run_id="t", redaction=redaction)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _traces(provider: TracerProvider, folder: Path) -> list[Trace]:
    provider.shutdown()
    return sorted(read_traces(resolve_paths([folder])), key=lambda t: t.start_time or 0)


def _weather(city: str) -> str:
    if city == "Atlantis":
        raise LookupError(f"no city named {city}")
    return f"18C in {city}"


def test_calls_inside_a_run_are_its_tool_calls_in_order(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    with agent_run("weather", input="Paris and Atlantis?", tracer_provider=provider) as run:
        with tool_call("get_weather", {"city": "Paris"}, call_id="call_1", tracer_provider=provider) as call:
            call.result = _weather("Paris")
        assert call.result == "18C in Paris"
        with (
            pytest.raises(LookupError, match="no city named Atlantis"),
            tool_call("get_weather", '{"city": "Atlantis"}', "call_2", tracer_provider=provider) as failing,
        ):
            failing.result = _weather("Atlantis")
        with tool_call("lookup", {"ids": [1, 2]}, tracer_provider=provider) as structured:
            structured.result = {"found": [1]}
        run.output = "Paris: 18C; Atlantis: unknown"
    (trace,) = _traces(provider, tmp_path)
    assert [(c.name, c.call_id, c.arguments, c.result) for c in trace.tool_calls] == [
        ("get_weather", "call_1", {"city": "Paris"}, "18C in Paris"),
        ("get_weather", "call_2", {"city": "Atlantis"}, None),
        ("lookup", None, {"ids": [1, 2]}, {"found": [1]}),
    ]
    first, second, third = trace.tool_calls
    assert first.error is None and third.error is None
    assert second.error is not None and "LookupError" in second.error and "no city named Atlantis" in second.error
    assert trace.status == "success" and trace.output == "Paris: 18C; Atlantis: unknown"  # the run went on
    spans = list(read_spans(resolve_paths([tmp_path])))
    root = next(s for s in spans if s.parent_span_id is None)
    tools = [s for s in spans if s.parent_span_id is not None]
    assert {s.parent_span_id for s in tools} == {root.span_id} and len(tools) == 3
    failed = next(s for s in tools if s.attributes.get("gen_ai.tool.call.id") == "call_2")
    assert failed.name == "execute_tool get_weather" and failed.status_code == "ERROR"
    assert failed.attributes["error.type"] == "LookupError"
    assert failed.attributes["gen_ai.operation.name"] == "execute_tool"


def test_a_call_outside_any_run_is_a_trace_of_its_own_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("evaltrace.collector.recorder.tool_call._warned_outside_run", False)
    provider = _provider(tmp_path)

    async def main() -> None:
        for city in ("Oslo", "Rome"):
            async with tool_call("get_weather", {"city": city}, tracer_provider=provider) as call:
                call.result = _weather(city)

    with caplog.at_level("WARNING", logger="evaltrace"):
        asyncio.run(main())
    provider.shutdown()
    spans = list(read_spans(resolve_paths([tmp_path])))
    assert len({s.trace_id for s in spans}) == 2 and all(s.parent_span_id is None for s in spans)
    assert sorted(s.attributes["gen_ai.tool.call.result"] for s in spans) == ["18C in Oslo", "18C in Rome"]
    warnings = [r.getMessage() for r in caplog.records if "outside any agent_run" in r.getMessage()]
    assert len(warnings) == 1 and "'get_weather'" in warnings[0]  # once, naming the tool


def test_content_capture_off_keeps_the_call_and_drops_its_content(tmp_path: Path) -> None:
    provider = _provider(tmp_path, RedactionSettings(capture_content=False))
    with (
        agent_run("weather", input="Paris?", tracer_provider=provider),
        tool_call("get_weather", {"city": "Paris"}, call_id="call_1", tracer_provider=provider) as call,
    ):
        call.result = "18C, secret"
    (trace,) = _traces(provider, tmp_path)
    (recorded,) = trace.tool_calls
    assert (recorded.name, recorded.call_id) == ("get_weather", "call_1")
    assert recorded.arguments is None and recorded.result is None
    stored = json.dumps([s.attributes for s in read_spans(resolve_paths([tmp_path]))], default=str)
    assert "Paris" not in stored and "secret" not in stored


def test_the_run_handle_returns_its_input(tmp_path: Path) -> None:
    provider = _provider(tmp_path)
    with agent_run("echo", input="What's the weather?", tracer_provider=provider) as run:
        run.output = f"you asked: {run.input}"
    with agent_run("late", tracer_provider=provider) as later:
        assert later.input is None
        later.input = {"question": "structured"}
        assert later.input == {"question": "structured"}

    @agent_run("decorated", tracer_provider=provider)
    def answer(question: str) -> str:
        return question

    assert answer("from the argument") == "from the argument"
    first, second, third = _traces(provider, tmp_path)
    assert first.output == "you asked: What's the weather?"
    assert second.input == '{"question": "structured"}'
    assert third.input == "from the argument"
