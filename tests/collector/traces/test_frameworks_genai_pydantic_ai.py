"""pydantic-ai with its native instrumentation, against the scripted server, through real Parquet files.

Each scenario runs a real `Agent` (OpenAI-compatible provider pointed at `fake_llm`) with a local
TracerProvider, records its spans with `ParquetSpanExporter`, reads them back with the reader and
checks the rebuilt trace against what the server served and what the tools did.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from conftest import SpanRecorder
from fake_llm import FakeLLM, Turn, call, text_turn, tool_turn
from openai import AsyncOpenAI
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from evaltrace.collector.traces.records import Trace

PROMPT = "What's the weather in Paris and Rome?"


def _model(client: AsyncOpenAI) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", provider=OpenAIProvider(openai_client=client))


def _agent(client: AsyncOpenAI, recorder: SpanRecorder, executed: list[tuple[str, Any]]) -> Agent[None, str]:
    model = _model(client)
    settings = InstrumentationSettings(tracer_provider=recorder.provider)
    agent = Agent(model, name="weather_agent", capabilities=[Instrumentation(settings=settings)])

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Current weather of a city."""
        executed.append(("get_weather", city))
        return f"18C in {city}"

    @agent.tool_plain
    def get_time(tz: str) -> str:
        """Local time in a time zone."""
        executed.append(("get_time", tz))
        return f"12:00 {tz}"

    @agent.tool_plain
    def lookup(code: str) -> str:
        """Look a code up (always fails)."""
        executed.append(("lookup", code))
        raise ModelRetry(f"unknown code {code}")

    return agent


SCENARIOS: dict[str, list[Turn]] = {
    "sequential": [
        tool_turn(call("get_weather", {"city": "Paris"})),
        tool_turn(call("get_time", {"tz": "CET"})),
        text_turn("Paris: 18C at 12:00 CET."),
    ],
    "parallel": [
        tool_turn(
            call("get_weather", {"city": "Paris"}),
            call("get_weather", {"city": "Rome"}),
            call("get_time", {"tz": "CET"}),
        ),
        text_turn("Both 18C."),
    ],
    "failing_tool": [tool_turn(call("lookup", {"code": "X1"})), text_turn("I could not look that up.")],
    "no_tool": [text_turn("Just text.")],
}


def _run(fake: FakeLLM, recorder: SpanRecorder, turns: list[Turn], *, stream: bool) -> tuple[Trace, list[Any], str]:
    fake.script(turns)
    executed: list[tuple[str, Any]] = []

    async def drain(_ctx: Any, events: Any) -> None:
        async for _ in events:
            pass

    async def main() -> str:
        async with AsyncOpenAI(base_url=fake.base_url, api_key="test") as client:
            agent = _agent(client, recorder, executed)
            result = await agent.run(PROMPT, event_stream_handler=drain if stream else None)
            return result.output

    output = asyncio.run(main())
    traces = recorder.traces()
    assert len(traces) == 1
    assert all(bool(body.get("stream")) is stream for body in fake.requests)
    return traces[0], executed, output


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_pydantic_ai_trace_matches_run(
    fake_llm: FakeLLM, span_recorder: SpanRecorder, scenario: str, stream: bool
) -> None:
    turns = SCENARIOS[scenario]
    trace, executed, output = _run(fake_llm, span_recorder, turns, stream=stream)

    requested = [c for turn in turns for c in turn.tool_calls]
    assert trace.input == PROMPT
    assert trace.output == output == turns[-1].text
    assert trace.agent_name == "weather_agent"
    assert trace.status == "success" and trace.error is None
    assert [c.name for c in trace.tool_calls] == [c.name for c in requested]
    assert [c.call_id for c in trace.tool_calls] == [c.call_id for c in requested]
    assert [c.arguments for c in trace.tool_calls] == [json.loads(c.arguments) for c in requested]
    # Parallel tools run concurrently: what ran is compared as a multiset, the trace keeps the model's order.
    assert sorted(executed) == sorted((c.name, next(iter(json.loads(c.arguments).values()))) for c in requested)
    assert [(c.name, c.iteration) for c in trace.tool_calls] == [
        (c.name, k) for k, turn in enumerate(turns) for c in turn.tool_calls
    ]
    assert len(trace.iterations) == fake_llm.consumed == len(turns)
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == fake_llm.total_usage()
    assert [it.usage.input_tokens for it in trace.iterations] == [t.input_tokens for t in turns]
    assert {s.name for s in trace.tool_schemas} == {"get_weather", "get_time", "lookup"}
    assert trace.conversation_id is not None
    for tool_call in trace.tool_calls:
        value = next(iter(tool_call.arguments.values()))
        if tool_call.name == "lookup":
            assert tool_call.result == f"unknown code {value}"  # pydantic-ai records the retry prompt
            assert tool_call.error is not None and f"unknown code {value}" in tool_call.error
        else:
            assert tool_call.error is None
            assert tool_call.result == (f"18C in {value}" if tool_call.name == "get_weather" else f"12:00 {value}")
            assert tool_call.span_id is not None and tool_call.duration_seconds is not None


def test_pydantic_ai_tool_exception_fails_the_run(fake_llm: FakeLLM, span_recorder: SpanRecorder) -> None:
    fake_llm.script([tool_turn(call("get_weather", {"city": "Paris"}), call("crash", {"x": 1}))])

    async def main() -> None:
        async with AsyncOpenAI(base_url=fake_llm.base_url, api_key="test") as client:
            settings = InstrumentationSettings(tracer_provider=span_recorder.provider)
            agent = Agent(_model(client), name="crashy", capabilities=[Instrumentation(settings=settings)])

            # pydantic-ai runs the two calls at once and cancels the other when one raises: `crash`
            # raises only once `get_weather` has returned, so what is recorded does not depend on timing.
            weather_done = asyncio.Event()

            @agent.tool_plain
            async def get_weather(city: str) -> str:
                weather_done.set()
                return f"18C in {city}"

            @agent.tool_plain
            async def crash(x: int) -> str:
                await asyncio.wait_for(weather_done.wait(), timeout=30)
                await asyncio.sleep(0.1)  # get_weather's task ends (its span too) before this one raises
                raise ValueError(f"boom {x}")

            await agent.run(PROMPT)

    with pytest.raises(ValueError, match="boom 1"):
        asyncio.run(main())
    (trace,) = span_recorder.traces()

    assert trace.status == "error"
    assert trace.error is not None and "boom 1" in trace.error
    assert trace.output is None
    assert [(c.name, c.result, c.error) for c in trace.tool_calls] == [
        ("get_weather", "18C in Paris", None),
        ("crash", None, "ValueError: boom 1"),
    ]
    assert trace.has_error() and any("crash: ValueError: boom 1" == e for e in trace.errors())
