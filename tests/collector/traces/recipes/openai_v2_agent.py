"""A plain OpenAI client tool loop, recorded by evaltrace: the README's "Record your own agent" recipe.

Run exactly as the README says (the test does the same, pointing OPENAI_BASE_URL at a local
scripted server):

    pip install 'evaltrace[openai]'
    OTEL_TRACES_EXPORTER=evaltrace opentelemetry-instrument python agent.py
"""

import json

from openai import OpenAI

from evaltrace.collector import agent_run, tool_call

client = OpenAI()  # reads OPENAI_API_KEY (and OPENAI_BASE_URL, if set)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


def get_weather(city: str) -> str:
    return f"18°C and sunny in {city}"


def run_agent(question: str) -> str:
    messages = [{"role": "user", "content": question}]
    while True:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            return message.content
        messages.append(message)
        for call in message.tool_calls:
            with tool_call(call.function.name, call.function.arguments, call_id=call.id) as tool:
                tool.result = get_weather(**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": tool.result})


question = "What's the weather in Paris?"
with agent_run("weather-agent", input=question, case_id="paris-weather") as run:
    run.output = run_agent(run.input)
print(run.output)
