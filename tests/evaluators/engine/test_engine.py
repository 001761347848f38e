"""The scoring engine: matching traces to cases, repeats, multi-turn, selection, outcomes and the gate."""

from __future__ import annotations

import asyncio
import socket
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest
from _engine_scorers import Boom, NotApplicable, OutputHas, SeesCase  # noqa: F401 - registers the test scorers

from evaltrace.collector.errors import InputError
from evaltrace.collector.traces.records import Iteration, ToolCall, Trace, Usage
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.model import EntryResult, Report
from evaltrace.evaluators.results.report.terminal import render_summary
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec, load_spec

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


@register
class SlowJudge(Scorer):
    """Test async scorer standing in for a judge: sleeps, then passes."""

    name: ClassVar[str] = "t_engine_slow_judge"
    uses_judge: ClassVar[bool] = True
    delay: float = 0.3

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        raise AssertionError("the engine must await ascore")

    async def ascore(self, trace: Trace, case: Any | None = None) -> Score:
        await asyncio.sleep(self.delay)
        return self.result(True, reason="slept")


@register
class SlowAsync(SlowJudge):
    """Test async scorer doing its own waiting: concurrent like a judge, but needs no judge session."""

    name: ClassVar[str] = "t_engine_slow_async"
    uses_judge: ClassVar[bool] = False


@register
class AnswerIfAny(Scorer):
    """Test scorer: passes a trace with an answer, does not apply to one without."""

    name: ClassVar[str] = "t_engine_answer_if_any"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        if trace.output is None:
            return self.result(None, reason="no answer to look at")
        return self.result(True, 1.0, "answered")


def make_trace(
    n: int,
    input: str | None,
    output: str | None = "ok",
    *,
    case_id: str | None = None,
    conversation: str | None = None,
    start: float = 0.0,
    seconds: float = 1.0,
) -> Trace:
    begin = T0 + timedelta(seconds=start)
    return Trace(
        trace_id=f"{n:032x}",
        input=input,
        output=output,
        status="success",
        case_id=case_id,
        conversation_id=conversation,
        start_time=begin,
        end_time=begin + timedelta(seconds=seconds),
    )


def spec_file(tmp_path: Path, text: str) -> LoadedSpec:
    path = tmp_path / "evals.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_spec(path)


def entry(report: Report, case_id: str) -> EntryResult:
    return next(e for e in report.entries if e.case_id == case_id)


TWO_CASES = """\
cases:
  - id: weather
    input: "What's  the weather\\nin Paris?"
    tier: smoke
    tags: [weather]
    expect: {t_engine_output_has: {text: "18"}}
  - id: greet
    input: Hello
    tier: full
    tags: [chat, small-talk]
    expect: {t_engine_output_has: {text: hi}}
"""


def test_matches_by_normalised_input_and_by_case_id(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, TWO_CASES)
    traces = [
        make_trace(1, "  What's the weather in\tParis? ", "18C"),
        make_trace(2, "something else entirely", "hi there", case_id="greet"),
    ]
    report = scoring.score(iter(traces), spec).report
    assert [(e.case_id, e.trace_id, e.status) for e in report.entries] == [
        ("weather", f"{1:032x}", "passed"),
        ("greet", f"{2:032x}", "passed"),
    ]
    assert report.passed and report.pass_rate == 1.0 and report.unmatched == []


def test_input_match_is_case_sensitive_and_whitespace_only(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, TWO_CASES)
    report = scoring.score(
        iter([make_trace(1, "what's the weather in paris?", "18"), make_trace(2, "Hello", "hi")]), spec
    ).report
    assert entry(report, "weather").status == "missing"
    assert [u.trace_id for u in report.unmatched] == [f"{1:032x}"]


def test_missing_case_fails_and_unmatched_traces_are_not_scored(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, TWO_CASES)
    report = scoring.score(
        iter([make_trace(1, "What's the weather in Paris?", "18"), make_trace(2, "Bye", "x")]), spec
    ).report
    greet = entry(report, "greet")
    assert (greet.status, greet.passed, greet.pass_rate, greet.trace_id) == ("missing", False, 0.0, None)
    assert greet.reason == "no trace matched this case (by evaltrace.case_id or by input)"
    assert [(u.trace_id, u.input) for u in report.unmatched] == [(f"{2:032x}", "Bye")]
    assert (report.counts.missing, report.counts.unmatched, report.counts.traces) == (1, 1, 2)
    assert not report.passed and report.pass_rate == 0.5


def test_gate_threshold_four_of_five(tmp_path: Path) -> None:
    cases = "\n".join(
        f"  - {{id: c{i}, input: q{i}, expect: {{t_engine_output_has: {{text: good}}}}}}" for i in range(5)
    )
    spec = spec_file(tmp_path, f"confidence: 0.8\ncases:\n{cases}\n")
    traces = [make_trace(i, f"q{i}", "bad" if i == 3 else "good") for i in range(5)]
    at_spec = scoring.score(iter(traces), spec).report
    assert (at_spec.passed, at_spec.pass_rate, at_spec.confidence) == (True, 0.8, 0.8)
    stricter = scoring.score(iter(traces), spec, ScoreOptions(confidence=0.9)).report
    assert (stricter.passed, stricter.confidence) == (False, 0.9)
    assert stricter.gate_reason == "pass rate 80.0% (4/5) < confidence 90.0%"


def test_default_confidence_is_one(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, TWO_CASES)
    report = scoring.score(
        iter([make_trace(1, "What's the weather in Paris?", "18"), make_trace(2, "Hello", "no")]), spec
    ).report
    assert (report.confidence, report.pass_rate, report.passed) == (1.0, 0.5, False)


REPEATS = """\
cases:
  - id: r
    input: again
    repeat: {rule}
    expect: {{t_engine_output_has: {{text: good}}}}
"""


@pytest.mark.parametrize(
    ("rule", "passed", "pass_rate"),
    [
        ("mean", False, 2 / 3),
        ("all", False, 0.0),
        ("majority", True, 1.0),
        ("pass@1", False, 0.0),  # the first sample by start time fails
        ("pass@2", True, 1.0),
        ("{rule: all, min_samples: 4}", False, 0.0),
    ],
)
def test_repeats_aggregate_by_rule(tmp_path: Path, rule: str, passed: bool, pass_rate: float) -> None:
    spec = spec_file(tmp_path, REPEATS.format(rule=rule))
    # Arrival order differs from start order: the failing sample started first.
    traces = [
        make_trace(1, "again", "good", start=20),
        make_trace(2, "again", "bad", start=0),
        make_trace(3, "again", "good", start=10),
    ]
    result = entry(scoring.score(iter(traces), spec).report, "r")
    assert (result.passed, result.pass_rate) == (passed, pytest.approx(pass_rate))
    assert [s.trace_id for s in result.samples] == [f"{2:032x}", f"{3:032x}", f"{1:032x}"]
    assert result.trace_id == f"{2:032x}"
    if rule.startswith("{"):
        assert result.reason == "3 matching sample(s), the case needs at least 4 (repeat.min_samples)"
    (merged,) = result.scores
    assert merged.reason is not None and merged.reason.startswith("passed in 2 of 3 samples; first failure: ")


def test_mean_rule_contributes_fractions_to_the_gate(tmp_path: Path) -> None:
    spec = spec_file(
        tmp_path,
        """\
        confidence: 0.75
        cases:
          - {id: a, input: qa, expect: {t_engine_output_has: {text: good}}}
          - {id: b, input: qb, expect: {t_engine_output_has: {text: good}}}
        """,
    )
    traces = [make_trace(1, "qa", "good"), make_trace(2, "qa", "bad"), make_trace(3, "qb", "good")]
    report = scoring.score(iter(traces), spec).report
    assert (entry(report, "a").pass_rate, entry(report, "b").pass_rate) == (0.5, 1.0)
    assert report.pass_rate == 0.75 and report.passed


MULTI_TURN = """\
cases:
  - id: memory
    turns:
      - input: Hi, I am David
        expect: {t_engine_sees_case: {}}
      - input: What's my name?
        expect: {t_engine_output_has: {text: David}}
  - id: single
    input: What's my name?
    expect: {t_engine_output_has: {text: nobody}}
"""


def test_multi_turn_matches_a_conversation_in_start_order(tmp_path: Path) -> None:
    spec = spec_file(
        tmp_path, MULTI_TURN.replace("  - id: single\n    input: What's my name?\n", "  - id: single\n    input: x\n")
    )
    traces = [
        make_trace(2, "What's my name?", "You are David.", conversation="c1", start=5),
        make_trace(9, "unrelated", "?"),
        make_trace(1, "Hi, I am David", "Nice to meet you", conversation="c1", start=0),
    ]
    memory = entry(scoring.score(iter(traces), spec).report, "memory")
    assert (memory.status, memory.trace_id) == ("passed", f"{1:032x}")
    (sample,) = memory.samples
    assert sample.trace_ids == [f"{1:032x}", f"{2:032x}"] and sample.conversation_id == "c1"
    assert [(s.scorer, s.turn, s.passed) for s in sample.scores] == [
        ("t_engine_sees_case", 1, True),
        ("t_engine_output_has", 2, True),
    ]


def test_multi_turn_failures_name_the_turn_and_missing_turns_fail(tmp_path: Path) -> None:
    spec = spec_file(
        tmp_path, MULTI_TURN.replace("  - id: single\n    input: What's my name?\n", "  - id: single\n    input: x\n")
    )
    traces = [
        make_trace(1, "Hi, I am David", "hello", conversation="c1", start=0),
        make_trace(2, "What's my name?", "I don't know", conversation="c1", start=5),
        make_trace(3, "anything", "hello", conversation="c2", case_id="memory", start=9),
    ]
    memory = entry(scoring.score(iter(traces), spec).report, "memory")
    assert memory.status == "failed" and len(memory.samples) == 2
    first, second = memory.samples
    assert [(s.scorer, s.turn, s.passed) for s in first.scores if s.passed is False] == [
        ("t_engine_output_has", 2, False)
    ]
    missing_turn = [s for s in second.scores if s.scorer == "turns"]
    assert [(s.turn, s.passed) for s in missing_turn] == [(2, False)]
    assert missing_turn[0].reason == 'the conversation has 1 trace(s); no trace for turn 2 ("What\'s my name?")'


def test_single_turn_case_wins_over_a_conversation_with_the_same_input(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, MULTI_TURN)
    report = scoring.score(iter([make_trace(1, "What's my name?", "nobody", conversation="c9")]), spec).report
    assert entry(report, "single").status == "passed"
    assert entry(report, "memory").status == "missing"


def test_conversation_matching_no_case_is_unmatched(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, MULTI_TURN)
    traces = [make_trace(1, "first", conversation="c1"), make_trace(2, "second", conversation="c1", start=1)]
    report = scoring.score(iter(traces), spec).report
    assert sorted(u.trace_id for u in report.unmatched) == [f"{1:032x}", f"{2:032x}"]


@pytest.mark.parametrize(
    ("options", "selected"),
    [
        (ScoreOptions(tiers=("smoke",)), ["weather"]),
        (ScoreOptions(tags=("small-talk", "nothing")), ["greet"]),
        (ScoreOptions(cases=("gr*",)), ["greet"]),
        (ScoreOptions(cases=("weather", "greet")), ["weather", "greet"]),
        (ScoreOptions(tiers=("smoke", "full"), tags=("chat",)), ["greet"]),
    ],
)
def test_selection(tmp_path: Path, options: ScoreOptions, selected: list[str]) -> None:
    spec = spec_file(tmp_path, TWO_CASES)
    traces = [make_trace(1, "What's the weather in Paris?", "18"), make_trace(2, "Hello", "hi")]
    report = scoring.score(iter(traces), spec, options).report
    assert [e.case_id for e in report.entries] == selected
    assert report.unmatched == []  # traces of cases left out are ignored, not unmatched


def test_selection_keeping_no_case_is_an_input_error(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, TWO_CASES)
    with pytest.raises(InputError, match=r"evals\.yaml: no case matches the selection \(--tier nightly --tag x\)"):
        scoring.score(iter([]), spec, ScoreOptions(tiers=("nightly",), tags=("x",)))


def test_a_scorer_error_fails_its_entry(tmp_path: Path) -> None:
    spec = spec_file(
        tmp_path, "cases: [{id: a, input: q, expect: {t_engine_boom: {}, t_engine_output_has: {text: ok}}}]\n"
    )
    report = scoring.score(iter([make_trace(1, "q", "ok")]), spec, ScoreOptions(confidence=0.0)).report
    result = entry(report, "a")
    assert (result.status, result.passed, result.pass_rate) == ("failed", False, 0.0)
    boom = result.scores[0]
    assert (boom.scorer, boom.passed, boom.error) == ("t_engine_boom", False, "RuntimeError")
    assert boom.reason == "scorer failed: RuntimeError: kaboom"
    assert report.passed  # confidence 0: the gate still passes, the entry does not


def test_a_case_no_check_applied_to_fails_saying_so(tmp_path: Path) -> None:
    # A case with no check at all verified nothing: before, it was "not applicable" and left out of
    # the pass rate, so the gate passed on the other entries alone.
    spec = spec_file(
        tmp_path,
        """\
        cases:
          - {id: na, input: qa}
          - {id: ok, input: qb, expect: {t_engine_output_has: {text: ok}}}
        """,
    )
    report = scoring.score(iter([make_trace(1, "qa"), make_trace(2, "qb")]), spec).report
    na = entry(report, "na")
    assert (na.status, na.passed, na.pass_rate) == ("failed", False, 0.0)
    assert na.reason == "nothing applied: the entry has no check, so nothing was verified"
    assert entry(report, "ok").status == "passed"
    assert (report.pass_rate, report.passed, report.counts.failed, report.counts.not_applicable) == (0.5, False, 1, 0)


def test_a_scorer_written_in_a_spec_that_does_not_apply_fails(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "cases: [{id: na, input: qa, expect: {t_engine_na: {}}}]\n")
    report = scoring.score(iter([make_trace(1, "qa")]), spec).report
    (score,) = entry(report, "na").scores
    assert (score.passed, score.value) == (False, 0.0)
    assert score.reason == "does not apply A check written in a spec must apply, so this counts as a failure."
    assert (report.passed, report.counts.failed) == (False, 1)
    assert [(c.scorer, c.passed, c.failed, c.not_applied) for c in report.scorer_counts] == [("t_engine_na", 0, 1, 0)]


def test_nothing_applicable_fails_the_gate(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "cases: [{id: na, input: qa}, {id: empty, input: qb}]\n")
    report = scoring.score(iter([make_trace(1, "qa"), make_trace(2, "qb")]), spec).report
    assert [e.status for e in report.entries] == ["failed", "failed"]
    assert (report.passed, report.pass_rate) == (False, 0.0)
    assert report.gate_reason == "pass rate 0.0% (0/2) < confidence 100.0%"


def test_without_a_spec_a_trace_no_default_applied_to_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: such traces were left out of the pass rate, so a run passed its gate on the traces
    # something applied to while the others (here, the ones that called tools) verified nothing.
    from evaltrace.evaluators.scoring.scorers.registry import create_scorer

    scorers = (create_scorer("t_engine_na", {}), create_scorer("t_engine_answer_if_any", {}))
    monkeypatch.setattr(scoring, "default_scorers", lambda: scorers)
    answered = make_trace(1, "qa")
    called = make_trace(2, "qb", None).model_copy(update={"tool_calls": [ToolCall(name="search")]})
    report = scoring.score(iter([answered, called]), None, ScoreOptions(cache=False)).report
    by_trace = {e.trace_id: e for e in report.entries}
    assert by_trace[answered.trace_id].status == "passed"
    failed = by_trace[called.trace_id]
    assert (failed.status, failed.passed, failed.pass_rate) == ("failed", False, 0.0)
    assert failed.reason is not None and failed.reason.startswith(
        "nothing applied, so nothing was verified (t_engine_na"
    )
    assert [s.passed for s in failed.samples[0].scores] == [None, None]  # the sample itself: nothing applied
    assert (report.passed, report.pass_rate, report.counts.failed) == (False, 0.5, 1)


HINT = "record content (is EVALTRACE_CAPTURE_CONTENT=0?) or wrap the agent in evaltrace.collector.agent_run(...)"


def test_spec_checks_on_a_trace_recorded_without_content_fail_and_say_what_is_missing(tmp_path: Path) -> None:
    # Issue 13: a trace with no answer passed `output: {contains: ...}` ("does not apply"), and
    # `tool_calls: []` passed with tools called unless `trajectory: strict`.
    spec = spec_file(
        tmp_path,
        """\
        scorers: [tool_errors, tool_efficiency]
        cases:
          - id: a
            input: q
            expect:
              tool_calls: []
              output: {contains: ["18"], not_contains: [error]}
              steps: {not_contains: [{name: delete, arguments: {path: /}}]}
        """,
    )
    blind = make_trace(1, None, None, case_id="a").model_copy(
        update={"tool_calls": [ToolCall(name="delete", arguments=None), ToolCall(name="delete", arguments=None)]}
    )
    report = scoring.score(iter([blind]), spec).report
    scores = {s.scorer: s for s in entry(report, "a").scores}
    assert {name: s.passed for name, s in scores.items()} == {
        "tool_errors": True,
        "tool_efficiency": False,
        "trajectory": False,
        "output": False,
        "steps": False,
    }
    assert scores["output"].reason == (
        f"No answer was recorded: the trace has no input and no output; {HINT}; all 2 output checks failed."
    )
    assert scores["trajectory"].reason == (
        "Failed (in_order): no tool calls were expected, but 2 were made: #1 delete, #2 delete."
    )
    for name in ("tool_efficiency", "steps"):
        assert scores[name].reason is not None and HINT in scores[name].reason, name
    assert not report.passed


def test_default_scoring_of_a_run_recorded_without_content_does_not_pass() -> None:
    blind = [
        make_trace(n, None, None).model_copy(
            update={"tool_calls": [ToolCall(name="search", arguments=None), ToolCall(name="search", arguments=None)]}
        )
        for n in (1, 2)
    ]
    report = scoring.score(iter(blind), None).report
    assert (report.passed, report.counts.failed) == (False, 2)
    outcome = next(s for s in report.entries[0].scores if s.scorer == "outcome")
    assert outcome.passed is False and outcome.reason is not None
    assert outcome.reason.startswith("Outcome unknown (expected success): the run returned but no answer was recorded")
    counts = {c.scorer: c for c in report.scorer_counts}
    assert (counts["tool_efficiency"].not_applied, counts["tool_efficiency"].unrecorded) == (2, 2)
    assert (counts["outcome"].failed, counts["outcome"].unrecorded) == (2, 2)
    summary = render_summary(report)
    assert "tool_efficiency          0       0              2" in summary
    assert (
        "Warning: 6 verdicts met content that was not recorded "
        f"(tool_call_validity 2, tool_efficiency 2, outcome 2): {HINT}" in summary
    )


def test_without_spec_every_trace_is_an_entry_scored_by_the_defaults() -> None:
    good = make_trace(1, "q1", "fine")
    bad = make_trace(2, "q2", "oops", start=5).model_copy(
        update={"tool_calls": [ToolCall(name="lookup", arguments={}, error="timeout")]}
    )
    report = scoring.score(iter([bad, good]), None).report
    assert [(e.trace_id, e.case_id, e.passed) for e in report.entries] == [
        (good.trace_id, None, True),
        (bad.trace_id, None, False),
    ]
    assert {s.name for s in report.scorers} == {"tool_errors", "tool_call_validity", "tool_efficiency", "outcome"}
    failing = [s.scorer for s in report.entries[1].scores if s.passed is False]
    assert "tool_errors" in failing
    assert report.inputs.spec is None and report.confidence == 1.0 and not report.passed


def test_no_traces_without_spec_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no trace to score"):
        scoring.score(iter([]), None)


def test_report_carries_inputs_stats_and_scorer_identity(tmp_path: Path) -> None:
    spec = spec_file(
        tmp_path,
        """\
        prices: {my-model: {input_per_mtok: 1.0, output_per_mtok: 2.0}}
        cases: [{id: a, input: q, expect: {t_engine_output_has: {text: ok}}}]
        """,
    )
    iteration = Iteration(index=0, model="my-model", usage=Usage(input_tokens=1000, output_tokens=500))
    traces = [
        make_trace(i, "q", "ok", seconds=float(i)).model_copy(
            update={"iterations": [iteration], "usage": Usage(input_tokens=1000, output_tokens=500)}
        )
        for i in range(1, 5)
    ]
    report = scoring.score(iter(traces), spec, ScoreOptions(paths=("runs",))).report
    assert (report.inputs.paths, report.inputs.spec) == (["runs"], str(tmp_path / "evals.yaml"))
    assert (report.latency.p50_seconds, report.latency.p95_seconds) == (2.5, pytest.approx(3.85))
    assert (report.usage.input_tokens, report.usage.output_tokens) == (4000, 2000)
    assert report.cost.estimated_usd == pytest.approx(4 * (1000 * 1.0 + 500 * 2.0) / 1e6)
    (info,) = report.scorers
    assert (info.name, info.version, info.config) == ("t_engine_output_has", 1, {"text": "ok"})
    assert info.config_hash == spec.case_scorers["a"][0][0].config_hash()
    sample = report.entries[0].samples[0]
    assert (sample.input, sample.output, sample.usage.input_tokens) == ("q", "ok", 1000)


@pytest.mark.parametrize("scorer", ["t_engine_slow_judge", "t_engine_slow_async"])
def test_async_scorers_run_concurrently(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scorer: str) -> None:
    monkeypatch.chdir(tmp_path)
    # A judge session checks its settings when it opens (a setup error is exit 2); nothing is sent here.
    monkeypatch.setenv("EVALTRACE_JUDGE_MODEL", "m")
    monkeypatch.setenv("EVALTRACE_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")
    spec = spec_file(tmp_path, f"cases: [{{id: a, input: q, expect: {{{scorer}: {{delay: 0.3}}}}}}]\n")
    traces = [make_trace(i, "q") for i in range(8)]
    started = time.perf_counter()
    report = scoring.score(iter(traces), spec).report
    elapsed = time.perf_counter() - started
    assert entry(report, "a").pass_rate == 1.0 and len(entry(report, "a").samples) == 8
    assert elapsed < 8 * 0.3 / 2, f"8 samples of a 0.3 s judge took {elapsed:.2f} s: not concurrent"
    if scorer == "t_engine_slow_judge":
        assert report.judge is not None and report.judge["requests"] == 0  # the session opened, nothing was sent
    else:
        assert report.judge is None, "an async scorer that uses no judge opens no judge session"


def test_rule_scoring_opens_no_socket_and_no_judge_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    spec = spec_file(
        tmp_path,
        """\
        scorers: [tool_errors, tool_call_validity]
        cases:
          - id: a
            input: q
            expect: {output: {contains: ok}, outcome: success, answer: {facts: [ok]}, tool_calls: []}
        """,
    )
    report = scoring.score(iter([make_trace(1, "q", "ok")]), spec).report
    assert attempts == []
    assert report.judge is None
    assert {s.scorer for s in report.entries[0].scores} >= {"output", "outcome", "trajectory", "tool_errors"}
