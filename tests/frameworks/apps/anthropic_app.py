"""A hand-written tool loop on the `anthropic` SDK answering one scenario's prompt.

Run by tests/frameworks/test_anthropic.py as `opentelemetry-instrument python anthropic_app.py
SCENARIO` in a venv with the SDK and, per route, one instrumentation of it
(OpenInference's or OpenLLMetry's, loaded by `opentelemetry-instrument` from its entry point) or
none (the SDK's own spans, which it writes to the global tracer provider). The SDK's spans stay on
in every route, as it ships; the test switches their content on with
`ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content`.

The conversation is one `agent_run`; each tool runs inside `tool_call` (its own span: arguments,
result, and the exception of a failing tool), unless `TOOL_SPANS=0` leaves the tools unrecorded,
so the calls can only be rebuilt from the model spans. A failing tool's error goes back to the
model as a `tool_result` block with `is_error: true`, as Anthropic's docs say to.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import anthropic
from _tools import get_weather, lookup, scenario

from evaltrace.collector import agent_run, tool_call

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
    {
        "name": "lookup",
        "description": "Look a code up.",
        "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    },
]
FUNCTIONS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "lookup": lookup}


def run_tool(block: Any, spans: bool) -> dict[str, Any]:
    """Run one `tool_use` block; its `tool_result` block (`is_error` when the tool raised)."""
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.id}
    try:
        recorder = tool_call(block.name, block.input, call_id=block.id) if spans else nullcontext()
        with recorder as call:
            value = FUNCTIONS[block.name](**block.input)
            if call is not None:
                call.result = value
        result["content"] = value
    except Exception as exc:  # any tool failure goes back to the model
        result.update(content=f"Tool error: {exc}", is_error=True)
    return result


def main() -> None:
    """Run the loop on the scenario's prompt; the answer is the last line printed."""
    _, prompt = scenario()
    spans = os.environ.get("TOOL_SPANS", "1") != "0"
    client = anthropic.Anthropic()
    with agent_run("weather-agent", input=prompt) as run:
        messages: list[dict[str, Any]] = [{"role": "user", "content": run.input}]
        while True:
            reply = client.messages.create(model="claude-sonnet-4-6", max_tokens=1024, tools=TOOLS, messages=messages)
            messages.append({"role": "assistant", "content": reply.content})
            if reply.stop_reason != "tool_use":
                break
            uses = [block for block in reply.content if block.type == "tool_use"]
            messages.append({"role": "user", "content": [run_tool(block, spans) for block in uses]})
        answer = "".join(block.text for block in reply.content if block.type == "text")
        run.output = answer
    print(answer)


if __name__ == "__main__":
    main()
