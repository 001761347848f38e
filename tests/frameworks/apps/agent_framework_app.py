"""A Microsoft Agent Framework `Agent` (OpenAI chat client on OPENAI_BASE_URL) answering one scenario.

Run as `opentelemetry-instrument python agent_framework_app.py SCENARIO`: Agent Framework makes
its own GenAI spans (`invoke_agent`, `chat`, `execute_tool`) through the global tracer provider,
which opentelemetry-instrument has already set up, so the app calls neither
`configure_otel_providers()` (that would build providers and exporters of its own) nor anything
else: instrumentation is on by default. Message content and tool arguments/results need
`ENABLE_SENSITIVE_DATA=true`, which evaltrace's distro sets when it records. A tool exception is
reported back to the model as an error function result by Agent Framework itself.

`OpenAIChatClient` speaks the Responses API; `AGENT_FRAMEWORK_CLIENT=chat_completions` picks
`OpenAIChatCompletionClient` (Chat Completions) instead, which openai-v2 instruments as well.
"""

from __future__ import annotations

import asyncio
import os

from _tools import get_weather, lookup, scenario
from agent_framework import Agent, tool
from agent_framework.openai import OpenAIChatClient, OpenAIChatCompletionClient


async def answer(prompt: str) -> str:
    """Run the agent on `prompt` and return its answer's text."""
    chat_completions = os.environ.get("AGENT_FRAMEWORK_CLIENT") == "chat_completions"
    kind = OpenAIChatCompletionClient if chat_completions else OpenAIChatClient
    client = kind(model="fake-model", api_key=os.environ["OPENAI_API_KEY"], base_url=os.environ["OPENAI_BASE_URL"])
    agent = Agent(
        client,
        "Answer with the tools.",
        name="weather_agent",
        tools=[tool(get_weather), tool(lookup)],
    )
    result = await agent.run(prompt)
    return result.text


def main() -> None:
    """Answer the scenario's prompt and print the answer last."""
    _, prompt = scenario()
    print(asyncio.run(answer(prompt)).strip())


if __name__ == "__main__":
    main()
