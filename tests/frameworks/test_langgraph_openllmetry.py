"""LangGraph (LangChain's `create_agent`) with OpenLLMetry's LangChain instrumentation, recorded for real.

`opentelemetry-instrumentation-langchain` (OpenLLMetry) gets its own venv: it registers its
instrumentor under the entry-point name `langchain`, as OpenInference's does in the suite's venv.
`opentelemetry-instrument` loads it; the app has no tracing code. What the converter has to see
through: a lone `create_agent` span in a trace of its own (the graph being built), a bare
`invoke_agent` span above the workflow span, one task span per graph node (model, tools and the
middleware's hooks: steps, never tool calls), the workflow's input and output as LangChain
callback records (`{"inputs": ...}`, `{"outputs": {"messages": [...]}}`), and tool spans holding
the callback's arguments (`{"input_str", "inputs", ...}`) and a serialised `ToolMessage`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from fake_llm import FakeLLM, call, text_turn, tool_turn
from harness import SCENARIOS, assert_facts, record
from readme_blocks import run_lines, user_env

from tests.frameworks.apps._tools import PROMPTS

REQUIREMENTS = (
    "langgraph==1.2.24",
    "langchain==1.5.2",
    "langchain-openai==1.7.4",
    "opentelemetry-instrumentation-langchain==0.62.4",
)


RECIPE_APP = '''from langchain.agents import create_agent
from langchain_openai import ChatOpenAI


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"18C and sunny in {city}"


agent = create_agent(ChatOpenAI(model="gpt-4o-mini"), [get_weather])
result = agent.invoke({"messages": [("user", "What's the weather in Paris?")]})
print(result["messages"][-1].content)
'''
RECIPE_LINES = ["OTEL_TRACES_EXPORTER=evaltrace opentelemetry-instrument python app.py", "evaltrace traces runs"]
"""The README recipe for LangGraph with OpenLLMetry (app.py and the commands after installing the pins above)."""


@pytest.fixture(scope="module")
def python() -> Path:
    """The interpreter of the cached LangGraph + OpenLLMetry venv."""
    return cached_venv(harness.VENVS / "langgraph_openllmetry", REQUIREMENTS, with_evaltrace=True)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_langgraph_openllmetry_rebuilds_every_fact(python: Path, scenario: str, tmp_path: Path) -> None:
    """Input, tool calls (unwrapped arguments and results, errors), answer, usage and iterations come out exact."""
    recorded = record(python, "langgraph_openllmetry_app.py", scenario, tmp_path)
    assert_facts(recorded, PROMPTS[scenario])
    (trace,) = recorded.traces
    # The graph's nodes (model, tools, middleware hooks) are steps: only the tools' own spans are calls.
    assert {c.name for c in trace.tool_calls} <= {"get_weather", "lookup"}
    assert all(c.call_id is not None and c.call_id.startswith("call_") for c in trace.tool_calls)


def test_langgraph_openllmetry_recipe_as_written(python: Path, tmp_path: Path) -> None:
    """The README recipe, run as a user would in a venv with the pinned packages, rebuilds the whole run."""
    (tmp_path / "app.py").write_text(RECIPE_APP, encoding="utf-8")
    answer = "It is 18C and sunny in Paris."
    with FakeLLM([tool_turn(call("get_weather", {"city": "Paris"})), text_turn(answer)]) as llm:
        env = user_env(llm, PATH=f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}")
        outputs = run_lines([*RECIPE_LINES, "evaltrace traces runs --json"], tmp_path, env)
        usage = llm.total_usage()
        assert llm.consumed == 2 and not llm.errors
    assert outputs[0].stdout.strip() == answer
    assert outputs[1].stdout.rstrip().endswith("1 trace")  # the graph's create_agent span makes no trace
    (trace,) = [json.loads(line) for line in outputs[2].stdout.splitlines()]
    assert (trace["input"], trace["output"]) == ("What's the weather in Paris?", answer)
    assert [(c["name"], c["arguments"], c["result"], c["error"]) for c in trace["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}, "18C and sunny in Paris", None)
    ]
    assert (trace["usage"]["input_tokens"], trace["usage"]["output_tokens"]) == usage
    assert len(trace["iterations"]) == 2
