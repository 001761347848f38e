"""A Google ADK agent (LiteLlm model wrapper on the OpenAI-compatible OPENAI_BASE_URL) answering one scenario.

Run as `opentelemetry-instrument python google_adk_app.py SCENARIO`: ADK makes its own spans
(tracer `gcp.vertex.agent`) on the global tracer provider that opentelemetry-instrument set up,
so no instrumentation package is needed. LiteLLM's `openai/` provider reads OPENAI_BASE_URL and
OPENAI_API_KEY. A tool exception is reported back to the model through ADK's documented
`on_tool_error_callback` (ADK raises it out of the run otherwise).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

# LiteLLM fetches its model price map from the internet at import unless told to use its copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from _tools import get_weather, lookup, scenario
from google.adk.agents import LlmAgent
from google.adk.models.lite_llm import LiteLlm
from google.adk.runners import InMemoryRunner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types


async def report_tool_error(
    tool: BaseTool, args: dict[str, Any], tool_context: ToolContext, error: Exception
) -> dict[str, Any]:
    """Give the model the tool's error as the tool's response, so the run goes on."""
    return {"error": f"{type(error).__name__}: {error}"}


async def main() -> None:
    """Answer the scenario's prompt and print the answer last."""
    _, prompt = scenario()
    agent = LlmAgent(
        name="weather_agent",
        model=LiteLlm(model="openai/fake-model"),
        instruction="Answer with the tools.",
        tools=[get_weather, lookup],
        on_tool_error_callback=report_tool_error,
    )
    runner = InMemoryRunner(agent=agent, app_name="evaltrace_frameworks")
    session = await runner.session_service.create_session(app_name="evaltrace_frameworks", user_id="user")
    message = types.Content(role="user", parts=[types.Part(text=prompt)])
    answer = ""
    async for event in runner.run_async(user_id="user", session_id=session.id, new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            answer = "".join(part.text or "" for part in event.content.parts)
    print(answer)


if __name__ == "__main__":
    asyncio.run(main())
