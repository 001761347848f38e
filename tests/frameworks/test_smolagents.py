"""smolagents' ToolCallingAgent with `openinference-instrumentation-smolagents`, recorded for real.

The instrumentor is loaded by `opentelemetry-instrument` from its entry point; the app only builds
the agent (`OpenAIServerModel` pointed at the scripted model). A ToolCallingAgent can only end a
run through its built-in `final_answer` tool (a plain text reply is a parsing error, after which
it asks the model again), so the scripted model's last turn calls `final_answer` with the
scenario's answer instead of replying with text. The facts are the user's: that call is the
answer, not one of the tool calls (the tool log, the truth, holds only `get_weather` and
`lookup`), while the model call that made it is an iteration like any other.
"""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from fake_llm import Turn, call, tool_turn
from harness import ANSWERS, PROMPTS, SCENARIOS, assert_facts, check_readme_recipe, record

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import iter_traces
from evaltrace.collector.traces.explain import explain_trace

REQUIREMENTS = ("smolagents[openai]==1.26.0", "openinference-instrumentation-smolagents==0.1.43")


@pytest.fixture(scope="module")
def python() -> Path:
    """The interpreter of the cached smolagents venv."""
    return cached_venv(harness.VENVS / "smolagents", REQUIREMENTS, with_evaltrace=True)


def script(scenario: str) -> list[Turn]:
    """The scenario's turns, the closing text reply replaced by smolagents' `final_answer` call."""
    turns = harness.turns(scenario)
    assert turns[-1].text == ANSWERS[scenario] and not turns[-1].tool_calls
    return [*turns[:-1], tool_turn(call("final_answer", {"answer": ANSWERS[scenario]}))]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_smolagents_rebuilds_every_fact(python: Path, scenario: str, tmp_path: Path) -> None:
    """Input, tool calls (names, unwrapped arguments, results, errors), answer, usage and iterations come out exact."""
    recorded = record(python, "smolagents_app.py", scenario, tmp_path, script=script(scenario))
    assert_facts(recorded, PROMPTS[scenario])
    (trace,) = recorded.traces
    # The answer call is left out of the tool calls, yet its model call keeps its iteration and its reply.
    last = trace.iterations[-1]
    assert last.tool_calls == []
    requested = [(p.name, p.arguments) for m in last.output_messages or [] for p in m.parts if p.type == "tool_call"]
    assert requested == [("final_answer", {"answer": ANSWERS[scenario]})]
    # --explain says why the FinalAnswerTool span is no tool call.
    (spans,) = list(iter_traces(resolve_paths([tmp_path / "runs"])))
    (answer_span,) = [r for r in explain_trace(spans, trace) if r.name == "FinalAnswerTool"]
    assert answer_span.set_aside is not None and "answer tool" in answer_span.set_aside


def test_smolagents_recipe_as_written(python: Path, tmp_path: Path) -> None:
    """The README recipe, run as a user would in a venv with its pinned packages, rebuilds the whole run."""
    check_readme_recipe("smolagents", python, tmp_path, REQUIREMENTS)
