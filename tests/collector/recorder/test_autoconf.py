"""`opentelemetry-instrument` with evaltrace's own distro and configurator (no opentelemetry-distro)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from evaltrace.collector.recorder._genai_env import capture_content_value
from evaltrace.collector.recorder.autoconf import apply_env_defaults

APP = Path(__file__).parent / "apps" / "span_app.py"
INSTRUMENT = str(Path(sys.executable).parent / "opentelemetry-instrument")
# How long a child may take before the test calls it hung: a guard, not a measure. Start-up with every
# instrumentor (4-5 s of CPU) took over 60 s at load 30-46 on 2 cores.
HANG = 300.0


def scrubbed_env(directory: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_"))}
    env.update({"EVALTRACE_DIR": str(directory), "PYTHONUNBUFFERED": "1", **extra})
    return env


def instrumented(directory: Path, *args: str, timeout: float = HANG, **extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [INSTRUMENT, sys.executable, str(APP), *args]
    # cwd is the temp folder: opentelemetry-instrument puts the cwd first on PYTHONPATH, so stale
    # metadata in a source checkout (an old *.egg-info) would otherwise hide the entry points.
    env = scrubbed_env(directory, **extra)
    return subprocess.run(cmd, env=env, cwd=directory, capture_output=True, text=True, timeout=timeout)


def lines_of(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def written_ids(directory: Path) -> list[str]:
    ids: list[str] = []
    for path in directory.glob("*.parquet"):
        ids.extend(pq.read_table(path, columns=["span_id"]).column("span_id").to_pylist())
    return ids


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the socket is: connections are refused


def test_only_traces_exporter_variable_records(tmp_path: Path) -> None:
    proc = instrumented(tmp_path, "plain", "4", OTEL_TRACES_EXPORTER="evaltrace")
    assert proc.returncode == 0, proc.stderr
    lines = lines_of(proc.stdout)
    assert lines[0] == {"provider": "TracerProvider"}
    assert sorted(written_ids(tmp_path)) == sorted(line["span"] for line in lines if "span" in line)
    assert "Failed to auto initialize" not in proc.stderr


def test_evaltrace_with_unreachable_otlp_writes_and_exits_in_bounded_time(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = scrubbed_env(
        tmp_path,
        OTEL_TRACES_EXPORTER="evaltrace,otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_TIMEOUT="2",
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="*",  # speed: instrumentors import heavy libraries
    )
    cmd = [INSTRUMENT, sys.executable, str(APP), "plain", "3"]
    with (tmp_path / "stderr.log").open("w") as errors:
        proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=errors, text=True)
    with proc:
        assert proc.stdout is not None
        for _ in proc.stdout:  # the app's last line is the last thing it does before exiting
            last_line = time.monotonic()
        proc.wait(timeout=HANG)
    # Only the exit is timed: start-up (imports) is CPU work that took ~40 s at load 30-46 on 2 cores.
    exit_took = time.monotonic() - last_line
    assert proc.returncode == 0, (tmp_path / "stderr.log").read_text()
    assert len(written_ids(tmp_path)) == 3
    assert exit_took < 20, f"exit took {exit_took:.1f} s"


def test_failed_initialisation_warns_and_points_to_doctor(tmp_path: Path) -> None:
    proc = instrumented(tmp_path, "plain", "1", OTEL_TRACES_EXPORTER="evaltrace", OTEL_METRICS_EXPORTER="nosuch")
    assert proc.returncode == 0  # the app still runs
    assert "evaltrace recording is DISABLED" in proc.stderr and "evaltrace doctor" in proc.stderr
    assert not list(tmp_path.glob("*.parquet"))


def test_sigterm_under_instrument_keeps_ended_spans(tmp_path: Path) -> None:
    env = scrubbed_env(tmp_path, OTEL_TRACES_EXPORTER="evaltrace", OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="*")
    code = (
        "import runpy, sys, time\n"
        f"sys.argv = [{str(APP)!r}, 'plain', '6']\n"
        f"runpy.run_path({str(APP)!r}, run_name='__main__')\n"
        "print('{\"ready\": true}', flush=True)\n"
        "time.sleep(60)\n"
    )
    cmd = [INSTRUMENT, sys.executable, "-c", code]
    with subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(json.loads(line))
            if lines[-1].get("ready"):
                break
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=HANG)
    assert proc.returncode == -signal.SIGTERM
    assert sorted(written_ids(tmp_path)) == sorted(line["span"] for line in lines if "span" in line)


def test_distro_defaults_only_where_unset() -> None:
    capture = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
    env = {"OTEL_TRACES_EXPORTER": "otlp, evaltrace", "OTEL_LOGS_EXPORTER": "console", capture: "false"}
    assert apply_env_defaults(env) == {"OTEL_METRICS_EXPORTER": "none"}  # explicit logs and capture win
    assert env["OTEL_LOGS_EXPORTER"] == "console" and env["OTEL_METRICS_EXPORTER"] == "none"
    assert env[capture] == "false"
    fresh = {"OTEL_TRACES_EXPORTER": "evaltrace"}
    applied = apply_env_defaults(fresh)
    assert applied["OTEL_LOGS_EXPORTER"] == "evaltrace" and applied["OTEL_METRICS_EXPORTER"] == "none"
    assert fresh[capture] == capture_content_value(fresh) and applied[capture] == fresh[capture]
    off = {"OTEL_TRACES_EXPORTER": "evaltrace", "EVALTRACE_CAPTURE_CONTENT": "0", "OTEL_LOGS_EXPORTER": "none"}
    assert apply_env_defaults(off) == {"OTEL_METRICS_EXPORTER": "none"} and capture not in off
    other = {"OTEL_TRACES_EXPORTER": "otlp"}
    assert apply_env_defaults(other) == {} and other == {"OTEL_TRACES_EXPORTER": "otlp"}
    assert apply_env_defaults({}) == {}


def test_distro_turns_framework_content_switches_on_only_where_unset() -> None:
    # Agent Framework records messages and tool arguments/results only with ENABLE_SENSITIVE_DATA.
    switch = "ENABLE_SENSITIVE_DATA"
    fresh = {"OTEL_TRACES_EXPORTER": "evaltrace"}
    assert apply_env_defaults(fresh)[switch] == "true" and fresh[switch] == "true"
    chosen = {"OTEL_TRACES_EXPORTER": "evaltrace", switch: "false"}
    assert switch not in apply_env_defaults(chosen) and chosen[switch] == "false"
    # The GenAI variable set to content: the framework switch follows it; set to no content: stays off.
    span_only = {"OTEL_TRACES_EXPORTER": "evaltrace", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}
    assert apply_env_defaults(span_only)[switch] == "true"
    for no_content in ("false", "NO_CONTENT", " 0 "):
        env = {"OTEL_TRACES_EXPORTER": "evaltrace", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": no_content}
        assert switch not in apply_env_defaults(env) and switch not in env, no_content
    off = {"OTEL_TRACES_EXPORTER": "evaltrace", "EVALTRACE_CAPTURE_CONTENT": "off"}
    assert switch not in apply_env_defaults(off) and switch not in off
    other = {"OTEL_TRACES_EXPORTER": "otlp"}
    assert apply_env_defaults(other) == {} and switch not in other


def test_capture_value_is_one_the_installed_util_genai_accepts() -> None:
    # util-genai on the latest conventions rejects `true` (and records no content); the older
    # conventions read exactly `true`. Ask the installed util-genai which path openai-v2 takes.
    from opentelemetry.util.genai.utils import is_experimental_mode

    assert capture_content_value({}) == ("SPAN_ONLY" if is_experimental_mode() else "true")
    latest = {"OTEL_SEMCONV_STABILITY_OPT_IN": "http, gen_ai_latest_experimental"}
    assert capture_content_value(latest) == "SPAN_ONLY"
