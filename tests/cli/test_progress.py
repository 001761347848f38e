"""The progress bar of `score` and `run`: drawn on stderr when it is a terminal, absent otherwise.

Real subprocesses: stderr on a pseudo-terminal (the bar, with the count of the total and the
time left), then on a pipe (nothing of it, so CI logs stay clean). Scoring with two forked
workers brings the workers' counts back to the bar.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from cli_process import evaltrace
from genai_spans import Recorder, agent_attrs, chat, messages, text
from terminal_process import evaltrace_on_terminal

AGENTS = Path(__file__).resolve().parent / "run_agents.py"
_TRACES = 300
_ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")


def _screen(raw: bytes) -> str:
    """What the terminal was sent, without colour and cursor codes."""
    return _ANSI.sub(b"", raw).decode("utf-8", "replace")


@pytest.fixture(scope="module")
def many_traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("progress") / "runs"
    rec = Recorder(folder)
    for index in range(_TRACES):
        attrs = agent_attrs("bot", **{"gen_ai.input.messages": messages(("user", [text(f"question {index}")]))})
        with rec.span("invoke_agent bot", attrs) as span:
            chat(rec, "gpt-x", None, messages(("assistant", [text(f"answer {index}")])), (5, 5))
            span.set_attribute("gen_ai.output.messages", messages(("assistant", [text(f"answer {index}")])))
        if index % 100 == 99:
            rec.provider.force_flush()
    rec.close()
    return folder


@pytest.mark.parametrize("workers", ["1", "2"])
def test_score_draws_a_bar_on_a_terminal_only(many_traces: Path, workers: str) -> None:
    args = ("score", many_traces, "--workers", workers)
    on_terminal = evaltrace_on_terminal(*args, stdout_tty=False)
    assert on_terminal.returncode == 0, on_terminal.stderr
    screen = _screen(on_terminal.stderr)
    # The final drawing: every trace counted, of the total counted beforehand, with the time left.
    assert re.search(rf"scoring .* {_TRACES}/{_TRACES} traces \d+:\d\d:\d\d left \d+:\d\d:\d\d", screen), screen
    assert "\x1b[" in on_terminal.stderr.decode()  # drawn in place with terminal sequences
    assert on_terminal.stdout.startswith(b"evaltrace score: reference-free defaults")  # stdout untouched

    piped = evaltrace(*args)
    assert piped.returncode == 0, piped.stderr
    assert "scoring" not in piped.stderr and "\x1b" not in piped.stderr and "\r" not in piped.stderr
    assert piped.stdout == on_terminal.stdout.decode().replace("\r\n", "\n")


def test_run_draws_a_bar_for_its_calls_then_one_for_scoring(tmp_path: Path) -> None:
    shutil.copy(AGENTS, tmp_path / "run_agents.py")
    (tmp_path / "evals.yaml").write_text(
        "cases:\n"
        "  - {id: one, input: hello, expect: {output: {contains: [answer]}}}\n"
        "  - {id: two, input: bonjour, expect: {output: {contains: [answer]}}}\n",
        encoding="utf-8",
    )
    args = ["run", "--agent", "run_agents:answer", "--spec", "evals.yaml", "--repeat", "2"]
    on_terminal = evaltrace_on_terminal(*args, "--out", tmp_path / "a", cwd=tmp_path, stdout_tty=False)
    assert on_terminal.returncode == 0, on_terminal.stderr
    screen = _screen(on_terminal.stderr)
    assert re.search(r"running .* 4/4 calls", screen), screen
    assert re.search(r"scoring .* 4/4 traces", screen), screen
    assert "recorded 4 agent calls (4 ok, 0 errors, 0 timeouts)" in screen

    piped = evaltrace(*args, "--out", tmp_path / "b", cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert "running" not in piped.stderr and "scoring" not in piped.stderr and "\x1b" not in piped.stderr
    assert "recorded 4 agent calls (4 ok, 0 errors, 0 timeouts)" in piped.stderr
