"""`evaltrace run` records an uninstrumented agent's model calls, and writes each span once.

The agent is a plain OpenAI client loop with no OpenTelemetry code (`apps/plain_openai_loop.py`);
the model is `FakeLLM`. Run plainly, `evaltrace run` loads the installed instrumentations as
`opentelemetry-instrument` would (the suite's venv has `opentelemetry-instrumentation-openai-v2`);
run under `opentelemetry-instrument` with evaltrace's exporter, the configurator's recording is
replaced by the run folder's, so no span is written twice (to the run folder and to `./runs`).
Real subprocesses, the real openai client and instrumentation, real Parquet files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from fake_llm import FakeLLM, call, text_turn, tool_turn
from readme_blocks import BIN, user_env

APP = Path(__file__).resolve().parent / "apps" / "plain_openai_loop.py"
QUESTION = "What's the weather in Paris?"
ANSWER = "It is 18C and sunny in Paris."
SPEC = f"""
cases:
  - id: paris
    input: "{QUESTION}"
    expect: {{output: {{contains: ["18C"]}}, tool_calls: [{{name: get_weather, arguments: {{city: Paris}}}}]}}
"""


def _run(folder: Path, *, under_instrument: bool, **extra: str) -> tuple[subprocess.CompletedProcess[str], FakeLLM]:
    shutil.copy(APP, folder / "app.py")
    (folder / "evals.yaml").write_text(SPEC, encoding="utf-8")
    command = [str(BIN / "evaltrace"), "run", "--agent", "app:answer", "--spec", "evals.yaml", "--out", "out"]
    if under_instrument:
        command = [str(BIN / "opentelemetry-instrument"), *command]
        extra = {"OTEL_TRACES_EXPORTER": "evaltrace", **extra}
    with FakeLLM([tool_turn(call("get_weather", {"city": "Paris"})), text_turn(ANSWER)]) as llm:
        done = subprocess.run(
            command, cwd=folder, env=user_env(llm, **extra), capture_output=True, text=True, timeout=240
        )
    return done, llm


def _trace(folder: Path) -> dict[str, Any]:
    done = subprocess.run(
        [str(BIN / "evaltrace"), "traces", "out", "--json"], cwd=folder, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    (trace,) = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return trace


def _span_ids(folder: Path) -> list[str]:
    """Every span id written anywhere under `folder` (span files only, not the score store), duplicates kept."""
    files = [
        p for p in folder.rglob("*.parquet") if ".evaltrace" not in p.parts and not p.name.endswith(".logs.parquet")
    ]
    return [span_id for path in files for span_id in pq.read_table(path, columns=["span_id"]).column(0).to_pylist()]


@pytest.mark.parametrize(
    ("under_instrument", "extra"),
    [
        (False, {}),
        # Content only as log records (GenAI events): they are recorded into the run folder too.
        (False, {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"}),
        (True, {}),
        (True, {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"}),
    ],
    ids=["plain", "plain-event-only", "instrument", "instrument-event-only"],
)
def test_the_model_calls_are_recorded_once_into_the_run_folder(
    tmp_path: Path, under_instrument: bool, extra: dict[str, str]
) -> None:
    done, llm = _run(tmp_path, under_instrument=under_instrument, **extra)
    assert done.returncode == 0, done.stdout + done.stderr  # the gate passed
    assert "Gate PASSED" in done.stdout and "Traceback" not in done.stderr
    assert len(llm.requests) == 2 and not llm.errors
    trace = _trace(tmp_path)
    assert (trace["case_id"], trace["input"], trace["output"]) == ("paris", QUESTION, ANSWER)
    assert [(c["name"], c["arguments"]) for c in trace["tool_calls"]] == [("get_weather", {"city": "Paris"})]
    assert len(trace["iterations"]) == 2
    assert (trace["usage"]["input_tokens"], trace["usage"]["output_tokens"]) == llm.total_usage()
    # Each span once, and only in the run folder: no `./runs` beside it.
    span_ids = _span_ids(tmp_path)
    assert len(span_ids) == len(set(span_ids)) == trace["span_count"] == 3  # the runner's root + 2 model calls
    assert not (tmp_path / "runs").exists()
    logs = list((tmp_path / "out").glob("*.logs.parquet"))
    assert bool(logs) == bool(extra)  # the content sent as log records was recorded beside the spans


def test_disabled_instrumentations_are_not_loaded(tmp_path: Path) -> None:
    # `opentelemetry-instrument`'s own switch works the same for `evaltrace run`.
    done, llm = _run(tmp_path, under_instrument=False, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="openai")
    assert len(llm.requests) == 2
    assert done.returncode == 1, done.stdout + done.stderr  # nothing of the model's was recorded
    trace = _trace(tmp_path)
    assert trace["iterations"] == [] and trace["span_count"] == 1
    # The reason says what is missing: the instrumentation, not content capture.
    (reason,) = [line for line in done.stdout.splitlines() if line.strip().startswith("- output:")]
    assert "is its model client instrumented?" in reason and "EVALTRACE_CAPTURE_CONTENT" not in reason


SELF_RECORDING_APP = """
from evaltrace.collector import agent_run, record, tool_call

record()  # an app that records itself: under `evaltrace run` it gets the run's recording


def answer(question: str) -> str:
    with agent_run("bot", input=question) as run:
        with tool_call("lookup", {"q": run.input}, call_id="c1") as call:
            call.result = "found"
        run.output = f"answer to {run.input}"
    return run.output
"""


def test_an_agent_that_records_itself_writes_into_the_run_folder_once(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(SELF_RECORDING_APP, encoding="utf-8")
    expect = "{output: {contains: [answer to hello]}, tool_calls: [{name: lookup, arguments: {q: hello}}]}"
    spec = f"cases:\n  - {{id: a, input: hello, expect: {expect}}}\n"
    (tmp_path / "evals.yaml").write_text(spec, encoding="utf-8")
    command = [str(BIN / "evaltrace"), "run", "--agent", "app:answer", "--spec", "evals.yaml", "--out", "out"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_"))}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    trace = _trace(tmp_path)
    assert (trace["input"], trace["output"]) == ("hello", "answer to hello")
    assert [(c["name"], c["arguments"], c["result"]) for c in trace["tool_calls"]] == [
        ("lookup", {"q": "hello"}, "found")
    ]
    span_ids = _span_ids(tmp_path)
    assert len(span_ids) == len(set(span_ids)) == 3  # the runner's root, the agent run, the tool call
    assert not list(tmp_path.glob("runs/*.parquet"))  # record()'s own folder got nothing
