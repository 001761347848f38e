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

from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from harness import SCENARIOS, assert_facts, check_readme_recipe, record

from tests.frameworks.apps._tools import PROMPTS

REQUIREMENTS = (
    "langgraph==1.2.24",
    "langchain==1.5.2",
    "langchain-openai==1.7.4",
    "opentelemetry-instrumentation-langchain==0.62.4",
)


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
    """The README recipe, run as a user would in a venv with its pinned packages, rebuilds the whole run."""
    check_readme_recipe("langgraph-openllmetry", python, tmp_path, REQUIREMENTS)
