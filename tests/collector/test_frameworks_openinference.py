"""Real agent frameworks, instrumented with OpenInference, against the scripted LLM server.

Each test runs a real framework (the OpenAI Agents SDK with `openinference-instrumentation-openai-agents`,
LangGraph's prebuilt ReAct agent with `openinference-instrumentation-langchain`) against `FakeLLM`,
records the spans through `ParquetSpanExporter` into real Parquet files, reads them back and
converts them, then checks the rebuilt trace against what the server scripted and what the tools
actually did: the user input, the ordered tool calls (names, arguments, results, errors), the final
output and the token totals.

Instrumentors patch process globals, so each test instruments with its own tracer provider and
uninstruments afterwards; the Agents SDK's own trace processors are replaced so nothing is sent to
OpenAI, and a socket guard fails any test that tries to connect outside 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import SpanRecorder
from fake_llm import FakeLLM, Turn, call, text_turn, tool_turn

from evaltrace.collector.records import Trace

USER = "What's the weather in Paris?"


@dataclass
class ToolLog:
    """What the tools actually did: (name, arguments, result or None, raised?)."""

    calls: list[tuple[str, dict[str, Any], str | None, bool]] = field(default_factory=list)

    def weather(self, city: str) -> str:
        result = f"18C and sunny in {city}"
        self.calls.append(("get_weather", {"city": city}, result, False))
        return result

    def time(self) -> str:
        self.calls.append(("get_time", {}, "12:00", False))
        return "12:00"

    def boom(self, x: int) -> str:
        self.calls.append(("boom", {"x": x}, None, True))
        raise ValueError(f"kaboom {x}")


SCENARIOS: dict[str, Callable[[], list[Turn]]] = {
    "sequential": lambda: [
        tool_turn(call("get_weather", {"city": "Paris"})),
        tool_turn(call("get_time", "{}")),
        text_turn("It is 18C in Paris at 12:00."),
    ],
    "parallel": lambda: [
        tool_turn(call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Rome"}), call("get_time", {})),
        text_turn("Paris 18C, Rome 18C, 12:00."),
    ],
    "failing_tool": lambda: [tool_turn(call("boom", {"x": 7})), text_turn("Sorry, that failed.")],
    "no_tool": lambda: [text_turn("Hello! Ask me about the weather.")],
}


@pytest.fixture
def no_outbound(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record every socket connect; any address outside 127.0.0.0/8 fails the connect and the test."""
    attempts: list[Any] = []
    original = socket.socket.connect

    def guarded(sock: socket.socket, address: Any) -> Any:
        attempts.append(address)
        host = address[0] if isinstance(address, tuple) else str(address)
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not str(host).startswith(("127.", "::1")):
            raise AssertionError(f"outbound connection attempted to {address!r}")
        return original(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return attempts


def expected_calls(llm: FakeLLM, tools: ToolLog) -> list[tuple[str | None, str, Any, str | None, bool]]:
    """The model's calls in the order it made them, each with what the tool actually did.

    Parallel calls may run in any order, so outcomes are looked up by (name, arguments).
    """
    outcomes = {
        (name, json.dumps(args, sort_keys=True)): (result, raised) for name, args, result, raised in tools.calls
    }
    expected = []
    for turn in llm.turns[: llm.consumed]:
        for spec in turn.tool_calls:
            args = json.loads(spec.arguments)
            result, raised = outcomes[(spec.name, json.dumps(args, sort_keys=True))]
            expected.append((spec.call_id, spec.name, args, result, raised))
    assert len(expected) == len(tools.calls)
    return expected


def assert_trace_matches(trace: Trace, llm: FakeLLM, tools: ToolLog, final_text: str) -> None:
    """The rebuilt trace equals what the server scripted and the tools did."""
    assert trace.input == USER
    assert trace.output == final_text
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == llm.total_usage()
    assert len(trace.iterations) == llm.consumed
    expected = expected_calls(llm, tools)
    rebuilt = [(c.call_id, c.name, c.arguments, c.error is not None) for c in trace.tool_calls]
    assert rebuilt == [(call_id, name, args, raised) for call_id, name, args, _, raised in expected]
    for recorded, (*_, result, raised) in zip(trace.tool_calls, expected, strict=True):
        if not raised:
            assert recorded.result == result
    assert bool(trace.errors()) == any(raised for *_, raised in expected)


# --- OpenAI Agents SDK ---------------------------------------------------------------------------


@pytest.fixture
def agents_instrumented(span_recorder: SpanRecorder) -> Iterator[SpanRecorder]:
    import agents
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    # Replace the SDK's default processors (which export to OpenAI) with the OpenInference bridge only.
    agents.set_trace_processors([])
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=span_recorder.provider)
    try:
        yield span_recorder
    finally:
        instrumentor.uninstrument()
        agents.set_trace_processors([])


def _run_agents(llm: FakeLLM, tools: ToolLog, *, api: str, stream: bool) -> str:
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_default_openai_client,
    )
    from openai import AsyncOpenAI

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return tools.weather(city)

    @function_tool
    def get_time() -> str:
        """The local time."""
        return tools.time()

    @function_tool
    def boom(x: int) -> str:
        """A tool that always fails."""
        return tools.boom(x)

    async def run() -> str:
        # The client lives inside the loop and is closed in it, so no connection outlives the loop.
        async with AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0) as client:
            set_default_openai_client(client, use_for_tracing=False)
            model: Any = "fake-model"
            if api == "chat":
                model = OpenAIChatCompletionsModel(model="fake-model", openai_client=client)
            # include_usage: streamed chat completions report token counts only when asked to.
            agent = Agent(
                name="Weather agent",
                instructions="Be brief.",
                tools=[get_weather, get_time, boom],
                model=model,
                model_settings=ModelSettings(include_usage=True),
            )
            if not stream:
                return str((await Runner.run(agent, USER)).final_output)
            streamed = Runner.run_streamed(agent, USER)
            async for _ in streamed.stream_events():
                pass
            return str(streamed.final_output)

    return asyncio.run(run())


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_openai_agents(
    agents_instrumented: SpanRecorder, fake_llm: FakeLLM, no_outbound: list[Any], scenario: str, api: str, stream: bool
) -> None:
    turns = SCENARIOS[scenario]()
    fake_llm.script(turns)
    tools = ToolLog()

    final = _run_agents(fake_llm, tools, api=api, stream=stream)

    assert final == turns[-1].text
    assert all(path.endswith("/chat/completions" if api == "chat" else "/responses") for path in fake_llm.paths)
    traces = agents_instrumented.traces()
    assert len(traces) == 1
    trace = traces[0]
    assert trace.convention == "openinference"
    assert_trace_matches(trace, fake_llm, tools, final)
    assert all(isinstance(a, tuple) and str(a[0]).startswith("127.") for a in no_outbound)


# --- LangGraph -----------------------------------------------------------------------------------


@pytest.fixture
def langchain_instrumented(span_recorder: SpanRecorder) -> Iterator[SpanRecorder]:
    from openinference.instrumentation.langchain import LangChainInstrumentor

    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=span_recorder.provider)
    try:
        yield span_recorder
    finally:
        instrumentor.uninstrument()


def _run_langgraph(llm: FakeLLM, tools: ToolLog, *, stream: bool, thread_id: str) -> str:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return tools.weather(city)

    @tool
    def get_time() -> str:
        """The local time."""
        return tools.time()

    @tool
    def boom(x: int) -> str:
        """A tool that always fails."""
        return tools.boom(x)

    model = ChatOpenAI(
        model="fake-model", base_url=llm.base_url, api_key="test", max_retries=0, streaming=stream, stream_usage=stream
    )
    node = ToolNode([get_weather, get_time, boom], handle_tool_errors=True)
    agent = create_react_agent(model, node, prompt="Be brief.")
    state = agent.invoke({"messages": [("user", USER)]}, config={"configurable": {"thread_id": thread_id}})
    return str(state["messages"][-1].content)


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_langgraph(
    langchain_instrumented: SpanRecorder, fake_llm: FakeLLM, no_outbound: list[Any], scenario: str, stream: bool
) -> None:
    turns = SCENARIOS[scenario]()
    fake_llm.script(turns)
    tools = ToolLog()

    final = _run_langgraph(fake_llm, tools, stream=stream, thread_id=f"thread-{scenario}")

    assert final == turns[-1].text
    assert all(bool(body.get("stream")) == stream for body in fake_llm.requests)
    traces = langchain_instrumented.traces()
    assert len(traces) == 1
    trace = traces[0]
    assert trace.convention == "openinference"
    assert trace.conversation_id == f"thread-{scenario}"
    assert_trace_matches(trace, fake_llm, tools, final)
    if scenario == "failing_tool":
        assert "kaboom 7" in (trace.tool_calls[0].error or "")
    assert all(isinstance(a, tuple) and str(a[0]).startswith("127.") for a in no_outbound)


def _all_traces(trace: Trace) -> list[Trace]:
    nested = [c.child for c in trace.all_tool_calls(nested=True) if c.child is not None]
    return [trace, *nested]


def test_openai_agents_handoff(agents_instrumented: SpanRecorder, fake_llm: FakeLLM, no_outbound: list[Any]) -> None:
    from agents import Agent, Runner, set_default_openai_client
    from openai import AsyncOpenAI

    fake_llm.script([tool_turn(call("transfer_to_billing_agent", "{}")), text_turn("Billing here: you owe 5.")])

    async def run() -> str:
        async with AsyncOpenAI(base_url=fake_llm.base_url, api_key="test", max_retries=0) as client:
            set_default_openai_client(client, use_for_tracing=False)
            billing = Agent(name="Billing agent", instructions="Bill.", model="fake-model")
            triage = Agent(name="Triage agent", instructions="Route.", handoffs=[billing], model="fake-model")
            return str((await Runner.run(triage, "How much do I owe?")).final_output)

    final = asyncio.run(run())

    assert final == "Billing here: you owe 5."
    (trace,) = agents_instrumented.traces()
    handoffs = [c for c in trace.all_tool_calls(nested=True) if c.name == "transfer_to_billing_agent"]
    # The bridge drops the "{}" arguments and the handoff span has no call id: both are recovered.
    assert [(c.call_id, c.arguments, c.result) for c in handoffs] == [("call_0_0", {}, "Billing agent")]
    runs = {t.agent_name: t for t in _all_traces(trace)}
    assert runs["Triage agent"].input == "How much do I owe?"
    assert runs["Billing agent"].output == final
    iterations = [it for t in runs.values() for it in t.iterations]
    assert (
        sum(it.usage.input_tokens or 0 for it in iterations),
        sum(it.usage.output_tokens or 0 for it in iterations),
    ) == (fake_llm.total_usage())
