"""A LangGraph agent (LangChain's `create_agent`) answering one scenario's prompt, traced by OpenLLMetry.

Run by tests/frameworks/test_langgraph_openllmetry.py as `opentelemetry-instrument python
langgraph_openllmetry_app.py SCENARIO` in a venv with OpenLLMetry's
`opentelemetry-instrumentation-langchain`: `opentelemetry-instrument` loads its instrumentor from
its entry point, so the app has no tracing code (OpenLLMetry's way for an app that already runs
OpenTelemetry; `traceloop-sdk` itself cannot be installed beside evaltrace, its dependencies
conflict). Content is recorded by default (`TRACELOOP_TRACE_CONTENT`, default true), and the
instrumentation sends no telemetry of its own.

`create_agent` raises a tool's exception out of the run by default; LangChain's documented way to
hand the error to the model instead is a `wrap_tool_call` middleware returning a `ToolMessage`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _tools import get_weather, lookup, scenario
from langchain.agents import create_agent
from langchain.agents.middleware import wrap_tool_call
from langchain_core.messages import ToolMessage
from langchain_openai import ChatOpenAI


@wrap_tool_call
def tool_errors_to_model(request: Any, handler: Callable[[Any], Any]) -> Any:
    """Give the model the tool's error as the tool's result, so it can answer."""
    try:
        return handler(request)
    except Exception as exc:  # any tool failure goes back to the model
        return ToolMessage(content=f"Tool error: {exc}", tool_call_id=request.tool_call["id"], status="error")


def main() -> None:
    """Run the agent on the scenario's prompt; the answer is the last line printed."""
    _, prompt = scenario()
    model = ChatOpenAI(model="gpt-4o-mini")
    agent = create_agent(model, [get_weather, lookup], system_prompt="Be brief.", middleware=[tool_errors_to_model])
    result = agent.invoke({"messages": [("user", prompt)]})
    print(result["messages"][-1].content)


if __name__ == "__main__":
    main()
