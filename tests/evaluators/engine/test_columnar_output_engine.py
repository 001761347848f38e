"""A warm scoring run takes the columnar `output`, `steps`, `outcome` and `cost` forms, with the reference's report.

Real span files (the real SDK and exporter), scored through `scoring.score` per trace without the
traces cache (`columnar=False`: the reference scores everything), cold (the table is written) and
warm (the table is read: the forms answer the passing checks). The three reports must be equal but for their timestamp.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _form_counts import count_form_answers
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call

from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.scoring.scorers.limits import Cost
from evaltrace.evaluators.scoring.scorers.output import Outcome, Output
from evaltrace.evaluators.scoring.scorers.steps import Steps
from evaltrace.evaluators.scoring.spec.loader import load_spec

SPEC = """\
confidence: 0.5
cases:
  - id: paris
    input: Weather in Paris?
    expect:
      output: {contains: ["18"], not_contains: error, regex: "\\\\d+ C"}
      steps:
        contains: [{name: get_weather, arguments: {city: Paris}}]
        not_contains: [delete]
        regex: [{result: sunny}]
      outcome: success
      cost: {max_usd: 0.001, unknown_model: fail}
"""


def _turn(rec: Recorder, city: str, model: str, answer: str) -> None:
    with rec.span("invoke_agent helper", agent_attrs("helper")):
        user = ("user", [text("Weather in Paris?")])
        call = ("assistant", [tool_call(f"c-{rec.now}", "get_weather", {"city": city})])
        chat(rec, model, messages(user), messages(call), (50, 5), "tool_call")
        result = json.dumps({"sky": "sunny", "high_c": 18})
        with rec.span("execute_tool get_weather", tool_attrs("get_weather", None, json.dumps({"city": city}), result)):
            rec.tick(1)
        finish = "length" if "cut" in answer else "stop"
        chat(rec, model, messages(user), messages(("assistant", [text(answer)])), (80, 9), finish)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("columnar-output")
    rec = Recorder(root / "runs")
    for index in range(12):
        _turn(rec, "Paris", "gpt-4o", "Sunny, 18 C.")  # every check passes
        _turn(rec, "Rome" if index % 2 else "Paris", "gpt-4o", "error: 18 C, cut")  # output, steps, outcome fail
        _turn(rec, "Paris", "my-local-model", "Sunny, 18 C.")  # cost: the model has no price
    rec.close()
    return root / "runs"


def _score(runs: Path, spec: Path, out: Path, *, cache: bool) -> dict[str, Any]:
    with ReportWriter(str(out)) as writer:
        options = ScoreOptions(paths=(str(runs),), cache=cache, columnar=cache, workers=1)  # no cache: per trace
        run = scoring.score([runs], load_spec(spec), options, writer)
        writer.finish(run.report)
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    report.pop("created_at")
    return report


def test_warm_scoring_answers_the_passing_checks_with_the_reference_report(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    answered = count_form_answers(monkeypatch, (Output, Steps, Outcome, Cost))
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    reference = _score(runs, spec, tmp_path / "none.json", cache=False)
    cold = _score(runs, spec, tmp_path / "cold.json", cache=True)
    first = dict(answered)  # the table written as the traces are rebuilt, a batch before its traces
    answered.clear()
    warm = _score(runs, spec, tmp_path / "warm.json", cache=True)
    assert warm == cold == reference
    # the 12 good and 12 unpriced runs pass output, steps, outcome; 6 cut runs ask for Paris (steps); cost: good
    # and cut; the 12 runs whose recorded answer fails output are graded by its form (`Output.answered`)
    assert answered == first == {"output": 24 + 12, "steps": 24 + 6, "outcome": 24, "cost": 24}
    verdicts = Counter((s["scorer"], s["passed"]) for e in warm["entries"] for x in e["samples"] for s in x["scores"])
    assert {name: verdicts[(name, True)] for name in answered} == {**answered, "output": 24}
    assert verdicts[("output", False)] >= 12
