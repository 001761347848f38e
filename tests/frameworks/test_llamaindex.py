"""LlamaIndex's FunctionAgent with `openinference-instrumentation-llama-index`, recorded for real.

The app switches the instrumentor on in code (OpenInference's documented one-liner; its entry
point is skipped by `opentelemetry-instrument`, see the app) and records through evaltrace's
exporter picked by `OTEL_TRACES_EXPORTER=evaltrace`. What the converter has to see through: the
workflow's root span records its start state as input and a cut-short repr of its `StopEvent` as
output, tool spans wrap arguments as `{"kwargs": ...}` and results as the whole `ToolOutput`, and
each model call is described by two LLM spans (`_prepare_chat_with_tools`, then the call).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from fake_llm import FakeLLM, call, text_turn, tool_turn
from harness import SCENARIOS, assert_facts, record
from readme_blocks import run_lines, user_env

from evaltrace.collector.explain import explain_trace
from evaltrace.collector.reader import iter_traces
from tests.frameworks.apps._tools import PROMPTS

REQUIREMENTS = (
    "llama-index-core==0.14.25",
    "llama-index-llms-openai==0.8.3",
    "openinference-instrumentation-llama-index==4.6.1",
)


RECIPE_APP = '''import asyncio

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.llms.openai import OpenAI
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

LlamaIndexInstrumentor().instrument()


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"18C and sunny in {city}"


# FunctionAgent streams; a stream reports token usage only when asked for it.
llm = OpenAI(model="gpt-4o-mini", additional_kwargs={"stream_options": {"include_usage": True}})
agent = FunctionAgent(tools=[get_weather], llm=llm)


async def main() -> None:
    print(await agent.run(user_msg="What's the weather in Paris?"))


asyncio.run(main())
'''
RECIPE_LINES = ["OTEL_TRACES_EXPORTER=evaltrace opentelemetry-instrument python app.py", "evaltrace traces runs"]
"""The README recipe for LlamaIndex (app.py and the commands after installing the pins above)."""


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
    (spans,) = iter_traces([tmp_path / "runs"])
    readings = [r for r in explain_trace(spans, trace) if r.name.endswith("_prepare_chat_with_tools")]
    assert len(readings) == recorded.model_calls
    assert all(not r.became and "prepared the request" in (r.set_aside or "") for r in readings)


def test_llamaindex_recipe_as_written(python: Path, tmp_path: Path) -> None:
    """The README recipe, run as a user would in a venv with the pinned packages, rebuilds the whole run.

    LlamaIndex's OpenAI class takes another server's address from `OPENAI_API_BASE` (its own
    variable; it does not read `OPENAI_BASE_URL`): that is how the user points it at the scripted model.
    """
    (tmp_path / "app.py").write_text(RECIPE_APP, encoding="utf-8")
    answer = "It is 18C and sunny in Paris."
    with FakeLLM([tool_turn(call("get_weather", {"city": "Paris"})), text_turn(answer)]) as llm:
        path = f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"
        env = user_env(llm, PATH=path, OPENAI_API_BASE=llm.base_url)
        outputs = run_lines([*RECIPE_LINES, "evaltrace traces runs --json"], tmp_path, env)
        usage = llm.total_usage()
        assert llm.consumed == 2 and not llm.errors
    assert outputs[0].stdout.strip() == answer
    assert outputs[1].stdout.rstrip().endswith("1 trace")
    (trace,) = [json.loads(line) for line in outputs[2].stdout.splitlines()]
    assert (trace["input"], trace["output"]) == ("What's the weather in Paris?", answer)
    assert [(c["name"], c["arguments"], c["result"], c["error"]) for c in trace["tool_calls"]] == [
        ("get_weather", {"city": "Paris"}, "18C and sunny in Paris", None)
    ]
    assert (trace["usage"]["input_tokens"], trace["usage"]["output_tokens"]) == usage
    assert len(trace["iterations"]) == 2


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
