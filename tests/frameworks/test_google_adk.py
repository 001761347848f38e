"""Google ADK (its own spans, tracer `gcp.vertex.agent`) with its LiteLlm model wrapper, recorded for real.

ADK needs no instrumentation package: its spans go to the global tracer provider that
`opentelemetry-instrument` sets up. Its content switch `ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS`
is on by default; the test sets nothing beyond what the harness sets.
"""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from harness import PROMPTS, SCENARIOS, assert_facts, check_readme_recipe, record

REQUIREMENTS = ("google-adk==2.13.0", "litellm==1.110.2")


@pytest.fixture(scope="module")
def python() -> Path:
    """The interpreter of the cached ADK venv."""
    return cached_venv(harness.VENVS / "google_adk", REQUIREMENTS, with_evaltrace=True)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_google_adk_rebuilds_every_fact(python: Path, scenario: str, tmp_path: Path) -> None:
    """Input, tool calls (names, arguments, results, errors), answer, usage and iterations come out exact."""
    assert_facts(record(python, "google_adk_app.py", scenario, tmp_path), PROMPTS[scenario])


def test_google_adk_content_on_spans(python: Path, tmp_path: Path) -> None:
    """With content on the spans (`SPAN_ONLY`, what the distro picks on the latest GenAI conventions) too.

    Then the tool spans carry ADK's `{"result": ...}` envelope themselves, and parallel calls still
    leave the merged-response span that restates them.
    """
    recorded = record(
        python,
        "google_adk_app.py",
        "parallel",
        tmp_path,
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_ONLY",
    )
    assert_facts(recorded, PROMPTS["parallel"])


def test_google_adk_legacy_telemetry_schema(python: Path, tmp_path: Path) -> None:
    """ADK's legacy schema (ADK 1.x's, or `ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`): content in `gcp.vertex.agent.*`.

    Its `invocation` root, `call_llm` model spans each around a `generate_content` span, and tool
    spans with `tool_call_args` / `tool_response` rebuild the same facts.
    """
    recorded = record(python, "google_adk_app.py", "parallel", tmp_path, ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN="1")
    assert_facts(recorded, PROMPTS["parallel"])


def test_google_adk_recipe_as_written(python: Path, tmp_path: Path) -> None:
    """The README recipe, run as a user would in a venv with its pinned packages, rebuilds the whole run."""
    check_readme_recipe("google-adk", python, tmp_path, REQUIREMENTS)
