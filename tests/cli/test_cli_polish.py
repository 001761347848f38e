"""CLI polish (issue 13): --version, show --json, exit codes in --help, singular/plural, and the
`traces` STATUS agreeing with the `outcome` scorer. Real subprocesses over real span files."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest
from cli_process import evaltrace
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs
from opentelemetry.trace import Status, StatusCode


def test_version_option_and_command_print_the_package_version() -> None:
    expected = f"evaltrace {version('evaltrace')}"
    for args in (["--version"], ["version"]):
        done = evaltrace(*args)
        assert done.returncode == 0, done.stderr
        assert done.stdout == expected + "\n"


@pytest.fixture
def two_traces(tmp_path: Path) -> Path:
    """Trace 1: a clean run with an answer. Trace 2: the agent returned, but its last model call was
    cut short (finish reason `length`) after its only tool call failed."""
    rec = Recorder(tmp_path / "runs")
    with rec.span(
        "invoke_agent bot", agent_attrs("bot", **{"gen_ai.input.messages": messages(("user", [text("hi")]))})
    ) as s:
        chat(rec, "gpt-x", None, messages(("assistant", [text("hello")])), (10, 2))
        s.set_attribute("gen_ai.output.messages", messages(("assistant", [text("hello")])))
    attrs = agent_attrs("bot", **{"gen_ai.input.messages": messages(("user", [text("weather?")]))})
    with rec.span("invoke_agent bot", attrs) as s:
        with rec.span("execute_tool get_weather", tool_attrs("get_weather", "c-1", '{"city": "Rome"}')) as tool:
            tool.set_status(Status(StatusCode.ERROR, "service down"))
        chat(rec, "gpt-x", None, messages(("assistant", [text("It is")])), (10, 4096), finish="length")
        s.set_attribute("gen_ai.output.messages", messages(("assistant", [text("It is")])))
    rec.close()
    return tmp_path / "runs"


def test_show_json_is_the_trace_as_traces_json_prints_it(two_traces: Path) -> None:
    listed = [json.loads(line) for line in evaltrace("traces", two_traces, "--json").stdout.splitlines()]
    assert len(listed) == 2
    for trace in listed:
        done = evaltrace("show", trace["trace_id"], two_traces, "--json")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == 1  # one JSON object, on one line
        assert json.loads(lines[0]) == trace


def test_traces_status_agrees_with_the_outcome_scorer(two_traces: Path) -> None:
    # The second run's root span has no error, so the listing used to say `success`; the outcome
    # scorer calls it a failure (last model call cut short). Both now say what the scorer says.
    table = evaltrace("traces", two_traces)
    assert table.returncode == 0, table.stderr
    rows = table.stdout.splitlines()[1:-1]
    listed = {row.split()[6]: row.split()[2] for row in rows}  # INPUT -> STATUS
    report_path = two_traces.parent / "report.json"
    scored = evaltrace("score", two_traces, "--json", report_path)
    assert scored.returncode == 1, scored.stderr
    report = json.loads(report_path.read_text())
    outcome_of = {
        e["input"]: next(s for s in e["scores"] if s["scorer"] == "outcome")["details"]["outcome"]
        for e in report["entries"]
    }
    assert listed == outcome_of == {"hi": "success", "weather?": "failure"}
    ids = {
        json.loads(line)["input"]: json.loads(line)["trace_id"]
        for line in evaltrace("traces", two_traces, "--json").stdout.splitlines()
    }
    shown = evaltrace("show", ids["weather?"], two_traces)
    assert "  bot  [failure]" in shown.stdout, shown.stdout


def test_counts_take_the_singular_for_one(two_traces: Path, tmp_path: Path) -> None:
    one = tmp_path / "one"
    rec = Recorder(one)
    with rec.span("invoke_agent bot", agent_attrs("bot", **{"gen_ai.input.messages": messages(("user", [text("x")]))})):
        chat(rec, "gpt-x", None, messages(("assistant", [text("y")])), (1, 1))
    rec.close()
    assert evaltrace("traces", one).stdout.splitlines()[-1] == "1 trace"
    trace_id = json.loads(evaltrace("traces", one, "--json").stdout)["trace_id"]
    assert "usage: input 1, output 1 token\n" in evaltrace("show", trace_id, one).stdout
    assert evaltrace("traces", two_traces).stdout.splitlines()[-1] == "2 traces"
    summary = evaltrace("score", one).stdout
    assert "; 1 trace read\n1 entry, " in summary, summary
    assert "; 2 traces read\n2 entries, " in evaltrace("score", two_traces).stdout
    compacted = evaltrace("compact", one, "--dry-run")
    assert compacted.returncode == 0, compacted.stderr
    assert "nothing to compact (1 file)" in compacted.stdout


@pytest.mark.parametrize("command", ["score", "run"])
def test_help_lists_the_exit_codes(command: str) -> None:
    done = evaltrace(command, "--help", env={"COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    assert (
        "Exit codes: 0 the gate passed; 1 the gate failed; 2 bad input, usage or setup (one 'Error:' line on "
        "stderr); 130 interrupted; 141 the reader of the output went away." in flat
    ), done.stdout
