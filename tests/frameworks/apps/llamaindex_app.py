"""A LlamaIndex FunctionAgent answering one scenario's prompt (run by tests/frameworks/test_llamaindex.py).

Run as `opentelemetry-instrument python llamaindex_app.py SCENARIO` in the LlamaIndex venv. The
instrumentor is switched on in code, OpenInference's documented one-liner, on the tracer provider
`opentelemetry-instrument` set up: `opentelemetry-instrument` skips the package's entry point,
because its `instruments` extra lists `llama-index-multi-modal-llms-openai`, which is not installed
(a dependency conflict to it; openinference-instrumentation-llama-index 4.6.1).

The model is OpenAI's chat API at `OPENAI_API_BASE` (LlamaIndex's OpenAI class reads that
variable). `FunctionAgent` streams by default, and a stream reports token usage only when asked
(`stream_options.include_usage`). It uses the model's native tool calls and hands a tool's
exception back to the model as the tool's output.
"""

from __future__ import annotations

import asyncio

from _tools import get_weather, lookup, scenario
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.tools import FunctionTool
from llama_index.llms.openai import OpenAI
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

LlamaIndexInstrumentor().instrument()


async def main() -> None:
    """Run the agent on the scenario's prompt; the answer is the last line printed."""
    _, prompt = scenario()
    llm = OpenAI(model="gpt-4o-mini", additional_kwargs={"stream_options": {"include_usage": True}})
    agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(fn=get_weather), FunctionTool.from_defaults(fn=lookup)],
        llm=llm,
        system_prompt="Be brief.",
    )
    response = await agent.run(user_msg=prompt)
    print(str(response))


if __name__ == "__main__":
    asyncio.run(main())
