"""`evaltrace traces` and `evaltrace show` through real subprocesses over real span files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from genai_scenarios import parallel_nested, sequential
from genai_spans import Recorder


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evaltrace.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    rec = Recorder(tmp_path / "runs")
    sequential(rec)
    rec.provider.force_flush()
    parallel_nested(rec)
    rec.close()
    return tmp_path / "runs"


def test_traces_json_prints_contract_keys(runs: Path) -> None:
    done = _cli("traces", str(runs), "--json")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 2
    keys = {
        "trace_id",
        "input",
        "output",
        "error",
        "tool_calls",
        "iterations",
        "usage",
        "start_time",
        "end_time",
        "conversation_id",
        "case_id",
    }
    assert all(keys <= set(line) for line in lines)
    first, second = lines
    assert (first["input"], first["output"], first["case_id"], first["conversation_id"]) == (
        "Weather in Paris?",
        "It is 18C in Paris.",
        "paris",
        "c1",
    )
    assert [{k: c[k] for k in ("call_id", "name", "arguments", "result", "error")} for c in first["tool_calls"]] == [
        {"call_id": "c-1", "name": "get_weather", "arguments": {"city": "Paris"}, "result": "18C", "error": None}
    ]
    assert {k: first["usage"][k] for k in ("input_tokens", "output_tokens")} == {
        "input_tokens": 250,
        "output_tokens": 22,
    }
    assert [c["name"] for c in second["tool_calls"]] == ["research", "get_weather", "get_time"]
    assert second["tool_calls"][0]["child"]["output"] == "Rome is warm."


def test_traces_table_lists_each_trace(runs: Path) -> None:
    done = _cli("traces", str(runs / "*.parquet"))
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()
    assert rows[0].split()[:3] == ["TRACE", "CASE", "STATUS"]
    assert "paris" in rows[1] and "Weather in Paris?" in rows[1] and "250/22" in rows[1]
    assert rows[-1] == "2 traces"


def test_show_renders_tree_by_unique_prefix(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "runs")
    parallel_nested(rec)
    rec.close()
    done = _cli("show", "0000000000000000000000000000000", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "trace 00000000000000000000000000000001  planner  [success]" in out
    assert "iteration 0  gpt-x  in=200 out=30  finish=tool_call" in out
    assert '-> research [p-1] {"topic": "Rome"}' in out
    assert "error: TimeoutError: weather service timed out" in out
    assert "trace 00000000000000000000000000000001  researcher" in out  # the nested agent, indented
    assert "output: Rome: warm." in out and "usage: input 500, output 50 tokens" in out
    assert "warning:" in out and "truncated JSON" in out


def test_show_unknown_or_ambiguous_id_is_input_error(runs: Path) -> None:
    unknown = _cli("show", "ffff", str(runs))
    assert unknown.returncode == 2
    assert unknown.stderr.startswith("Error: no trace with id 'ffff'") and "Traceback" not in unknown.stderr
    ambiguous = _cli("show", "0", str(runs))
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr


def test_show_decodes_only_the_trace_it_shows(runs: Path) -> None:
    # Damage one span of the second trace: showing the first must not even decode it, while a
    # command that reads every trace still stops at it with the file and span named.
    listing = [json.loads(line) for line in _cli("traces", str(runs), "--json").stdout.splitlines()]
    shown, damaged = listing[0]["trace_id"], listing[1]["trace_id"]
    for path in sorted(runs.glob("*.parquet")):
        table = pq.read_table(path)
        rows = table["trace_id"].to_pylist()
        if damaged in rows:
            texts = table["attributes"].to_pylist()
            texts[rows.index(damaged)] = '{"broken": '
            column = table.schema.get_field_index("attributes")
            pq.write_table(table.set_column(column, table.schema.field(column), [texts]), path)
            break

    done = _cli("show", shown, str(runs))
    assert done.returncode == 0, done.stderr
    assert f"trace {shown}" in done.stdout and damaged not in done.stdout
    everything = _cli("traces", str(runs))
    assert everything.returncode == 2 and "malformed attribute JSON" in everything.stderr


def test_traces_missing_path_is_input_error(tmp_path: Path) -> None:
    done = _cli("traces", str(tmp_path / "nothing-here"), "--json")
    assert done.returncode == 2 and done.stderr.startswith("Error:") and "Traceback" not in done.stderr
