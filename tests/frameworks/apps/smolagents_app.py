"""smolagents' ToolCallingAgent answering a scenario's prompt, recorded by OpenInference.

Run as `opentelemetry-instrument python smolagents_app.py SCENARIO`: the smolagents instrumentor
(`openinference-instrumentation-smolagents`) is loaded from its entry point. The model is
`OpenAIServerModel` pointed at `OPENAI_BASE_URL` (the scripted model server).
"""

from __future__ import annotations

import os

from _tools import get_weather, lookup, scenario
from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def get_weather_tool(city: str) -> str:
    """Current weather in a city.

    Args:
        city: the city's name.
    """
    return get_weather(city)


@tool
def lookup_tool(code: str) -> str:
    """Look a code up.

    Args:
        code: the code to look up.
    """
    return lookup(code)


get_weather_tool.name = "get_weather"
lookup_tool.name = "lookup"


def main() -> None:
    name, prompt = scenario()
    model = OpenAIServerModel(
        model_id="fake-model", api_base=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"]
    )
    agent = ToolCallingAgent(tools=[get_weather_tool, lookup_tool], model=model, max_steps=5)
    print(agent.run(prompt))


if __name__ == "__main__":
    main()
