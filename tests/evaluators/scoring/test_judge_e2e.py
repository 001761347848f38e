"""End to end: the sample agent's recorded spans scored by `evaltrace score` with a judge and rule scorers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_server import JudgeServer, Reply, verdict

ROOT = Path(__file__).resolve().parents[3]

SPEC = """
confidence: 1.0
cases:
  - id: paris-weather
    input: "What's the weather in Paris?"
    expect:
      output: {contains: ["18"]}
      semantic_output: {rubric: "Gives the current temperature in Celsius"}
  - id: two-cities
    input: "What's the weather in Paris and Tokyo?"
    expect:
      tool_calls:
        - {name: get_weather, arguments: {city: Paris}}
        - {name: get_weather, arguments: {city: Tokyo}}
      trajectory: any_order
      semantic_output: {rubric: "Gives the current temperature in Celsius"}
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    subprocess.run(
        [sys.executable, str(ROOT / "samples" / "record_run.py"), str(runs)],
        check=True,
        capture_output=True,
        env=_clean_env(),
        timeout=120,
    )
    assert list(runs.glob("*.parquet"))
    return runs


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:
        yield srv


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVALTRACE_", "OPENAI_"))}
    env["NO_COLOR"] = "1"
    return env


def _score(runs: Path, spec: Path, out: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    cmd = [sys.executable, "-m", "evaltrace.cli", "score", str(runs), "--spec", str(spec), "--json", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_clean_env(), cwd=out.parent, timeout=120)
    report = json.loads(out.read_text()) if out.exists() else {}
    return proc, report


def _scores(report: dict[str, Any], case_id: str) -> dict[str, dict[str, Any]]:
    [entry] = [e for e in report["entries"] if e["case_id"] == case_id]
    return {s["scorer"]: s for s in entry["scores"]}


def test_judge_and_rule_scorers_in_one_spec(recorded: Path, server: JudgeServer, tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> Reply:
        # The judge fails the two-city answer; the attack-free data is all it sees.
        return verdict("Tokyo" not in body["messages"][1]["content"], "scripted by city")

    server.responder = respond
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    judge = ["--judge-base-url", server.base_url, "--judge-model", "m", "--judge-cache-dir", str(tmp_path / "cache")]

    proc, report = _score(recorded, spec, tmp_path / "r1.json", *judge)
    assert proc.returncode == 1, proc.stderr  # two-cities fails its judge check; confidence 1.0
    assert len(server.requests) == 2
    paris, two = _scores(report, "paris-weather"), _scores(report, "two-cities")
    assert paris["semantic_output"]["passed"] is True and paris["output"]["passed"] is True
    assert two["semantic_output"]["passed"] is False and two["trajectory"]["passed"] is True
    assert two["semantic_output"]["reason"] == "scripted by city"
    assert report["judge"]["requests"] == 2 and report["judge"]["cache_misses"] == 2
    assert report["judge"]["model"] == "m"

    # Re-scoring the same traces: zero judge requests, same results; a lower gate passes.
    proc2, report2 = _score(recorded, spec, tmp_path / "r2.json", *judge, "--confidence", "0.5")
    assert proc2.returncode == 0, proc2.stderr
    assert len(server.requests) == 2
    assert report2["judge"]["requests"] == 0 and report2["judge"]["cache_hits"] == 2
    assert _scores(report2, "two-cities")["semantic_output"]["passed"] is False


def test_missing_judge_model_is_a_setup_error_not_a_failed_gate(recorded: Path, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    proc, report = _score(recorded, spec, tmp_path / "r.json", "--confidence", "0")
    # Exit 1 would read as "the agent regressed"; a judge that is not configured is a setup error.
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == ["Error: judge setup: EVALTRACE_JUDGE_MODEL is not set (or pass --judge-model)"]
    assert report == {}  # no report: nothing was scored
