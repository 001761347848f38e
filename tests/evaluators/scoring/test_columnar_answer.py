"""The columnar forms of the answer axes equal the reference scorers, on random traces and configurations.

`groundedness`, `correctness`, `completeness` and `answer_quality`: each trace goes through the real
traces table, and wherever the columnar path answers, its `Score` must be the reference's
(`check_same`). Traces built to pass must take the columnar path, so the first property cannot hold
by the forms never answering.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _columnar_check import check_same
from genai_spans import Recorder, agent_attrs, chat, messages, text, tool_attrs, tool_call
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.records import Iteration, Message, MessagePart, ToolCall, Trace
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.scoring import columns as forms
from evaltrace.evaluators.scoring.columns import RowCalls
from evaltrace.evaluators.scoring.scorers.answer import AnswerQuality, Completeness, Correctness, Groundedness
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.spec.loader import load_spec

_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_PASSING = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_CLASSES: list[type[Scorer]] = [Groundedness, Correctness, Completeness, AnswerQuality]

# Texts that share numbers and words in various shapes: thousands separators, `$` and `%`,
# multi-word facts across line breaks, numbers below and above `ignore_numbers_below`.
_TEXTS = [
    "",
    "   ",
    "Paris is 18 degrees",
    "The price is $1,234.50 in Paris.",
    "profit margin\nis 12.5%",
    "It costs 1234 USD, about 18 euros per day for 3 days.",
    "priceless marginal surprise",
    "2024-05-01: 250 items, price 99",
    "Zürich: 7 °C, 1,234 km",
]
_RESULTS: list[Any] = [
    None,
    "Paris is 18 degrees",
    "price 250",
    {"price": 1234.5, "city": "Paris"},
    [1, 234],
    [1234],
    {"note": "profit margin", "rate": 12.5},
    {"text": "Zürich 7"},
    18,
    True,
]
_FACTS = ["18", "Paris", "1,234", "$199", "price", "12.5", "profit margin", "paris", "250", "cost"]
_ALIASES: list[dict[str, list[str]]] = [{}, {"price": ["$", "USD"], "cost": ["costs"]}, {"Paris": ["Zürich"]}]
_EXPECTED = [None, "", "Paris is 18 degrees", "the and for", "It costs 1234 USD"]


def _marked(scorer: Scorer, check: bool) -> Scorer:
    return scorer.as_spec_check() if check else scorer


def _reply(text: str | None) -> Iteration:
    parts = [MessagePart(type="tool_call", name="search")]
    if text is not None:
        parts.append(MessagePart(type="text", text=text))
    return Iteration(index=0, output_messages=[Message(role="assistant", parts=parts)])


@st.composite
def _call(draw: st.DrawFn, nested: bool = True) -> ToolCall:
    child = None
    if nested and draw(st.integers(0, 5)) == 0:
        output = draw(st.sampled_from([None, *_TEXTS]))
        child = Trace(trace_id="c" * 32, status="success", output=output, tool_calls=[draw(_call(nested=False))])
    return ToolCall(
        name=draw(st.sampled_from(["search", "fetch"])),
        arguments={"q": draw(st.sampled_from(_TEXTS))},  # never a source: the agent wrote them
        result=draw(st.sampled_from(_RESULTS)),
        child=child,
        handoff=child is not None and draw(st.booleans()),
    )


@st.composite
def _trace(draw: st.DrawFn) -> Trace:
    replies = draw(st.lists(st.sampled_from([None, *_TEXTS]), max_size=2))
    return Trace(
        trace_id="t" * 32,
        status="success",
        input=draw(st.sampled_from([None, *_TEXTS])),
        output=draw(st.sampled_from([None, None, *_TEXTS])),
        tool_calls=draw(st.lists(_call(), max_size=4)),
        iterations=[_reply(text).model_copy(update={"index": i}) for i, text in enumerate(replies)],
    )


@st.composite
def _config(draw: st.DrawFn) -> dict[str, Any]:
    weights = [draw(st.sampled_from([0.0, 0.2, 0.4, 1.0])) for _ in range(3)]
    if not any(weights):
        weights[0] = 0.4
    return {
        "expected": draw(st.sampled_from(_EXPECTED)),
        "facts": draw(st.lists(st.sampled_from(_FACTS), max_size=3, unique=True)),
        "fields": draw(st.lists(st.sampled_from(_FACTS), max_size=2, unique=True)),
        "aliases": draw(st.sampled_from(_ALIASES)),
        "weights": dict(zip(("groundedness", "correctness", "completeness"), weights, strict=True)),
        "threshold": draw(st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0])),
        "require_tool_call": draw(st.booleans()),
        "ignore_numbers_below": draw(st.sampled_from([0.0, 10.0, 100.0])),
    }


@_SETTINGS
@given(_trace(), _config(), st.sampled_from(_CLASSES), st.booleans())
def test_columnar_answer_axes_equal_the_reference(
    trace: Trace, config: dict[str, Any], cls: type[Scorer], check: bool
) -> None:
    check_same(trace, _marked(cls.model_validate(config), check))


@st.composite
def _passing(draw: st.DrawFn) -> tuple[Trace, dict[str, Any]]:
    """A trace whose answer states every fact, each also in the input or a tool's result."""
    facts = draw(st.lists(st.sampled_from(["18", "Paris", "1,234", "12.5", "profit margin"]), min_size=1, unique=True))
    answer = "Answer: " + ", ".join(facts) + "."
    where = draw(st.sampled_from(["input", "result", "both"]))
    sources = " and ".join(facts)
    calls = [
        ToolCall(name="search", result=sources if where != "input" else "nothing", handoff=draw(st.booleans())),
        ToolCall(name="fetch", result=draw(st.sampled_from([None, {"seen": sources}, [1, 2]]))),
    ]
    trace = Trace(
        trace_id="p" * 32,
        status="success",
        input=sources if where != "result" else "what?",
        output=None if draw(st.booleans()) else answer,
        tool_calls=calls,
        iterations=[_reply(answer)],
    )
    config = {
        "facts": facts,
        "fields": draw(st.sampled_from([[], facts[:1]])),
        "expected": draw(st.sampled_from([None, answer])),
        "threshold": draw(st.sampled_from([0.0, 0.7, 1.0])),
        "ignore_numbers_below": draw(st.sampled_from([0.0, 10.0])),
    }
    return trace, config


@_PASSING
@given(_passing(), st.sampled_from(_CLASSES), st.booleans())
def test_answers_that_pass_take_the_columnar_path(
    case: tuple[Trace, dict[str, Any]], cls: type[Scorer], check: bool
) -> None:
    trace, config = case
    found = check_same(trace, _marked(cls.model_validate(config), check))
    assert found is not None and found.value is not None


def _plain(**fields: Any) -> Trace:
    calls = fields.pop("tool_calls", [ToolCall(name="search", result="Paris is 18 degrees")])
    return Trace(trace_id="f" * 32, status="success", tool_calls=calls, **fields)


def test_the_forms_leave_to_the_reference_what_the_columns_cannot_settle() -> None:
    grounded = _plain(output="Paris: 18")
    assert check_same(grounded, Groundedness(facts=["Paris"])) is not None
    # A nested agent (not a handoff) adds its results and answer, which live in another row.
    child = Trace(trace_id="c" * 32, status="success", output="Paris is 18 degrees")
    nested = _plain(output="Paris: 18", tool_calls=[ToolCall(name="ask", child=child)])
    assert check_same(nested, Groundedness(facts=["Paris"])) is None
    assert check_same(nested, AnswerQuality(facts=["Paris"])) is None
    # Without facts or an expected answer, correctness reads the case, which a form is not given.
    assert check_same(grounded, Correctness()) is None
    assert check_same(grounded, Correctness(expected="Paris 18")) is not None
    assert check_same(grounded, AnswerQuality(fields=["Paris"])) is None
    # No answer recorded: the axes fail or do not apply, whatever the threshold.
    assert check_same(_plain(input="Paris"), Correctness(facts=["Paris"], threshold=0.0)) is None


def test_a_result_is_read_as_the_reference_writes_it() -> None:
    # The table stores `[1,234]`, which holds the number 1234; the reference reads `[1, 234]`.
    trace = _plain(output="1234 items", tool_calls=[ToolCall(name="count", result=[1, 234])])
    assert check_same(trace, Groundedness()) is None
    found = check_same(_plain(output="1234 items", tool_calls=[ToolCall(name="count", result=[1234])]), Groundedness())
    assert found is not None and found.details == {"claims": ["1234"]}


def test_a_check_counts_an_unrecorded_axis_as_zero_and_says_so() -> None:
    # Claims, but no input and no tool result to check them against: groundedness cannot be checked.
    trace = _plain(output="Paris: 18", tool_calls=[ToolCall(name="search")])
    found = check_same(trace, AnswerQuality(facts=["Paris"], threshold=0.5).as_spec_check())
    assert found is not None and found.value == pytest.approx(0.6) and found.details is not None
    assert found.details["unrecorded"] is True and found.details["axes"]["groundedness"]["value"] == 0.0
    found = check_same(trace, AnswerQuality(facts=["Paris"], threshold=0.5))  # a default leaves the axis out
    assert found is not None and found.value == 1.0 and found.details is not None
    assert "unrecorded" not in found.details and found.details["axes"]["groundedness"]["value"] is None


# The engine ----------------------------------------------------------------------------------

_SPEC = """\
confidence: 0.5
cases:
  - id: paris
    input: Weather in Paris?
    expect:
      answer: {facts: ["18", Paris], fields: [temperature], aliases: {temperature: [degrees]}}
      groundedness: {facts: [Paris]}
      correctness: {expected: Paris 18}
      completeness: {fields: [Paris, degrees]}
  - id: rome
    input: Weather in Rome?
    expect:
      answer: {facts: ["21", Rome]}
"""


def _answer_turn(rec: Recorder, city: str, measured: int, said: int) -> None:
    """An agent that looks the weather up (`measured` degrees) and answers `said` degrees."""
    with rec.span("invoke_agent helper", agent_attrs("helper")):
        user = ("user", [text(f"Weather in {city}?")])
        call_id = f"c-{rec.now}"
        chat(
            rec,
            "gpt-4o",
            messages(user),
            messages(("assistant", [tool_call(call_id, "weather", {"city": city})])),
            (9, 3),
        )
        result = json.dumps({"city": city, "temperature": measured, "stations": 1234})
        with rec.span("execute_tool weather", tool_attrs("weather", call_id, json.dumps({"city": city}), result)):
            rec.tick(1)
        reply = messages(("assistant", [text(f"{city}: {said} degrees, from 1,234 stations.")]))
        chat(rec, "gpt-4o", messages(user), reply, (20, 8))


def _report(runs: Path, spec: Path, out: Path, *, cache: bool) -> dict[str, Any]:
    with ReportWriter(str(out)) as writer:
        options = ScoreOptions(paths=(str(runs),), cache=cache, columnar=cache, workers=1)  # no cache: per trace
        run = scoring.score([runs], load_spec(spec), options, writer)
        writer.finish(run.report)
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    report.pop("created_at")
    return report


def test_warm_scoring_answers_passing_answers_on_the_columnar_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    rec = Recorder(tmp_path / "runs")
    for index in range(6):  # the Paris runs all pass but one; the Rome runs half pass
        _answer_turn(rec, "Paris", 18, 25 if index == 0 else 18)
        _answer_turn(rec, "Rome", 21, 21 if index % 2 else 19)
    rec.close()
    spec = tmp_path / "spec.yaml"
    spec.write_text(_SPEC, encoding="utf-8")
    answered: list[str] = []
    for cls in _CLASSES:
        monkeypatch.setitem(forms.FORMS, cls, _counted(forms.FORMS[cls], answered))
    reference = _report(tmp_path / "runs", spec, tmp_path / "none.json", cache=False)
    cold = _report(tmp_path / "runs", spec, tmp_path / "cold.json", cache=True)
    first = sorted(answered)  # the table written as the traces are rebuilt, a batch before its traces
    answered.clear()
    warm = _report(tmp_path / "runs", spec, tmp_path / "warm.json", cache=True)
    assert warm == cold == reference
    # Paris: 5 runs pass every check, the one that says 25 passes completeness alone; Rome: the 3 that
    # say 21 pass answer_quality (19 is neither found in the results nor the expected 21).
    quality = ["answer_quality"] * (5 + 3)
    assert sorted(answered) == sorted([*quality, *["groundedness", "correctness"] * 5, *["completeness"] * 6])
    assert first == sorted(answered)
    outcomes = [s["passed"] for e in warm["entries"] for x in e["samples"] for s in x["scores"]]
    assert outcomes.count(False) > 0


def _counted(form: forms.Form, answered: list[str]) -> forms.Form:
    def counted(scorer: Scorer, row: RowCalls) -> Score | None:
        found = form(scorer, row)
        if found is not None:
            answered.append(found.scorer)
        return found

    return counted
