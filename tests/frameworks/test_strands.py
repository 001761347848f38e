"""Strands Agents (its own spans) with its OpenAI model provider, recorded for real.

Strands needs no instrumentation package: its tracer takes the global tracer provider, which
`opentelemetry-instrument` sets up before the app runs, so the app does not call
`StrandsTelemetry()` (that would set a provider of its own). Content is recorded by default, as
span events; the test sets nothing beyond what the harness sets.
"""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from harness import PROMPTS, SCENARIOS, assert_facts, check_readme_recipe, record

# Strands requires opentelemetry-instrumentation-threading, whose newest release pins an
# opentelemetry-instrumentation this index does not serve beside evaltrace's: pip backtracks into
# a conflict unless the pair is pinned together.
REQUIREMENTS = (
    "strands-agents[openai]==1.62.0",
    "opentelemetry-instrumentation-threading==0.66b1",
    "opentelemetry-instrumentation==0.66b1",
)


@pytest.fixture(scope="module")
def python() -> Path:
    """The interpreter of the cached Strands venv."""
    return cached_venv(harness.VENVS / "strands", REQUIREMENTS, with_evaltrace=True)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_strands_rebuilds_every_fact(python: Path, scenario: str, tmp_path: Path) -> None:
    """Input, tool calls (names, arguments, results, errors), answer, usage and iterations come out exact."""
    assert_facts(record(python, "strands_app.py", scenario, tmp_path), PROMPTS[scenario])


def test_strands_on_the_latest_genai_conventions(python: Path, tmp_path: Path) -> None:
    """Opted into the latest GenAI conventions, Strands splits each span's messages over two events; still exact."""
    recorded = record(
        python, "strands_app.py", "parallel", tmp_path, OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental"
    )
    assert_facts(recorded, PROMPTS["parallel"])


def test_strands_recipe_as_written(python: Path, tmp_path: Path) -> None:
    """The README recipe, run as a user would in a venv with its pinned packages, rebuilds the whole run."""
    check_readme_recipe("strands", python, tmp_path, REQUIREMENTS)
