"""Hostile span files: `score`, `traces` and `show` end with one `Error:` line and exit 2, or read them.

Span files are untrusted input. Each file here starts as a real recording (the OTel SDK through
`ParquetSpanExporter`) whose columns are then rewritten with pyarrow the way a damaged or crafted
file would hold them. Text the reader must reject (JSON nested 100,000 deep, integers too long to
convert, bare `NaN`, bytes that are not UTF-8) is bad input: exit 2 naming the file, never a
traceback or exit 1 ("the gate failed"). Content that only looks hostile inside an otherwise good
file (deep JSON in tool arguments, a 400-digit token count, a flattened key of 5,000 segments)
is read, and every command finishes without a traceback.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cli_process import evaltrace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.collector.recorder.exporter import ParquetSpanExporter

DEEP = "[" * 100_000 + "]" * 100_000
COMMANDS = ("score", "traces", "show")


def _record(directory: Path, *, arguments: str = '{"city": "Paris"}', tokens: int = 12, **extra: str) -> Path:
    """One agent trace (agent, chat and tool span) written by the real exporter; returns the file."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(directory, run_id="hostile")))
    tracer = provider.get_tracer("t")
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "18C"}]}]),
    }
    call = {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": "ARGS"}
    chat = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.usage.input_tokens": tokens,
        "gen_ai.usage.output_tokens": 3,
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [call]}]).replace('"ARGS"', arguments),
        **extra,
    }
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.call.arguments": arguments,
        "gen_ai.tool.call.result": "18C",
    }
    with tracer.start_as_current_span("invoke_agent weather", attributes=agent):
        with tracer.start_as_current_span("chat m", attributes=chat):
            pass
        with tracer.start_as_current_span("execute_tool get_weather", attributes=tool):
            pass
    provider.shutdown()
    (path,) = directory.glob("*.parquet")
    return path


def _rewrite(path: Path, column: str, row: int, value: bytes) -> Path:
    """`path` with one string cell replaced by raw bytes (not checked for UTF-8, as a crafted file's)."""
    table = pq.read_table(path)
    cells = [v.encode() if v is not None else None for v in table[column].to_pylist()]
    cells[row] = value
    raw = pa.array(cells, type=pa.binary())
    as_text = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), null_count=raw.null_count)
    table = table.set_column(table.schema.get_field_index(column), column, as_text)
    pq.write_table(table, path)  # the schema metadata (schema version) is kept
    return path


def _trace_id(path: Path) -> str:
    return str(pq.read_table(path, columns=["trace_id"])["trace_id"][0])


def _run(command: str, path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    if command == "show":
        return evaltrace("show", _trace_id(path), path, cwd=cwd)
    return evaltrace(command, path, cwd=cwd)


BAD_FILES = {
    "attributes nested 100,000 deep": ("attributes", ('{"x": ' + DEEP + "}").encode(), "nested too deeply"),
    "resource attributes nested 100,000 deep": ("resource", ('{"service.name": ' + DEEP + "}").encode(), "nested too"),
    "a 5,000-digit integer": ("attributes", b'{"x": ' + b"9" * 5000 + b"}", "malformed attribute JSON"),
    "a bare NaN": ("attributes", b'{"gen_ai.usage.input_tokens": NaN}', "NaN is not valid JSON"),
    "invalid UTF-8 in attributes": ("attributes", b'{"x": "\xff\xfe"}', "not UTF-8"),
    "invalid UTF-8 in a span name": ("name", b"chat \xc3\x28", "not UTF-8"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_file_content_is_one_error_line_and_exit_2(tmp_path: Path, case: str) -> None:
    column, value, fragment = BAD_FILES[case]
    path = _rewrite(_record(tmp_path / "runs"), column, 0, value)
    for command in COMMANDS:
        done = _run(command, path, tmp_path)
        assert done.returncode == 2, (command, done.stdout, done.stderr[-2000:])
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), (command, done.stderr[-2000:])
        assert str(path) in lines[0] and fragment in lines[0], lines[0]
        assert len(lines[0]) < 600  # the hostile value itself is not echoed


def _assert_reads(path: Path, cwd: Path) -> dict[str, object]:
    for command in COMMANDS:
        done = _run(command, path, cwd)
        assert done.returncode in (0, 1), (command, done.stderr[-2000:])
        assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr[-2000:]
    report = cwd / "report.json"
    scored = evaltrace("score", path, "--json", report, cwd=cwd)
    assert scored.returncode in (0, 1) and json.loads(report.read_text(encoding="utf-8"))["entries"]
    listed = evaltrace("traces", path, "--json", cwd=cwd)
    assert listed.returncode == 0, listed.stderr[-2000:]
    (trace,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert isinstance(trace, dict)
    return trace


@pytest.mark.parametrize("depth", [300, 990, 100_000])
def test_deep_json_in_tool_arguments_is_kept_as_text(tmp_path: Path, depth: int) -> None:
    arguments = '{"x": ' + "[" * depth + "]" * depth + "}"
    trace = _assert_reads(_record(tmp_path / "runs", arguments=arguments), tmp_path)
    (call,) = trace["tool_calls"]  # type: ignore[misc]
    assert call["name"] == "get_weather" and call["arguments"] == arguments  # raw text, not a structure


def test_token_count_beyond_int64_is_not_a_count(tmp_path: Path) -> None:
    path = _record(tmp_path / "runs", tokens=777)
    table = pq.read_table(path)
    texts = [t.replace('"gen_ai.usage.input_tokens": 777', '"gen_ai.usage.input_tokens": 1' + "0" * 400) for t in
             table["attributes"].to_pylist()]  # fmt: skip
    table = table.set_column(table.schema.get_field_index("attributes"), "attributes", pa.array(texts, pa.string()))
    pq.write_table(table, path)
    trace = _assert_reads(path, tmp_path)
    assert trace["usage"] == {"input_tokens": None, "output_tokens": 3, "cache_read_tokens": None,
                              "reasoning_tokens": None}  # fmt: skip


def test_flattened_key_of_thousands_of_segments_is_skipped(tmp_path: Path) -> None:
    key = "llm.input_messages.0.message" + ".a" * 5000
    path = _record(tmp_path / "runs", **{key: "x", "openinference.span.kind": "LLM"})
    trace = _assert_reads(path, tmp_path)
    assert trace["output"] == "18C"


@pytest.mark.parametrize("column", ["service_name", "run_id", "trace_id"])
def test_runs_on_bad_utf8_in_a_small_column_is_one_error_line(tmp_path: Path, column: str) -> None:
    # `runs` reads only the small columns, through another path than the span decoder.
    path = _rewrite(_record(tmp_path / "runs"), column, 0, b"x\xc3\x28")
    for command in ("runs", "score", "traces"):
        done = evaltrace(command, path, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stdout, done.stderr[-2000:])
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"Error: {path}: ") and "not UTF-8" in lines[0], lines
