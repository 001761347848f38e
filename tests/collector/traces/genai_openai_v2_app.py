"""A hand-written agent loop on the openai client, instrumented by opentelemetry-instrumentation-openai-v2.

Run as a subprocess by `test_frameworks_genai_openai_v2.py` (the instrumentation patches the
openai module and reads its environment once, so each mode gets a fresh process):

    python genai_openai_v2_app.py OUT_DIR

It runs every scenario against its own `FakeLLM`, records spans with `ParquetSpanExporter` into
OUT_DIR, and writes OUT_DIR/expected.json: per scenario, what the tools actually did, the final
answer and the token totals the server served. The loop creates the spans a hand-instrumented app
would: an `invoke_agent` root (GenAI agent attributes, `evaltrace.case_id`) and one
`execute_tool` span per tool run; the instrumentation adds one `chat` span per model call.
Environment: `APP_ROOT_CONTENT=1` puts the user message and final answer on the root span.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for fake_llm

import openai
from fake_llm import FakeLLM, Turn, call, text_turn, tool_turn
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode, Tracer

from evaltrace.collector.recorder.exporter import ParquetSpanExporter

PROMPT = "What's the weather in Paris?"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} tool",
            "parameters": {"type": "object", "properties": {param: {"type": "string"}}, "required": [param]},
        },
    }
    for name, param in (("get_weather", "city"), ("lookup", "code"))
]


def get_weather(city: str) -> str:
    return f"18C in {city}"


def lookup(code: str) -> str:
    raise KeyError(f"unknown code {code}")


SCENARIOS: dict[str, list[Turn]] = {
    "sequential": [
        tool_turn(call("get_weather", {"city": "Paris"})),
        tool_turn(call("get_weather", {"city": "Lyon"})),
        text_turn("Paris 18C, Lyon 18C."),
    ],
    "parallel": [
        tool_turn(call("get_weather", {"city": "Paris"}), call("get_weather", {"city": "Rome"})),
        text_turn("Both 18C."),
    ],
    "failing_tool": [tool_turn(call("lookup", {"code": "X1"})), text_turn("Lookup failed.")],
    "no_tool": [text_turn("Hello there.")],
}


def run_tool(tracer: Tracer, name: str, call_id: str, arguments: str, with_span: bool) -> dict[str, Any]:
    """Run one tool (inside an `execute_tool` span when `with_span`), returning what happened."""
    func = {"get_weather": get_weather, "lookup": lookup}[name]
    outcome: dict[str, Any] = {"call_id": call_id, "name": name, "arguments": json.loads(arguments)}
    if not with_span:
        outcome["result"] = func(**json.loads(arguments))
        outcome["error"] = None
        return outcome
    attributes = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.call.arguments": arguments,
    }
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes, record_exception=False) as span:
        try:
            result = func(**json.loads(arguments))
        except KeyError as exc:
            span.record_exception(exc)
            span.set_attribute("error.type", type(exc).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            outcome.update(result=None, error=f"KeyError: {exc}")
            return outcome
        span.set_attribute("gen_ai.tool.call.result", result)
        outcome.update(result=result, error=None)
        return outcome


def run_scenario(tracer: Tracer, name: str, turns: list[Turn], *, stream: bool, tool_spans: bool) -> dict[str, Any]:
    """The agent loop: call the model, run the tools it asks for, until it answers."""
    with FakeLLM(turns) as fake, openai.OpenAI(base_url=fake.base_url, api_key="test") as client:
        case_id = f"{name}-{'stream' if stream else 'plain'}-{'spans' if tool_spans else 'nospans'}"
        root_attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather_loop",
            "gen_ai.conversation.id": f"conv-{case_id}",
            "evaltrace.case_id": case_id,
        }
        with tracer.start_as_current_span("invoke_agent weather_loop", attributes=root_attrs) as root:
            if os.environ.get("APP_ROOT_CONTENT") == "1":
                user = [{"role": "user", "parts": [{"type": "text", "content": PROMPT}]}]
                root.set_attribute("gen_ai.input.messages", json.dumps(user))
            messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
            calls: list[dict[str, Any]] = []
            answer = None
            while answer is None:
                message = _complete(client, messages, stream)
                if not message["tool_calls"]:
                    answer = message["content"]
                    break
                messages.append(
                    {"role": "assistant", "content": message["content"], "tool_calls": message["tool_calls"]}
                )
                for tc in message["tool_calls"]:
                    fn = tc["function"]
                    outcome = run_tool(tracer, fn["name"], tc["id"], fn["arguments"], tool_spans)
                    calls.append(outcome)
                    content = outcome["result"] if outcome["error"] is None else f"error: {outcome['error']}"
                    messages.append({"role": "tool", "tool_call_id": tc["id"], "content": content})
            if os.environ.get("APP_ROOT_CONTENT") == "1":
                reply = [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
                root.set_attribute("gen_ai.output.messages", json.dumps(reply))
        usage = fake.total_usage()
        return {
            "case_id": case_id,
            "input": PROMPT,
            "output": answer,
            "tool_calls": calls,
            "usage": list(usage),
            "iterations": fake.consumed,
            "stream": stream,
            "tool_spans": tool_spans,
        }


def _complete(client: openai.OpenAI, messages: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    if not stream:
        reply = client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        msg = reply.choices[0].message
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
            for c in msg.tool_calls or []
        ]
        return {"content": msg.content, "tool_calls": calls}
    chunks = client.chat.completions.create(
        model="fake-model",
        messages=messages,
        tools=TOOLS,
        stream=True,
        stream_options={"include_usage": True},  # type: ignore[arg-type]
    )
    text, calls = "", {}
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for delta in choice.delta.tool_calls or []:
                entry = calls.setdefault(
                    delta.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                entry["id"] = delta.id or entry["id"]
                if delta.function is not None:
                    entry["function"]["name"] += delta.function.name or ""
                    entry["function"]["arguments"] += delta.function.arguments or ""
    return {"content": text or None, "tool_calls": [calls[i] for i in sorted(calls)]}


def main(out_dir: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(out_dir, run_id="openai-v2")))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("app")
    expected = []
    for name, turns in SCENARIOS.items():
        for stream in (False, True):
            expected.append(run_scenario(tracer, name, list(turns), stream=stream, tool_spans=True))
            provider.force_flush()  # a file per scenario: traces are read back across files
    for name in ("sequential", "parallel"):
        expected.append(run_scenario(tracer, name, list(SCENARIOS[name]), stream=False, tool_spans=False))
    provider.shutdown()
    (out_dir / "expected.json").write_text(json.dumps(expected))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
