"""A plain OpenAI client tool loop with no OpenTelemetry code at all, for `evaltrace run --agent`.

Nothing here instruments, records or wraps anything: what `evaltrace run` records of it comes
from the instrumentations it loads (`opentelemetry-instrumentation-openai-v2`), or from those
`opentelemetry-instrument` loaded when the run is started under it.
"""

from __future__ import annotations

import json

from openai import OpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def get_weather(city: str) -> str:
    return f"18C and sunny in {city}"


def answer(question: str) -> str:
    client = OpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY from the environment
    messages: list[object] = [{"role": "user", "content": question}]
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS).choices[0].message  # type: ignore[arg-type]
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply)
        for call in reply.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
