"""LlamaIndex's FunctionAgent with `openinference-instrumentation-llama-index`, recorded for real.

The app switches the instrumentor on in code (OpenInference's documented one-liner; its entry
point is skipped by `opentelemetry-instrument`, see the app) and records through evaltrace's
exporter picked by `OTEL_TRACES_EXPORTER=evaltrace`. What the converter has to see through: the
workflow's root span records its start state as input and a cut-short repr of its `StopEvent` as
output, tool spans wrap arguments as `{"kwargs": ...}` and results as the whole `ToolOutput`, and
each model call is described by two LLM spans (`_prepare_chat_with_tools`, then the call).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from harness import SCENARIOS, assert_facts, check_readme_recipe, record

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import iter_traces
from evaltrace.collector.traces.explain import explain_trace
from tests.frameworks.apps._tools import PROMPTS

REQUIREMENTS = (
    "llama-index-core==0.14.25",
    "llama-index-llms-openai==0.8.3",
    "openinference-instrumentation-llama-index==4.6.1",
)


@pytest.fixture(scope="module")
def python() -> Path:
    """The interpreter of the cached LlamaIndex venv."""
    return cached_venv(harness.VENVS / "llamaindex", REQUIREMENTS, with_evaltrace=True)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_llamaindex_rebuilds_every_fact(python: Path, scenario: str, tmp_path: Path) -> None:
    """Input, tool calls (unwrapped arguments and results, errors), answer, usage and iterations come out exact."""
    recorded = record(python, "llamaindex_app.py", scenario, tmp_path)
    assert_facts(recorded, PROMPTS[scenario])
    (trace,) = recorded.traces
    # Each iteration is the model call itself, the span that carries the reply, never its preparation.
    assert all(it.output_messages for it in trace.iterations)
    assert trace.convention == "openinference"
    # --explain names each preparation span and why it is no iteration.
    (spans,) = iter_traces(resolve_paths([tmp_path / "runs"]))
    readings = [r for r in explain_trace(spans, trace) if r.name.endswith("_prepare_chat_with_tools")]
    assert len(readings) == recorded.model_calls
    assert all(not r.became and "prepared the request" in (r.set_aside or "") for r in readings)


def test_llamaindex_recipe_as_written(python: Path, tmp_path: Path) -> None:
    """The README recipe, run as a user would in a venv with its pinned packages, rebuilds the whole run."""
    check_readme_recipe("llamaindex", python, tmp_path, REQUIREMENTS)


def test_doctor_says_opentelemetry_instrument_skips_the_llama_index_instrumentor(python: Path, tmp_path: Path) -> None:
    """Why the app instruments in code: `evaltrace doctor` in that venv names the skipped entry point and the cause."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_", "VIRTUAL"))}
    done = subprocess.run(
        [str(python.parent / "evaltrace"), "doctor"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    lines = [line for line in done.stdout.splitlines() if "'llama_index'" in line]
    assert len(lines) == 1, done.stdout + done.stderr
    assert lines[0].startswith("warn") and "llama-index-multi-modal-llms-openai" in lines[0]
    assert ".instrument()" in lines[0]
