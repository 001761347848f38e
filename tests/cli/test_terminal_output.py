"""Recorded content never drives the terminal: control sequences in it are shown, not run (issue 14).

A span file is recorded with the real OTel SDK and `ParquetSpanExporter`, its content planted
with a window-title OSC sequence, CSI sequences (clear screen, colour), 8-bit C1 controls, a
carriage return and bidi overrides: in the service name, run id, span and agent names, input,
output, model, tool names, arguments, results and errors. Every command that prints recorded
content runs as a real subprocess, piped and on a pseudo-terminal: no raw control byte of the
content reaches stdout or stderr, the content is still shown (as visible escapes), and JSON
output reads back to the exact recorded strings.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from cli_process import evaltrace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode
from terminal_process import evaltrace_on_terminal

from evaltrace.collector.recorder.exporter import ParquetSpanExporter

OSC_TITLE = "\x1b]0;PWNED-TITLE\x07"
CSI = "\x1b[2J\x1b[31m"
C1 = "\x9b31m\x9d0;C1-TITLE\x9c"
BIDI = "\u202egnp.exe\u202c\u2066"
CR = "\rFAKE PASS"
EVIL = OSC_TITLE + CSI + C1 + BIDI + CR

# Raw bytes that only the planted content could have put there.
_PLANTED = re.compile(rb"\x1b\]|\x1b\[2J|\x1b\[31m|\x07|\xc2[\x80-\x9f]|\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]|\rFAKE")
_ANY_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]")
_SHOWN = "\\x1b]0;PWNED-TITLE\\x07"  # how the OSC sequence looks once escaped


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One recorded agent run whose every recorded string carries terminal control sequences."""
    folder = tmp_path_factory.mktemp("hostile") / "runs"
    provider = TracerProvider(resource=Resource({"service.name": "svc" + EVIL}))
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(folder, run_id="run\u202e\x9bid")))
    tracer = provider.get_tracer("tests.hostile")
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "agent" + EVIL,
        "gen_ai.input.messages": _messages("user", "question" + EVIL),
        "evaltrace.case_id": "case" + EVIL,
    }
    with tracer.start_as_current_span("invoke_agent" + EVIL, attributes=agent) as root:
        chat = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "model" + EVIL,
            "gen_ai.usage.input_tokens": 10,
            "gen_ai.usage.output_tokens": 5,
            "gen_ai.response.finish_reasons": ["stop" + EVIL],
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {"type": "text", "content": "thinking" + EVIL},
                            {"type": "tool_call", "id": "c1" + EVIL, "name": "tool" + EVIL, "arguments": {"q": EVIL}},
                        ],
                    }
                ]
            ),
        }
        with tracer.start_as_current_span("chat" + EVIL, attributes=chat):
            pass
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "tool" + EVIL,
            "gen_ai.tool.call.id": "c1" + EVIL,
            "gen_ai.tool.call.arguments": json.dumps({"q": EVIL}),
            "gen_ai.tool.call.result": "result" + EVIL,
        }
        with tracer.start_as_current_span("execute_tool" + EVIL, attributes=tool) as call:
            call.set_status(Status(StatusCode.ERROR, "tool failed" + EVIL))
        root.set_attribute("gen_ai.output.messages", _messages("assistant", "answer" + EVIL))
        root.set_status(Status(StatusCode.ERROR, "agent failed" + EVIL))
    provider.force_flush()
    provider.shutdown()
    return folder


def _trace_id(runs: Path) -> str:
    done = evaltrace("traces", runs, "--json")
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["trace_id"])


def _commands(runs: Path) -> dict[str, list[str]]:
    trace_id = _trace_id(runs)
    return {
        "traces": ["traces", str(runs)],
        "show": ["show", trace_id, str(runs)],
        "runs": ["runs", str(runs), "--traces"],
        "score": ["score", str(runs)],
    }


def _assert_inert(output: bytes, where: str) -> None:
    found = _PLANTED.search(output)
    assert found is None, f"{where}: raw control bytes {found.group()!r} from the trace reached the terminal"


@pytest.mark.parametrize("command", ["traces", "show", "runs", "score"])
def test_piped_output_carries_no_control_bytes(hostile_runs: Path, command: str) -> None:
    args = _commands(hostile_runs)[command]
    done = evaltrace(*args)
    assert done.returncode in (0, 1), done.stderr  # score's gate fails on the failed run: exit 1
    for name, text in (("stdout", done.stdout), ("stderr", done.stderr)):
        raw = text.encode()
        assert _ANY_CONTROL.search(raw) is None, f"{command} {name}: {raw!r}"
    shown = {"traces": "svc", "runs": "svc", "show": _SHOWN, "score": _SHOWN}[command]
    if command in ("show", "score"):
        assert shown in done.stdout, done.stdout  # shown as escapes, not dropped
    if command == "runs":
        assert "svc\\x1b]0;PWNED-TITLE\\x07" in done.stdout and "run\\u202e\\x9bid" in done.stdout, done.stdout


@pytest.mark.parametrize("command", ["traces", "show", "runs", "score"])
def test_terminal_output_carries_no_control_bytes_from_the_trace(hostile_runs: Path, command: str) -> None:
    # On a terminal click strips nothing, and `score` draws its progress bar on stderr: the bar's
    # own sequences are allowed there, none of the trace's.
    done = evaltrace_on_terminal(*_commands(hostile_runs)[command])
    assert done.returncode in (0, 1), done.stderr
    _assert_inert(done.stdout, f"{command} stdout")
    _assert_inert(done.stderr, f"{command} stderr")
    assert b"\x1b" not in done.stdout, done.stdout  # stdout is text only: no sequence of any kind
    if command in ("show", "score"):
        assert _SHOWN.encode() in done.stdout


def _recorded_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _recorded_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _recorded_strings(v)]
    return [value] if isinstance(value, str) else []


@pytest.mark.parametrize("terminal", [False, True])
def test_json_output_is_exact_and_inert(hostile_runs: Path, terminal: bool) -> None:
    trace_id = _trace_id(hostile_runs)
    for args in (
        ["traces", str(hostile_runs), "--json"],
        ["show", trace_id, str(hostile_runs), "--json"],
        ["runs", str(hostile_runs), "--traces", "--json"],
        ["score", str(hostile_runs), "--json", "-"],
    ):
        if terminal:
            done = evaltrace_on_terminal(*args, stderr_tty=False)
            raw = done.stdout.replace(b"\r\n", b"\n")  # the pty's line discipline adds the \r
        else:
            piped = evaltrace(*args)
            done_code, raw = piped.returncode, piped.stdout.encode()
        returncode = done.returncode if terminal else done_code
        assert returncode in (0, 1), args
        assert _ANY_CONTROL.search(raw) is None, f"{args}: {raw!r}"
        text = raw.decode()
        # `score --json -` prints the report, then the summary follows on stderr.
        documents = [json.loads(line) for line in text.splitlines() if line.strip()]
        strings = [s for document in documents for s in _recorded_strings(document)]
        assert any(EVIL in s for s in strings), f"{args}: the recorded text did not read back exactly"


def test_agent_errors_printed_by_run_are_inert(tmp_path: Path) -> None:
    # `evaltrace run` prints each failed call's error on stderr: the agent's (often a model's) text.
    (tmp_path / "hostile_agent.py").write_text(
        "def agent(question):\n    raise RuntimeError('model said ' + " + repr(EVIL) + ")\n", encoding="utf-8"
    )
    (tmp_path / "spec.yaml").write_text("cases:\n  - id: one\n    input: hello\n", encoding="utf-8")
    for on_terminal in (False, True):
        out = tmp_path / f"run-{on_terminal}"
        args = ["run", "--agent", "hostile_agent:agent", "--spec", "spec.yaml", "--out", str(out)]
        if on_terminal:
            done = evaltrace_on_terminal(*args, cwd=tmp_path)
            stdout, stderr = done.stdout, done.stderr
        else:
            piped = evaltrace(*args, cwd=tmp_path)
            stdout, stderr = piped.stdout.encode(), piped.stderr.encode()
        _assert_inert(stdout, "run stdout")
        _assert_inert(stderr, "run stderr")
        assert b"model said \\x1b]0;PWNED-TITLE\\x07" in stderr, stderr


def test_error_lines_quote_paths_inert_and_alone(tmp_path: Path) -> None:
    # The `Error:` line quotes what it could not read; nothing else is printed before it.
    missing = tmp_path / ("no" + OSC_TITLE + "such")
    done = evaltrace("traces", missing)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == f"Error: {str(missing).replace(OSC_TITLE, _SHOWN)}: no such file or folder\n"
