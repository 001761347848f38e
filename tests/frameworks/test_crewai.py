"""CrewAI with `openinference-instrumentation-crewai` and `-openai`, recorded for real.

A one-agent crew with one task (the scenario's prompt as its description) and CrewAI's native
OpenAI provider, whose OpenAI client the OpenAI instrumentor records; both instrumentors are
loaded by `opentelemetry-instrument` from their entry points. The crew's span is a container:
the trace is its agent's run, the prompt the task's description from `crew_tasks` and the answer
the `raw` text of the crew's output. CrewAI's anonymous telemetry and its cloud tracing are
switched off through their documented variables, as a user recording locally would.
"""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from harness import PROMPTS, SCENARIOS, assert_facts, check_readme_recipe, record

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import iter_traces
from evaltrace.collector.traces.explain import explain_trace

REQUIREMENTS = (
    "crewai==1.15.30",
    "openinference-instrumentation-crewai==1.1.21",
    "openinference-instrumentation-openai==0.1.66",
)
CREWAI_OFFLINE = {"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_TRACING_ENABLED": "false"}


@pytest.fixture(scope="module")
def python() -> Path:
    """The interpreter of the cached CrewAI venv."""
    return cached_venv(harness.VENVS / "crewai", REQUIREMENTS, with_evaltrace=True)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_crewai_rebuilds_every_fact(python: Path, scenario: str, tmp_path: Path) -> None:
    """Input, tool calls (names, arguments, results, errors), answer, usage and iterations come out exact."""
    recorded = record(python, "crewai_app.py", scenario, tmp_path, **CREWAI_OFFLINE)
    assert_facts(recorded, PROMPTS[scenario])
    (trace,) = recorded.traces
    # The trace is the agent's run (the crew around it is no call), and the model calls are its iterations.
    assert trace.name == "assistant._execute_core"
    assert all(it.model == "gpt-4o-mini" for it in trace.iterations)
    # --explain credits the crew span with the prompt instead of setting it aside.
    (spans,) = list(iter_traces(resolve_paths([tmp_path / "runs"])))
    readings = {r.name: r for r in explain_trace(spans, trace)}
    crew = next(r for name, r in readings.items() if name.endswith(".kickoff"))
    assert crew.became == ["the input"] and crew.set_aside is None


def test_crewai_recipe_as_written(python: Path, tmp_path: Path) -> None:
    """The README recipe, run as a user would in a venv with its pinned packages, rebuilds the whole run."""
    check_readme_recipe("crewai", python, tmp_path, REQUIREMENTS)
