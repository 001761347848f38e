"""A Strands agent (OpenAI model provider on OPENAI_BASE_URL) answering one scenario.

Run as `opentelemetry-instrument python strands_app.py SCENARIO`: Strands makes its own spans
through the global tracer provider, which opentelemetry-instrument has already set up, so no
`StrandsTelemetry()` setup is needed (it would make a provider of its own). A tool exception is
reported back to the model as an error tool result by Strands itself.
"""

from __future__ import annotations

import os

from _tools import get_weather, lookup, scenario
from strands import Agent, tool
from strands.models.openai import OpenAIModel


def main() -> None:
    """Answer the scenario's prompt and print the answer last."""
    _, prompt = scenario()
    model = OpenAIModel(
        client_args={"api_key": os.environ["OPENAI_API_KEY"], "base_url": os.environ["OPENAI_BASE_URL"]},
        model_id="fake-model",
    )
    agent = Agent(model=model, tools=[tool(get_weather), tool(lookup)], callback_handler=None)
    result = agent(prompt)
    print(str(result).strip())


if __name__ == "__main__":
    main()
