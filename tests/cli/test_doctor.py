"""`evaltrace doctor` in a subprocess: a good environment passes, broken ones name the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def doctor(tmp_path: Path, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_"))}
    env.update({"EVALTRACE_DIR": str(tmp_path / "runs"), **env_vars})
    cmd = [sys.executable, "-m", "evaltrace.cli", "doctor", *args]
    return subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_good_environment_exits_zero(tmp_path: Path) -> None:
    proc = doctor(tmp_path, OTEL_TRACES_EXPORTER="evaltrace")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert all(line.startswith(("ok", "warn")) for line in lines)
    assert any("exporter: 'evaltrace' loads" in line for line in lines)
    assert any("configurator: opentelemetry-instrument would use 'evaltrace'" in line for line in lines)
    assert any("will be created" in line for line in lines)
    assert proc.stderr == ""


def test_unknown_exporter_is_a_problem_with_fix(tmp_path: Path) -> None:
    proc = doctor(tmp_path, OTEL_TRACES_EXPORTER="evaltrace,nosuch")
    assert proc.returncode == 2
    problem = [line for line in proc.stdout.splitlines() if line.startswith("problem")]
    assert len(problem) == 1 and "'nosuch' is not installed" in problem[0]
    assert "Fix: remove 'nosuch' from OTEL_TRACES_EXPORTER" in problem[0]
    assert proc.stderr.strip().splitlines()[-1] == "Error: 1 problem found"


def test_broken_metrics_folder_and_pattern_in_json(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = doctor(
        tmp_path,
        "--json",
        OTEL_TRACES_EXPORTER="otlp,evaltrace",
        OTEL_METRICS_EXPORTER="prometheus",
        EVALTRACE_DIR=str(blocker / "runs"),
        EVALTRACE_REDACT_PATTERNS="(",
    )
    assert proc.returncode == 2
    report = json.loads(proc.stdout)
    problems = {c["name"] for c in report["checks"] if c["status"] == "problem"}
    assert problems == {"metrics", "directory", "redaction"} and report["problems"] == 3
    warns = [c for c in report["checks"] if c["status"] == "warn"]
    assert any(c["fix"] == "OTEL_TRACES_EXPORTER=evaltrace,otlp" for c in warns)  # evaltrace first
    assert any("OTEL_EXPORTER_OTLP_TIMEOUT" in c["fix"] for c in warns)
    assert proc.stderr.strip() == "Error: 3 problems found"


def test_pinned_unknown_configurator_and_unset_exporter(tmp_path: Path) -> None:
    proc = doctor(tmp_path, OTEL_PYTHON_CONFIGURATOR="nosuch")
    assert proc.returncode == 2
    assert "OTEL_PYTHON_CONFIGURATOR=nosuch names no installed configurator" in proc.stdout
    assert "warn    traces: OTEL_TRACES_EXPORTER is not set" in proc.stdout
