"""`record()` in real processes: existing providers, many writers, fork, multiprocessing, signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

APP = Path(__file__).parent / "apps" / "span_app.py"


def clean_env(directory: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_"))}
    env.update({"EVALTRACE_DIR": str(directory), "PYTHONUNBUFFERED": "1", **extra})
    return env


def run_app(directory: Path, *args: str, **extra: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, str(APP), *args], env=clean_env(directory, **extra), capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def span_ids(lines: list[dict[str, Any]]) -> list[str]:
    return [line["span"] for line in lines if "span" in line]


def written_ids(directory: Path) -> list[str]:
    ids: list[str] = []
    for path in directory.glob("*.parquet"):
        ids.extend(pq.read_table(path, columns=["span_id"]).column("span_id").to_pylist())
    return ids


def test_record_attaches_to_existing_provider(tmp_path: Path) -> None:
    lines = run_app(tmp_path, "existing", "5")
    result = lines[-1]
    assert result == {"memory": 5, "same_handle": True, "provider_kept": True}
    assert sorted(written_ids(tmp_path)) == sorted(span_ids(lines))


def test_eight_processes_one_folder_nothing_lost_or_duplicated(tmp_path: Path) -> None:
    env = clean_env(tmp_path, EVALTRACE_MAX_ROWS="100", EVALTRACE_RUN_ID="shared", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="50")
    procs = [
        subprocess.Popen([sys.executable, str(APP), "many", "400"], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    expected: list[str] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        expected.extend(json.loads(line)["span"] for line in out.splitlines() if '"span"' in line)
    written = written_ids(tmp_path)
    assert len(expected) == 3200
    assert len(written) == len(set(written)) == 3200
    assert set(written) == set(expected)
    assert len(list(tmp_path.glob("*.parquet"))) >= 8 * 3  # several rolls per process, none shared


def test_fork_child_spans_written_exactly_once(tmp_path: Path) -> None:
    lines = run_app(tmp_path, "fork")
    expected = span_ids(lines)
    assert len(expected) == 2 + 3 + 2
    written = written_ids(tmp_path)
    assert sorted(written) == sorted(expected)  # parent's pre-fork spans not duplicated by the child


def test_multiprocessing_workers_spans_written_exactly_once(tmp_path: Path) -> None:
    lines = run_app(tmp_path, "mp")
    expected = span_ids(lines)
    assert len(expected) == 4 + 6 + 1
    assert len({line["pid"] for line in lines if "pid" in line}) >= 3
    written = written_ids(tmp_path)
    assert sorted(written) == sorted(expected)


def _wait_ready(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    assert proc.stdout is not None
    lines: list[dict[str, Any]] = []
    for line in proc.stdout:
        lines.append(json.loads(line))
        if lines[-1].get("ready"):
            return lines
    raise AssertionError("app ended before it was ready")


def test_sigterm_loses_nothing_already_ended(tmp_path: Path) -> None:
    env = clean_env(tmp_path)  # default 10 s roll interval and 5 s queue delay: nothing written yet
    with subprocess.Popen(
        [sys.executable, str(APP), "sigterm", "25"], env=env, stdout=subprocess.PIPE, text=True
    ) as proc:
        lines = _wait_ready(proc)
        assert not list(tmp_path.glob("*.parquet"))
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    assert proc.returncode == -signal.SIGTERM  # still dies by SIGTERM, with the usual status
    assert sorted(written_ids(tmp_path)) == sorted(span_ids(lines))


def _wait_for_file(folder: Path, writer: str, timeout: float = 60.0) -> None:
    """Until a span file of the writer whose name holds `writer` is in `folder`."""
    deadline = time.monotonic() + timeout
    while not any(writer in path.name for path in folder.glob("*.parquet")):
        assert time.monotonic() < deadline, f"no span file of {writer!r} in {timeout:.0f} s"
        time.sleep(0.01)


def test_sigkill_mid_write_leaves_no_unreadable_parquet(tmp_path: Path) -> None:
    env = clean_env(tmp_path, EVALTRACE_MAX_ROWS="200", OTEL_BSP_SCHEDULE_DELAY="10")
    for attempt in range(6):
        with subprocess.Popen([sys.executable, str(APP), "spin"], env=env, stdout=subprocess.PIPE, text=True) as proc:
            _wait_ready(proc)
            # The first roll also pays one-time costs (pyarrow imports pandas on its first array when
            # pandas is installed): wait for it, so the kills land in the steady write cycle.
            _wait_for_file(tmp_path, f"-{proc.pid}-")
            time.sleep(0.03 + 0.05 * attempt)  # kill at varying points of the write cycle
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
    files = list(tmp_path.glob("*.parquet"))
    assert files, "the writers rolled no file before being killed"
    for path in files:
        assert pq.read_table(path).num_rows > 0  # every visible file is complete


def test_record_twice_with_other_folder_is_refused(tmp_path: Path) -> None:
    code = (
        "from evaltrace.collector import record\n"
        f"r = record({str(tmp_path / 'a')!r})\n"
        f"assert record({str(tmp_path / 'a')!r}) is r\n"
        "try:\n"
        f"    record({str(tmp_path / 'b')!r})\n"
        "except RuntimeError as e:\n"
        "    print('refused:', e)\n"
        "r.stop()\n"
        f"r2 = record({str(tmp_path / 'b')!r})\n"
        "print('second:', r2 is not r, r2.directory.name)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(tmp_path), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "refused: evaltrace is already recording to" in proc.stdout
    assert "second: True b" in proc.stdout


@pytest.mark.parametrize("handler", ["app", "none"])
def test_sigterm_handler_only_installed_when_app_has_none(tmp_path: Path, handler: str) -> None:
    setup = "import signal\nsignal.signal(signal.SIGTERM, lambda *a: None)\n" if handler == "app" else ""
    code = setup + (
        "import signal\nfrom evaltrace.collector import record\nbefore = signal.getsignal(signal.SIGTERM)\n"
        "record()\nprint(signal.getsignal(signal.SIGTERM) is before)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=clean_env(tmp_path), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("True" if handler == "app" else "False")
