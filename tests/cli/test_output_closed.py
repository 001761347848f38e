"""A reader that stops early (`evaltrace traces runs | head`) ends the command quietly with 141.

Exit 1 means "the gate failed" and 2 "bad input"; a closed pipe is neither, so evaltrace exits
as a Unix tool killed by SIGPIPE is reported (128 + 13), with nothing on stderr.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from genai_scenarios import sequential
from genai_spans import Recorder

OUTPUT_CLOSED = 141


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Enough traces that every command's output outgrows a pipe's buffer (64 KiB on Linux).
    runs = tmp_path_factory.mktemp("big") / "runs"
    rec = Recorder(runs)
    for _ in range(600):
        sequential(rec)
    rec.close()
    return runs


@pytest.mark.parametrize(
    "args",
    [("traces", "{runs}"), ("traces", "{runs}", "--json"), ("score", "{runs}", "--json", "-")],
    ids=["traces table", "traces json", "score report on stdout"],
)
def test_a_reader_that_stops_early_ends_the_command_quietly(big_run: Path, args: tuple[str, ...]) -> None:
    command = [sys.executable, "-m", "evaltrace.cli", *(a.format(runs=big_run) for a in args)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        start = proc.stdout.read(4096)  # the report is one long line: read bytes, not a line
        proc.stdout.close()
        stderr = proc.stderr.read().decode()
        proc.wait(timeout=120)

    assert len(start) == 4096  # the command did start writing
    assert proc.returncode == OUTPUT_CLOSED, stderr
    assert stderr == ""  # no Error line, no traceback, no "Exception ignored" at exit


def test_the_whole_output_read_still_exits_by_the_gate(big_run: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "evaltrace.cli", "score", str(big_run), "--json", "-"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b'{"entries":[') and done.stdout.rstrip().endswith(b"}")
