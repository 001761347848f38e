"""The README's "Record your own agent" openai-v2 recipe, run exactly as written.

`recipes/openai_v2_agent.py` is a plain OpenAI client tool loop wrapped in `agent_run`; it runs
in a subprocess under `opentelemetry-instrument` with only `OTEL_TRACES_EXPORTER=evaltrace` set
(plus the run folder, the scripted server's URL and a dummy key), with the real `openai` client
and the real `opentelemetry-instrumentation-openai-v2`, found through the entry points. The
rebuilt trace must hold the input, the tool call with its arguments and result, the answer and
the token usage the server served.

A second run sets `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=EVENT_ONLY`: the
instrumentation then sends all content as OTel log records (GenAI events) and none on spans, so
the same rebuild proves the logs exporter (default on under evaltrace's distro) and the reader
attaching the records to their spans.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fake_llm import FakeLLM, call, text_turn, tool_turn

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import summarize_runs
from evaltrace.collector.traces.rebuild import read_traces

RECIPE = Path(__file__).parent / "recipes" / "openai_v2_agent.py"
INSTRUMENT = str(Path(sys.executable).parent / "opentelemetry-instrument")
ANSWER = "It is 18°C and sunny in Paris."


def _run_recipe(folder: Path, **extra: str) -> tuple[subprocess.CompletedProcess[str], tuple[int, int]]:
    shutil.copy(RECIPE, folder / "agent.py")
    turns = [tool_turn(call("get_weather", {"city": "Paris"})), text_turn(ANSWER)]
    with FakeLLM(turns) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_", "OPENAI_"))}
        env.update(
            OTEL_TRACES_EXPORTER="evaltrace",
            EVALTRACE_DIR=str(folder / "runs"),
            OPENAI_BASE_URL=fake.base_url,
            OPENAI_API_KEY="test-key",
            **extra,
        )
        # cwd is the temp folder: `opentelemetry-instrument python agent.py`, as the README says.
        done = subprocess.run(
            [INSTRUMENT, sys.executable, "agent.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=120
        )
        return done, fake.total_usage()


@pytest.mark.parametrize("extra", [{}, {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"}])
def test_recipe_rebuilds_input_tool_call_answer_and_usage(tmp_path: Path, extra: dict[str, str]) -> None:
    done, usage = _run_recipe(tmp_path, **extra)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ANSWER
    (trace,) = read_traces(resolve_paths([tmp_path / "runs"]))
    assert trace.input == "What's the weather in Paris?"
    assert trace.output == ANSWER
    assert trace.case_id == "paris-weather"
    assert trace.agent_name == "weather-agent"
    assert [(c.name, c.arguments, c.result, c.error) for c in trace.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "18°C and sunny in Paris", None)
    ]
    assert trace.tool_calls[0].span_id is not None  # the tool's run was recorded (`tool_call`), not only requested
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == usage
    assert len(trace.iterations) == 2 and trace.status == "success"
    logs = sorted((tmp_path / "runs").glob("*.logs.parquet"))
    if extra:  # the content came only as log records: they were recorded and attached
        assert logs and pq.read_metadata(logs[0]).metadata[b"evaltrace.signal"] == b"logs"
        summary = summarize_runs(resolve_paths([tmp_path / "runs"]))
        assert summary.log_events == {"gen_ai.client.inference.operation.details": 2}
        assert summary.unattached_log_records == 0 and summary.trace_list[0].log_records == 2
        span_file = next(p for p in (tmp_path / "runs").glob("*.parquet") if p not in logs)
        # The model calls' messages (a tool result among them) are in the logs only.
        assert b"tool_call_response" in _plain_bytes(logs[0])
        assert b"tool_call_response" not in _plain_bytes(span_file)


def test_capture_content_off_keeps_content_out_of_both_kinds_of_file(tmp_path: Path) -> None:
    done, _ = _run_recipe(
        tmp_path, EVALTRACE_CAPTURE_CONTENT="0", OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="SPAN_AND_EVENT"
    )
    assert done.returncode == 0, done.stderr
    files = sorted((tmp_path / "runs").glob("*.parquet"))
    assert any(p.name.endswith(".logs.parquet") for p in files)
    for path in files:
        data = _plain_bytes(path)
        assert b"Paris" not in data and b"sunny" not in data, path.name
    (trace,) = read_traces(resolve_paths([tmp_path / "runs"]))
    assert trace.input is None and trace.output is None
    assert [c.name for c in trace.tool_calls] == ["get_weather"]  # structure stays


def _plain_bytes(path: Path) -> bytes:
    """The bytes of a Parquet file rewritten without compression (so a byte search sees every value)."""
    plain = path.with_name(".plain-" + path.name + ".tmp")
    pq.write_table(pq.read_table(path), plain, compression="none", use_dictionary=False)
    try:
        return plain.read_bytes()
    finally:
        plain.unlink()


RECORD_RECIPE = Path(__file__).parent / "recipes" / "record_openai_v2_agent.py"


@pytest.mark.parametrize("extra", [{}, {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"}])
def test_record_in_code_recipe_rebuilds_too(tmp_path: Path, extra: dict[str, str]) -> None:
    shutil.copy(RECORD_RECIPE, tmp_path / "agent.py")
    turns = [tool_turn(call("get_weather", {"city": "Paris"})), text_turn(ANSWER)]
    with FakeLLM(turns) as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_", "OPENAI_"))}
        env.update(OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY="test-key", **extra)
        done = subprocess.run(
            [sys.executable, "agent.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        usage = fake.total_usage()
    assert done.returncode == 0, done.stderr
    (trace,) = read_traces(resolve_paths([tmp_path / "runs"]))
    assert (trace.input, trace.output) == ("What's the weather in Paris?", ANSWER)
    assert [(c.name, c.arguments, c.result) for c in trace.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "18°C and sunny in Paris")
    ]
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == usage
    assert bool(list((tmp_path / "runs").glob("*.logs.parquet"))) == bool(extra)


def test_duckdb_query_over_spans_and_log_files(tmp_path: Path) -> None:
    import duckdb

    done, usage = _run_recipe(tmp_path, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="EVENT_ONLY")
    assert done.returncode == 0, done.stderr
    runs = (tmp_path / "runs").as_posix()
    rows = duckdb.sql(
        "SELECT gen_ai_request_model, sum(gen_ai_usage_input_tokens) "
        f"FROM read_parquet('{runs}/*.parquet', union_by_name=true) "
        "WHERE gen_ai_operation_name = 'chat' GROUP BY 1"
    ).fetchall()
    assert rows == [("gpt-4o-mini", usage[0])]
    events = duckdb.sql(f"SELECT event_name, count(*) FROM '{runs}/*.logs.parquet' GROUP BY 1").fetchall()
    assert events == [("gen_ai.client.inference.operation.details", 2)]
