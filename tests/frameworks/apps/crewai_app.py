"""A one-agent CrewAI crew answering a scenario's prompt, recorded by OpenInference.

Run as `opentelemetry-instrument python crewai_app.py SCENARIO`: the CrewAI and OpenAI
instrumentors (`openinference-instrumentation-crewai`, `openinference-instrumentation-openai`)
are loaded from their entry points. The model is CrewAI's native OpenAI provider, which reads
`OPENAI_BASE_URL` (the scripted model server). CrewAI's own telemetry is switched off by
`CREWAI_DISABLE_TELEMETRY` in the environment (set by the test, as a user would).
"""

from __future__ import annotations

from _tools import get_weather, lookup, scenario
from crewai import LLM, Agent, Crew, Task
from crewai.tools import tool


@tool("get_weather")
def get_weather_tool(city: str) -> str:
    """Current weather in a city."""
    return get_weather(city)


@tool("lookup")
def lookup_tool(code: str) -> str:
    """Look a code up."""
    return lookup(code)


def main() -> None:
    _, prompt = scenario()
    agent = Agent(
        role="assistant",
        goal="Answer the user's request with the tools at hand.",
        backstory="A helpful assistant.",
        tools=[get_weather_tool, lookup_tool],
        llm=LLM(model="openai/gpt-4o-mini"),
        max_iter=5,
    )
    task = Task(description=prompt, expected_output="A short answer.", agent=agent)
    crew = Crew(agents=[agent], tasks=[task])
    print(crew.kickoff().raw)


if __name__ == "__main__":
    main()
