"""The openai client with opentelemetry-instrumentation-openai-v2, default and latest-experimental modes.

A hand-written agent loop (`genai_openai_v2_app.py`) runs in a subprocess per mode (the
instrumentation patches the openai module and reads its environment once per process), records
through `ParquetSpanExporter`, and reports what its tools did. The test reads the files back with
the reader and converter and compares.

- default mode: chat spans carry structure only (model, tokens, finish reasons; content goes to
  log records). Tool calls come from the app's `execute_tool` spans, input and output from the
  root span's own message attributes.
- `gen_ai_latest_experimental` + `SPAN_ONLY`: chat spans carry JSON messages. Tool spans match the
  model's calls by id; without tool spans, calls and results come from the model messages alone;
  input and output come from the first and last chat spans.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evaltrace.collector import resolve_paths
from evaltrace.collector.traces.rebuild import read_traces
from evaltrace.collector.traces.records import Trace

APP = Path(__file__).with_name("genai_openai_v2_app.py")
MODES = {
    "default": {"APP_ROOT_CONTENT": "1"},
    "latest": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    },
}


def _record(mode: str, out: Path) -> tuple[list[Trace], list[dict[str, Any]]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_", "APP_"))}
    env.update(MODES[mode])
    done = subprocess.run([sys.executable, str(APP), str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return list(read_traces(resolve_paths([out]))), json.loads((out / "expected.json").read_text())


@pytest.fixture(scope="module", params=list(MODES))
def recorded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, list[Trace], list[dict[str, Any]]]:
    mode = str(request.param)
    traces, expected = _record(mode, tmp_path_factory.mktemp(f"openai-v2-{mode}"))
    return mode, traces, expected


def test_every_scenario_rebuilds_to_what_the_loop_did(recorded: tuple[str, list[Trace], list[dict[str, Any]]]) -> None:
    mode, traces, expected = recorded
    by_case = {t.case_id: t for t in traces}
    assert sorted(by_case) == sorted(e["case_id"] for e in expected)
    if mode == "default":
        expected = [e for e in expected if e["tool_spans"]]  # without spans or content there is nothing to see
    for want in expected:
        trace = by_case[want["case_id"]]
        label = want["case_id"]
        assert trace.input == want["input"], label
        assert trace.output == want["output"], label
        assert trace.conversation_id == f"conv-{label}"
        assert [c.name for c in trace.tool_calls] == [c["name"] for c in want["tool_calls"]], label
        assert [c.call_id for c in trace.tool_calls] == [c["call_id"] for c in want["tool_calls"]], label
        assert [c.arguments for c in trace.tool_calls] == [c["arguments"] for c in want["tool_calls"]], label
        assert [c.error for c in trace.tool_calls] == [c["error"] for c in want["tool_calls"]], label
        # A failed call's result is what the loop told the model, visible only in the next model input.
        told = None if mode == "default" else "error: {}"
        results = [c["result"] if c["error"] is None else told and told.format(c["error"]) for c in want["tool_calls"]]
        assert [c.result for c in trace.tool_calls] == results, label
        assert len(trace.iterations) == want["iterations"], label
        assert [trace.usage.input_tokens, trace.usage.output_tokens] == want["usage"], label
        assert trace.models == ["fake-model"]
        assert trace.status == "success" and not trace.error


def test_latest_mode_links_tool_spans_to_the_requesting_model_call(
    recorded: tuple[str, list[Trace], list[dict[str, Any]]],
) -> None:
    mode, traces, _ = recorded
    parallel = next(t for t in traces if t.case_id == "parallel-plain-spans")
    if mode == "latest":
        assert [c.iteration for c in parallel.tool_calls] == [0, 0]
        assert [c.call_id for c in parallel.iterations[0].tool_calls] == ["call_0_0", "call_0_1"]
        assert parallel.iterations[1].input_messages is not None
        assert parallel.iterations[0].finish_reasons == ["tool_calls"]
    else:
        # Structure only: the calls are known from their spans, not from the model reply.
        assert [c.iteration for c in parallel.tool_calls] == [None, None]
        assert all(it.input_messages is None and it.output_messages is None for it in parallel.iterations)
    assert all(c.span_id is not None for c in parallel.tool_calls)
