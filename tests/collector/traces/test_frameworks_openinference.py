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

from evaltrace.collector.traces.records import Trace

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
    first_prompt = trace.iterations[0].input_messages or []
    assert [(m.role, m.text) for m in first_prompt[:2]] == [("system", "Be brief."), ("user", USER)]
    if api == "responses":
        # The Responses API echoes the request's tools, and the bridge records them from the response.
        assert [s.name for s in trace.tool_schemas] == ["get_weather", "get_time", "boom"]
        assert trace.tool_schemas[0].description == "Current weather for a city."
        assert (trace.tool_schemas[0].parameters or {})["properties"].keys() == {"city"}
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


HANDOFF_USER = "How much do I owe? And the weather in Paris?"


def _run_handoff(llm: FakeLLM, tools: ToolLog, *, api: str) -> str:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_default_openai_client
    from openai import AsyncOpenAI

    @function_tool
    def lookup_account(customer: str) -> str:
        """The customer's account."""
        tools.calls.append(("lookup_account", {"customer": customer}, "acct-1", False))
        return "acct-1"

    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return tools.weather(city)

    @function_tool
    def get_time() -> str:
        """The local time."""
        return tools.time()

    async def run() -> str:
        async with AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0) as client:
            set_default_openai_client(client, use_for_tracing=False)
            model: Any = "fake-model"
            if api == "chat":
                model = OpenAIChatCompletionsModel(model="fake-model", openai_client=client)
            billing = Agent(name="Billing agent", instructions="Bill.", tools=[get_weather, get_time], model=model)
            triage = Agent(
                name="Triage agent", instructions="Route.", tools=[lookup_account], handoffs=[billing], model=model
            )
            return str((await Runner.run(triage, HANDOFF_USER)).final_output)

    return asyncio.run(run())


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_openai_agents_handoff(
    agents_instrumented: SpanRecorder, fake_llm: FakeLLM, no_outbound: list[Any], api: str
) -> None:
    fake_llm.script(
        [
            tool_turn(call("lookup_account", {"customer": "me"})),
            tool_turn(call("transfer_to_billing_agent", "{}")),
            tool_turn(call("get_weather", {"city": "Paris"}), call("get_time", {})),
            text_turn("You owe 5. Paris: 18C at 12:00."),
        ]
    )
    tools = ToolLog()

    final = _run_handoff(fake_llm, tools, api=api)

    assert final == "You owe 5. Paris: 18C at 12:00." and fake_llm.consumed == 4
    (trace,) = agents_instrumented.traces()  # one run, though two agents took part
    assert (trace.agent_name, trace.handoffs) == ("Triage agent", ["Billing agent"])
    assert (trace.input, trace.output, trace.status) == (HANDOFF_USER, final, "success")
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == fake_llm.total_usage()
    assert [it.index for it in trace.iterations] == list(range(fake_llm.consumed))
    starts = [it.start_time for it in trace.iterations]
    assert starts == sorted(s for s in starts if s is not None)  # all recorded, in start order
    # The calls in the order made across the handoff; the bridge drops "{}" arguments and the
    # handoff span has no call id: both are recovered from the model's reply.
    actual = {name: result for name, _, result, _ in tools.calls}
    assert [(c.call_id, c.name, c.arguments, c.result, c.iteration, c.handoff) for c in trace.tool_calls] == [
        ("call_0_0", "lookup_account", {"customer": "me"}, actual["lookup_account"], 0, False),
        ("call_1_0", "transfer_to_billing_agent", {}, "Billing agent", 1, True),
        ("call_2_0", "get_weather", {"city": "Paris"}, actual["get_weather"], 2, False),
        ("call_2_1", "get_time", {}, actual["get_time"], 2, False),
    ]
    trace.assert_tool_call("get_weather", {"city": "Paris"})  # visible without nested=True
    assert [c.name for c in trace.all_tool_calls(nested=True)] == [c.name for c in trace.tool_calls]
    billing = trace.tool_calls[1].child
    assert billing is not None and (billing.agent_name, billing.output, billing.handoffs) == (
        "Billing agent",
        final,
        [],
    )
    assert [c.name for c in billing.tool_calls] == ["get_weather", "get_time"]
    served = fake_llm.turns[2:4]
    assert billing.usage.input_tokens == sum(t.input_tokens or 0 for t in served)
    prompts = [[(m.role, m.text) for m in (it.input_messages or [])[:1]] for it in trace.iterations]
    assert prompts == [[("system", "Route.")]] * 2 + [[("system", "Bill.")]] * 2
    if api == "responses":
        assert [s.name for s in trace.tool_schemas] == [
            "lookup_account",
            "transfer_to_billing_agent",
            "get_weather",
            "get_time",
        ]
        assert [s.name for s in billing.tool_schemas] == ["get_weather", "get_time"]
    assert all(isinstance(a, tuple) and str(a[0]).startswith("127.") for a in no_outbound)
