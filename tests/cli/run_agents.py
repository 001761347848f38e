"""Agents for the `evaltrace run` tests, copied into each test's working directory.

They write OTel GenAI spans themselves: an `invoke_agent` span with the question and the answer,
and one `execute_tool lookup` span. The question picks the behaviour: "slow" sleeps past the
test's timeout (then still ends its spans), "boom" raises, anything else answers.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from opentelemetry import trace

tracer = trace.get_tracer("tests.run_agents")
SLOW_SECONDS = 1.5
NOT_A_FUNCTION = 42


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def answer(question: str, *, history: list[dict[str, Any]] | None = None, conversation_id: str | None = None) -> str:
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "bot",
        "gen_ai.input.messages": _messages("user", question),
    }
    with tracer.start_as_current_span("invoke_agent bot", attributes=attributes) as span:
        if "slow" in question:
            time.sleep(SLOW_SECONDS)
        if "boom" in question:
            raise ValueError("boom")
        if "pause" in question:
            time.sleep(0.8)
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "lookup",
            "gen_ai.tool.call.arguments": json.dumps({"q": question}),
            "gen_ai.tool.call.result": "found",
        }
        with tracer.start_as_current_span("execute_tool lookup", attributes=tool):
            pass
        text = f"answer to {question}; history {len(history or [])}; conversation {conversation_id is not None}"
        span.set_attribute("gen_ai.output.messages", _messages("assistant", text))
        return text


async def answer_async(question: str) -> str:
    if "slow" in question:
        await asyncio.sleep(SLOW_SECONDS)
    # The sync part must not block the loop, so the async agent never sleeps in `answer`.
    return answer(question.replace("slow", "fast").replace("pause", "go on"))
