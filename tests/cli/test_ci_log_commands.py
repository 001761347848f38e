"""Recorded text cannot start a line of a command's output, nor a CI log command (issue 28, item 11).

GitHub Actions reads a line that starts (after spaces) with `::` as a workflow command
(`::error::`, `::add-mask::`, `::stop-commands::`), and a `##[` anywhere in a line as a legacy one;
a newline in a recorded value would also start a line of its own, such as a forged gate verdict.
Here every recorded text field holds such lines: the model, agent, case, tool and span names, the
input, the answer, the errors, the service name and run id, a plugin scorer's name and reason, and
the spec's file name (which the store keeps). Each command that lays them out runs as a real
subprocess; no line of its output starts with `::`, holds `##[` or is the forged verdict, and the
recorded text is still shown (as escapes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import evaltrace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from evaltrace.collector.recorder.exporter import ParquetSpanExporter

FORGED = "Gate PASSED: forged"
COMMANDS = ["score base", "score new", "compare", "history", "runs", "traces", "show", "explain", "doctor"]
VALUE = f"::error::lead\n::add-mask::secret\n  ::stop-commands::tok\n{FORGED}\n##[error]legacy"
SHOWN = "\\x3a:error::lead\\n::add-mask::secret"  # the value's start as the output shows it

PLUGIN = f"""
from typing import Any, ClassVar

from evaltrace.collector import Trace
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register


@register
class Hostile(Scorer):
    name: ClassVar[str] = {VALUE!r}

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        good = "good" in (trace.output or "")
        return self.result(good, 1.0 if good else 0.0, "said " + {VALUE!r})
"""


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _chat(tracer: object, model: str, answer: str) -> None:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": 100,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.response.finish_reasons": ["stop" + VALUE],
        "gen_ai.output.messages": _messages("assistant", answer),
    }
    with tracer.start_as_current_span("chat" + VALUE, attributes=attributes):  # type: ignore[attr-defined]
        pass


def _record(folder: Path, answer: str) -> Path:
    """One agent run whose every recorded string carries the hostile lines."""
    provider = TracerProvider(resource=Resource({"service.name": VALUE}))
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(folder, run_id=VALUE)))
    tracer = provider.get_tracer("tests.ci_log")
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": VALUE,
        "gen_ai.input.messages": _messages("user", VALUE),
        "evaltrace.case_id": VALUE,
    }
    with tracer.start_as_current_span(VALUE, attributes=agent) as root:
        _chat(tracer, "gpt-4o", "thinking" + VALUE)  # a priced model, so the cost line lists the unpriced one
        _chat(tracer, VALUE, answer)
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": VALUE, "gen_ai.tool.call.result": VALUE}
        with tracer.start_as_current_span(VALUE, attributes=tool) as call:
            call.set_status(Status(StatusCode.ERROR, VALUE))
        root.set_attribute("gen_ai.output.messages", _messages("assistant", answer))
        root.set_status(Status(StatusCode.ERROR, VALUE))
    # A second run with a priced model only: the estimated cost line is printed, naming the unpriced one.
    with tracer.start_as_current_span("invoke_agent", attributes={"evaltrace.case_id": "priced"}):
        _chat(tracer, "gpt-4o", "fine")
    provider.force_flush()
    provider.shutdown()
    return folder


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each command's stdout and stderr over a base run (that passes) and a new run (that fails)."""
    root = tmp_path_factory.mktemp("ci-log")
    base, new = _record(root / "base", "good " + VALUE), _record(root / "new", "bad " + VALUE)
    plugin = root / "hostile_scorer.py"
    plugin.write_text(PLUGIN, encoding="utf-8")
    spec = root / (VALUE + ".yaml")  # the store keeps the spec's path; `history` shows it
    prices = "prices: {gpt-4o: {input_per_mtok: 1, output_per_mtok: 1}}\n"  # so the cost line names the other
    case = f"  - id: {json.dumps(VALUE)}\n    input: hello\n    expect: {{{json.dumps(VALUE)}: {{}}}}\n"
    spec.write_text(prices + "cases:\n" + case + "  - id: priced\n    input: hi\n", encoding="utf-8")
    store = root / "store"
    scoring = ["--spec", str(spec), "--plugin", str(plugin), "--store", str(store)]
    listed = [json.loads(line) for line in evaltrace("traces", new, "--json").stdout.splitlines()]
    trace_id = next(trace["trace_id"] for trace in listed if trace["case_id"] != "priced")
    commands: dict[str, list[str | Path]] = {
        "score base": ["score", base, *scoring, "--json", root / "base.json"],
        "score new": ["score", new, *scoring, "--json", root / "new.json", "--baseline", root / "base.json"],
        "compare": ["compare", root / "base.json", root / "new.json"],
        "history": ["history", "--store", store],
        "runs": ["runs", new, "--traces"],
        "traces": ["traces", new],
        "show": ["show", trace_id, new],
        "explain": ["traces", new, "--explain", trace_id],
        "doctor": ["doctor", new],
    }
    found = {}
    for name, args in commands.items():
        done = evaltrace(*args, cwd=root)
        assert "Traceback" not in done.stderr, (name, done.stderr)
        found[name] = done.stdout + done.stderr
        if name == "score base":
            assert (root / "base.json").exists(), done.stdout + done.stderr
        if name == "score new":
            assert done.returncode == 1, done.stderr  # the gate fails (and the baseline regressed): exit 1
    return found


@pytest.mark.parametrize("command", COMMANDS)
def test_no_line_is_started_or_made_a_command_by_recorded_text(outputs: dict[str, str], command: str) -> None:
    text = outputs[command]
    for line in text.splitlines():
        assert not line.lstrip().startswith("::"), f"{command}: {line!r}"
        assert "##[" not in line, f"{command}: {line!r}"
        assert not line.startswith(FORGED), f"{command}: {line!r}"
    if command != "doctor":  # doctor counts what the recording holds; it quotes none of it
        assert "::add-mask::secret" in text, text  # the recorded text is shown (inert), not dropped


def test_every_laid_out_field_is_there_and_inert(outputs: dict[str, str]) -> None:
    score = outputs["score new"]
    # The case id, the scorer's name and reason and the unpriced model each appear, flattened.
    assert f"FAILED {SHOWN}" in score, score
    assert f"  - {SHOWN}" in score, score  # the failing scorer's line starts with its name
    assert f"\n{SHOWN}" in score, score  # the scorers' table: a row starts with the name
    assert f"unpriced: {SHOWN}" in score, score
    gate = [line for line in score.splitlines() if line.startswith("Gate ")]
    assert len(gate) == 1 and gate[0].startswith("Gate FAILED"), score
    compare = outputs["compare"]
    assert compare.splitlines()[-1].startswith("WARNING: 1 case regressed (not significant"), compare
    assert f"  {SHOWN}" in compare, compare  # a regression's line starts with its case key
    assert f"\n{SHOWN}" in outputs["history"], outputs["history"]  # a row of the table
    assert "services:    ::error::lead\\n::add-mask::secret" in outputs["runs"], outputs["runs"]
