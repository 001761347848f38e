"""Microsoft Agent Framework (its own GenAI spans) with its OpenAI chat client, recorded for real.

Agent Framework needs no instrumentation package: its instrumentation is on by default and its
spans go to the global tracer provider that `opentelemetry-instrument` sets up. It puts message
content and tool arguments/results on its spans only with `ENABLE_SENSITIVE_DATA=true`, which
evaltrace's distro sets when evaltrace records and the user set nothing: the test sets nothing
beyond what the harness sets. `OpenAIChatClient` speaks the Responses API.
"""

from __future__ import annotations

from pathlib import Path

import harness
import pyarrow.parquet as pq
import pytest
from _venvs import cached_venv
from harness import PROMPTS, SCENARIOS, assert_facts, check_readme_recipe, record

# openai-v2 (the pins of evaltrace's `openai` extra) only for the test of two instrumentations of
# one model call: it instruments Chat Completions, not the Responses API the other tests use.
REQUIREMENTS = (
    "agent-framework-core==1.23.0",
    "agent-framework-openai==1.17.0",
    "opentelemetry-instrumentation-openai-v2==2.4b0",
    "opentelemetry-util-genai==1.1b0",
)
APP = "agent_framework_app.py"


@pytest.fixture(scope="module")
def python() -> Path:
    """The interpreter of the cached Agent Framework venv."""
    return cached_venv(harness.VENVS / "agent_framework", REQUIREMENTS, with_evaltrace=True)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_agent_framework_rebuilds_every_fact(python: Path, scenario: str, tmp_path: Path) -> None:
    """Input, tool calls (names, arguments, results, errors), answer, usage and iterations come out exact."""
    assert_facts(record(python, APP, scenario, tmp_path), PROMPTS[scenario])


def test_agent_framework_baseline_conventions(python: Path, tmp_path: Path) -> None:
    """On the v1.36 GenAI conventions (an opt-in list without `gen_ai_latest_experimental`) too.

    Then Agent Framework writes no messages or tool arguments on its spans: the content arrives
    only as GenAI event log records, which evaltrace records beside the spans.
    """
    recorded = record(python, APP, "failing_tool", tmp_path, OTEL_SEMCONV_STABILITY_OPT_IN="http")
    assert_facts(recorded, PROMPTS["failing_tool"])
    runs = tmp_path / "runs"
    span_files = [f for f in runs.glob("*.parquet") if not f.name.endswith(".logs.parquet")]
    attributes = [a for f in span_files for a in pq.read_table(f, columns=["attributes"]).column(0).to_pylist()]
    assert attributes and not any("gen_ai.input.messages" in a or "gen_ai.tool.call.arguments" in a for a in attributes)
    bodies = [b for f in runs.glob("*.logs.parquet") for b in pq.read_table(f, columns=["body"]).column(0).to_pylist()]
    assert any(PROMPTS["failing_tool"] in (b or "") for b in bodies)


def test_agent_framework_user_choice_keeps_content_off(python: Path, tmp_path: Path) -> None:
    """`ENABLE_SENSITIVE_DATA=false` set by the user wins: no content, yet the run's structure is exact."""
    recorded = record(python, APP, "sequential", tmp_path, ENABLE_SENSITIVE_DATA="false")
    (trace,) = recorded.traces
    assert trace.input is None and trace.output is None
    assert [(c.name, c.arguments, c.result, c.error) for c in trace.tool_calls] == [
        ("get_weather", None, None, None)
    ] * 2
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == recorded.usage
    assert len(trace.iterations) == recorded.model_calls


@pytest.mark.parametrize("scenario", ["sequential", "failing_tool"])
def test_agent_framework_with_openai_v2_too(python: Path, scenario: str, tmp_path: Path) -> None:
    """Chat Completions instrumented twice, Agent Framework's `chat` span with openai-v2's inside: one iteration.

    The model's requests are described by two spans each; the facts, iterations included, stay exact.
    """
    recorded = record(python, APP, scenario, tmp_path, AGENT_FRAMEWORK_CLIENT="chat_completions")
    assert_facts(recorded, PROMPTS[scenario])
    span_files = [f for f in (tmp_path / "runs").glob("*.parquet") if not f.name.endswith(".logs.parquet")]
    scopes = [s for f in span_files for s in pq.read_table(f, columns=["scope_name"]).column(0).to_pylist()]
    # openai-v2's spans come from util-genai's handler: one per request, beside Agent Framework's own.
    assert sum(s == "opentelemetry.util.genai.handler" for s in scopes) == recorded.model_calls, scopes


def test_agent_framework_recipe_as_written(python: Path, tmp_path: Path) -> None:
    """The README recipe, run as a user would in a venv with its pinned packages, rebuilds the whole run."""
    check_readme_recipe("agent-framework", python, tmp_path, REQUIREMENTS[:2])
