"""The openai-v2 recipe without opentelemetry-instrument: `record()` in code, then instrument.

    pip install 'evaltrace[openai]'
    python agent.py

`record()` comes first: it turns GenAI content capture on, which the instrumentation reads when
it instruments.
"""

import json

from openai import OpenAI
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

from evaltrace.collector import agent_run, record

recorder = record()  # spans and log records to ./runs (EVALTRACE_DIR)
OpenAIInstrumentor().instrument()
client = OpenAI()


def get_weather(city: str) -> str:
    return f"18°C and sunny in {city}"


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


@agent_run("weather-agent")
def run_agent(question: str) -> str:
    messages = [{"role": "user", "content": question}]
    while True:
        message = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS).choices[0].message
        if not message.tool_calls:
            return message.content
        messages.append(message)
        for call in message.tool_calls:
            result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


print(run_agent("What's the weather in Paris?"))
recorder.stop()
