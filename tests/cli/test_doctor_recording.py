"""`evaltrace doctor PATH`: a recording that cannot be scored well is named, with its fix.

The recordings are real: a plain openai tool loop under opentelemetry-instrumentation-openai-v2
in its default mode (content goes to log records), recorded with spans only, once wrapped in an
agent span and once not. The instrumentor checks use real entry points of packages made in a
temporary folder on `PYTHONPATH`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_process import evaltrace

REPO = Path(__file__).resolve().parents[2]
APP = Path(__file__).with_name("apps") / "openai_v2_spans_only.py"
CLEAN = {"OTEL_TRACES_EXPORTER": "evaltrace"}


def _clean_env(**extra: str) -> dict[str, str]:
    # cli_process adds to os.environ: blank the variables a developer's shell might carry.
    blank = (
        "OTEL_LOGS_EXPORTER",
        "OTEL_METRICS_EXPORTER",
        "OTEL_PYTHON_DISTRO",
        "OTEL_PYTHON_CONFIGURATOR",
        "EVALTRACE_CAPTURE_CONTENT",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS",
    )
    return {**dict.fromkeys(blank, ""), **CLEAN, **extra}


def doctor_json(*args: str | Path, cwd: Path, **env: str) -> tuple[int, dict[str, dict[str, Any]]]:
    done = evaltrace("doctor", "--json", *args, cwd=cwd, env=_clean_env(**env))
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert len(checks) == len(report["checks"]), "check names must be unique"
    return done.returncode, checks


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for name, args in (("wrapped", []), ("unwrapped", ["--no-root"])):
        folder = tmp_path_factory.mktemp(name)
        cmd = [sys.executable, str(APP), str(folder), *args]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        out[name] = folder
    return out


def test_content_left_in_unrecorded_log_records_is_a_problem(recordings: dict[str, Path], tmp_path: Path) -> None:
    code, checks = doctor_json(recordings["wrapped"], cwd=tmp_path)
    assert code == 2
    events = checks["recording/events"]
    assert events["status"] == "problem"
    assert "2 model calls" in events["message"] and "log records" in events["message"]
    assert "OTEL_LOGS_EXPORTER=evaltrace" in events["fix"]
    content = checks["recording/content"]
    assert content["status"] == "problem" and "1 of 1 trace" in content["message"]
    assert checks["recording/fragments"]["status"] == "ok"  # the agent span held the run together


def test_a_loop_with_no_agent_span_is_named_as_fragments(recordings: dict[str, Path], tmp_path: Path) -> None:
    code, checks = doctor_json(recordings["unwrapped"], cwd=tmp_path)
    assert code == 2
    fragments = checks["recording/fragments"]
    assert fragments["status"] == "problem"
    assert "2 of 2 traces are a lone model call" in fragments["message"]
    assert "agent_run(" in fragments["fix"]


def test_a_good_recording_and_setup_pass(tmp_path: Path) -> None:
    code, checks = doctor_json(REPO / "samples" / "runs", cwd=tmp_path)
    bad = {name: c for name, c in checks.items() if c["status"] == "problem"}
    assert code == 0 and not bad, bad
    recording = {name: c["status"] for name, c in checks.items() if name.startswith("recording/")}
    assert recording == dict.fromkeys(recording, "ok") and len(recording) == 10, recording
    assert checks["events"]["status"] == "ok"  # the distro records the log records by default


def test_logs_switched_off_beside_an_events_instrumentation_is_a_problem(tmp_path: Path) -> None:
    code, checks = doctor_json(cwd=tmp_path, OTEL_LOGS_EXPORTER="none")
    assert code == 2
    assert checks["events"]["status"] == "problem"
    assert "OTEL_LOGS_EXPORTER=none does not record them" in checks["events"]["message"]


def test_content_switched_off_is_said(tmp_path: Path) -> None:
    code, checks = doctor_json(cwd=tmp_path, EVALTRACE_CAPTURE_CONTENT="0")
    assert code == 0
    assert checks["content"]["status"] == "warn"
    assert "EVALTRACE_CAPTURE_CONTENT=0" in checks["content"]["message"]


def test_agent_framework_content_switched_off_is_said(tmp_path: Path) -> None:
    code, checks = doctor_json(cwd=tmp_path, ENABLE_SENSITIVE_DATA="false")
    assert code == 0
    assert checks["content"]["status"] == "warn"
    assert "ENABLE_SENSITIVE_DATA=false" in checks["content"]["message"]


def test_anthropic_sdk_content_mode_off_is_said(tmp_path: Path) -> None:
    code, checks = doctor_json(cwd=tmp_path, ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE="metadata_only")
    assert code == 0
    assert checks["content"]["status"] == "warn"
    assert "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=metadata_only" in checks["content"]["message"]


def _fake_distribution(site: Path, dist: str, name: str, module_source: str) -> None:
    """An installed distribution (dist-info with one instrumentor entry point) and its module."""
    module = f"{dist}_module"
    info = site / f"{dist}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[opentelemetry_instrumentor]\n{name} = {module}:Instrumentor\n")
    (site / f"{module}.py").write_text(module_source)


def test_instrumentors_that_fail_to_load_or_clash_are_named(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _fake_distribution(site, "brokeninstr", "broken", "raise ImportError('needs libfoo>=2')\n")
    _fake_distribution(site, "secondopenai", "openai", "class Instrumentor:\n    pass\n")
    done = evaltrace("doctor", "--json", cwd=tmp_path, env=_clean_env(PYTHONPATH=str(site)))
    report = json.loads(done.stdout)
    found = [c for c in report["checks"] if c["name"] == "instrumentation"]
    broken = [c for c in found if c["status"] == "problem"]
    assert len(broken) == 1 and "'broken' (brokeninstr) does not load" in broken[0]["message"]
    assert "needs libfoo>=2" in broken[0]["message"]
    clash = [c for c in found if c["status"] == "warn"]
    assert len(clash) == 1 and "2 instrumentors are named 'openai'" in clash[0]["message"]
    assert done.returncode == 2
