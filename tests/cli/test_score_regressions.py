"""End to end on a real instrumented agent: a good run passes the gate, each regression fails it.

The sample agent (openai client traced by opentelemetry-instrumentation-openai-v2, plus GenAI
agent and tool spans) is recorded by evaltrace's own exporter in a subprocess. The offline sample
model regresses on request (`SAMPLE_MODEL_FAULT`), the way a model or prompt change would, and
`evaltrace score` must fail the gate with exit 1 and say, per entry, what went wrong.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "samples" / "evals.yaml"


def _record(out: Path, fault: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENAI_", "SAMPLE_"))}
    if fault is not None:
        env["SAMPLE_MODEL_FAULT"] = fault
    done = subprocess.run(
        [sys.executable, str(ROOT / "samples" / "record_run.py"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _score(run: Path, tmp_path: Path) -> tuple[int, dict[str, Any], str]:
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "evaltrace.cli", "score", str(run), "--spec", str(SPEC), "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr
    return done.returncode, json.loads(report.read_text()), done.stdout


def _failing(report: dict[str, Any], case_id: str) -> dict[str, str]:
    """Scorer name -> reason, for the scores that failed in one case's entry."""
    (entry,) = [e for e in report["entries"] if e["case_id"] == case_id]
    assert entry["passed"] is False
    return {s["scorer"]: s["reason"] for s in entry["scores"] if s["passed"] is False}


def test_the_good_run_passes_the_gate(tmp_path: Path) -> None:
    _record(tmp_path / "run", None)
    code, report, stdout = _score(tmp_path / "run", tmp_path)
    assert code == 0, stdout
    assert report["passed"] is True and report["pass_rate"] == 1.0
    assert sorted(e["case_id"] for e in report["entries"]) == sorted(
        ["paris-weather", "two-cities", "convert-usd-eur", "tokyo-time", "unknown-city", "small-talk"]
    )


@pytest.mark.parametrize(
    ("fault", "scorer", "says"),
    [
        ("wrong_tool", "trajectory", "missing get_weather(city='Paris')"),
        ("missing_argument", "tool_call_validity", "city"),
        ("forbidden_text", "output", "'error'"),
        ("verbose", "usage", "total_tokens"),
    ],
)
def test_a_regression_fails_the_gate_and_the_report_says_why(
    tmp_path: Path, fault: str, scorer: str, says: str
) -> None:
    _record(tmp_path / "run", fault)
    code, report, stdout = _score(tmp_path / "run", tmp_path)
    assert code == 1, stdout
    assert report["passed"] is False and report["pass_rate"] < report["confidence"]
    failing = _failing(report, "paris-weather")
    assert scorer in failing, failing
    assert says in failing[scorer]
    assert "FAILED paris-weather" in stdout and scorer in stdout
