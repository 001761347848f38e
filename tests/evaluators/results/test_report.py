"""The gate, outcome arithmetic, the JSON report writer and the terminal summary."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evaltrace.collector.errors import InputError
from evaltrace.collector.traces.records import Iteration, Trace
from evaltrace.evaluators.engine._aggregate import ScorerTally, aggregate_case, sample_status, score_result
from evaltrace.evaluators.engine._numbers import percentile
from evaltrace.evaluators.results.report.json_writer import ReportWriter, write_report
from evaltrace.evaluators.results.report.model import (
    Counts,
    EntryResult,
    EntryStatus,
    Report,
    ReportInputs,
    SampleResult,
    ScorerCount,
    ScoreResult,
    evaluate_gate,
    load_report,
)
from evaltrace.evaluators.results.report.terminal import MAX_LISTED, FailureDigest, render_summary
from evaltrace.evaluators.results.report.writer import ReportEntry
from evaltrace.evaluators.scoring.scorers.evidence import RECORD_HINT, UNINSTRUMENTED_HINT
from evaltrace.evaluators.scoring.scorers.registry import create_scorer
from evaltrace.evaluators.scoring.spec.model import Case, RepeatPolicy

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def entry(rate: float | None, status: str = "passed") -> EntryResult:
    return EntryResult(
        case_id="c", trace_id=None, passed=None if rate is None else rate == 1.0, status=status, pass_rate=rate
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rates", "confidence", "passed"),
    [
        ([1, 1, 1, 1, 0], 0.8, True),
        ([1, 1, 1, 1, 0], 0.9, False),
        ([1, 1, 1, 1, 1], 1.0, True),
        ([1, 1, 1, 1, 0], 1.0, False),
        ([0.7, 0.7, 0.7], 0.7, True),  # sums of fractions must not miss the threshold by a rounding error
        ([0, 0], 0.0, True),
    ],
)
def test_gate_thresholds(rates: list[float], confidence: float, passed: bool) -> None:
    gate = evaluate_gate([entry(float(r)) for r in rates], confidence)
    assert gate.passed is passed
    assert gate.pass_rate == pytest.approx(sum(rates) / len(rates))


def test_gate_ignores_not_applicable_and_fails_when_nothing_applied() -> None:
    gate = evaluate_gate([entry(1.0), entry(None, "not_applicable"), entry(0.0, "missing")], 0.5)
    assert (gate.passed, gate.pass_rate, gate.reason) == (True, 0.5, "pass rate 50.0% (1/2) >= confidence 50.0%")
    empty = evaluate_gate([entry(None, "not_applicable")], 0.0)
    assert (empty.passed, empty.pass_rate) == (False, None)


def test_gate_reason_explains_partial_credit_from_repeats() -> None:
    # Under the `mean` rule a repeated case counts its share of passing samples, yet the entry
    # itself is failed unless every sample passed: the reason says both.
    gate = evaluate_gate([entry(0.75, "failed"), entry(1.0), entry(0.9, "failed")], 0.8)
    assert gate.reason == (
        "pass rate 88.3% (mean of 3 entries' sample pass rates; 1/3 passed in every sample) >= confidence 80.0%"
    )


def score(passed: bool | None, error: str | None = None) -> ScoreResult:
    return ScoreResult(scorer="s", passed=passed, reason="r", error=error)


def test_sample_status() -> None:
    assert sample_status([score(True), score(None)]) == "passed"
    assert sample_status([score(True), score(False)]) == "failed"
    assert sample_status([score(None, error="ValueError")]) == "failed"  # an error never passes
    assert sample_status([score(None), score(None)]) == "not_applicable"
    assert sample_status([]) == "not_applicable"


def sample(n: int, status: str) -> SampleResult:
    passed = None if status == "not_applicable" else status == "passed"
    return SampleResult(
        trace_id=f"t{n}",
        status=status,  # type: ignore[arg-type]
        passed=passed,
        scores=[score(passed)],
        start_time=T0 + timedelta(seconds=n),
    )


CASE = Case(id="c", input="q")


def test_not_applicable_samples_do_not_count_in_a_case() -> None:
    samples = [sample(0, "not_applicable"), sample(1, "passed"), sample(2, "failed")]
    result = aggregate_case(CASE, RepeatPolicy(rule="mean"), samples)
    assert (result.pass_rate, result.passed, result.status) == (0.5, False, "failed")
    assert result.reason is not None and result.reason.startswith(
        "1 of 2 samples passed (rule mean); first failure: s: r"
    )


def test_pass_at_k_counts_the_first_k_samples_only() -> None:
    samples = [sample(2, "passed"), sample(0, "failed"), sample(1, "failed")]
    assert aggregate_case(CASE, RepeatPolicy(rule="pass@k", k=2), samples).passed is False
    assert aggregate_case(CASE, RepeatPolicy(rule="pass@k", k=3), samples).passed is True
    assert aggregate_case(CASE, RepeatPolicy(rule="pass@k", k=3), samples).rule == "pass@3"


def test_majority_needs_more_than_half() -> None:
    two_two = [sample(0, "passed"), sample(1, "passed"), sample(2, "failed"), sample(3, "failed")]
    assert aggregate_case(CASE, RepeatPolicy(rule="majority"), two_two).passed is False
    assert aggregate_case(CASE, RepeatPolicy(rule="majority"), two_two[:3]).passed is True


def test_percentile() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.95) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([4.0, 1.0, 3.0, 2.0], 0.95) == pytest.approx(3.85)


def make_report(entries: list[EntryResult], passed: bool) -> Report:
    return Report(
        evaltrace_version="0.1.0",
        created_at=T0,
        inputs=ReportInputs(paths=["runs"], spec="evals.yaml"),
        passed=passed,
        pass_rate=0.5,
        confidence=0.8,
        gate_reason="pass rate 50.0% (1/2) < confidence 80.0%",
        counts=Counts(entries=len(entries), passed=1, failed=1, traces=2),
        entries=entries,
    )


def test_summary_lists_failing_entries_with_reasons_and_ends_with_the_gate() -> None:
    failing = EntryResult(
        case_id="paris-weather",
        trace_id="ab" * 16,
        passed=False,
        status="failed",
        pass_rate=0.0,
        scores=[
            ScoreResult(scorer="output", passed=False, reason="missing '18'."),
            ScoreResult(scorer="tool_errors", passed=True, reason="no tool errors"),
            ScoreResult(scorer="output", passed=False, reason="missing 'David'", turn=2),
        ],
    )
    missing = EntryResult(
        case_id="rome", trace_id=None, passed=False, status="missing", pass_rate=0.0, reason="no trace matched"
    )
    ok = EntryResult(case_id="fine", trace_id="cd" * 16, passed=True, status="passed", pass_rate=1.0)
    text = render_summary(make_report([failing, missing, ok], passed=False))
    lines = text.splitlines()
    assert lines[0] == "evaltrace score: spec evals.yaml; 2 traces read"
    assert f"FAILED paris-weather [trace {'ab' * 16}]" in lines
    assert "  - output: missing '18'." in lines
    assert "  - output (turn 2): missing 'David'" in lines
    assert not any("tool_errors" in line for line in lines)
    assert lines[lines.index("MISSING rome") + 1] == "  - no trace matched"
    assert not any("fine" in line for line in lines)
    assert lines[-1] == "Gate FAILED: pass rate 50.0% (1/2) < confidence 80.0%"


def test_write_report_to_file_and_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = make_report([], passed=True)
    target = tmp_path / "out" / "report.json"
    write_report(report, str(target))
    assert load_report(target) == report
    data = json.loads(target.read_text())
    assert data["schema_version"] == 1 and data["passed"] is True and data["entries"] == []
    write_report(report, "-")
    assert json.loads(capsys.readouterr().out) == data


def test_write_report_to_unwritable_place_is_an_input_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match=r"file/report\.json: cannot write the JSON report"):
        write_report(make_report([], passed=True), str(blocker / "report.json"))


def failing_entry(n: int) -> EntryResult:
    scores = [ScoreResult(scorer="output", passed=False, reason=f"missing '{n}'")]
    return EntryResult(case_id=f"c{n}", trace_id=None, passed=False, status="failed", pass_rate=0.0, scores=scores)


def test_summary_lists_the_first_failing_entries_and_counts_the_rest() -> None:
    entries = [failing_entry(n) for n in range(MAX_LISTED + 7)]
    lines = render_summary(make_report(entries, passed=False)).splitlines()
    assert f"FAILED c{MAX_LISTED - 1}" in lines and f"FAILED c{MAX_LISTED}" not in lines
    assert "... and 7 more failing entries (see --json)" in lines
    exact = render_summary(make_report(entries[:MAX_LISTED], passed=False)).splitlines()
    assert not any(line.startswith("... and") for line in exact)
    digest = FailureDigest(limit=2)
    for entry_ in entries[:3]:
        digest.add(entry_, samples=1)
    assert (digest.listed, digest.omitted) == (2, 1)
    assert "... and 1 more failing entry (see --json)" in render_summary(make_report([], False), digest)


def test_summary_lists_the_worst_entries_first_and_keeps_the_worst_when_over_the_limit() -> None:
    def entry(case_id: str, rate: float, status: EntryStatus = "failed") -> EntryResult:
        scores = [ScoreResult(scorer="output", passed=False, reason=f"{case_id} failed")]
        return EntryResult(
            case_id=case_id,
            trace_id=None,
            passed=False,
            status=status,
            pass_rate=rate,
            scores=scores,
        )

    entries = [entry("most", 0.8), entry("half", 0.5), entry("none", 0.0), entry("gone", 0.0, "missing")]
    lines = render_summary(make_report(entries, passed=False)).splitlines()
    start = lines.index("Worst entries (lowest pass rate first):")
    assert [line.split()[1] for line in lines[start + 1 :] if line.startswith(("FAILED", "MISSING"))] == [
        "none",
        "gone",
        "half",
        "most",
    ]
    digest = FailureDigest(limit=2)
    for item in entries:
        digest.add(item, samples=3)
        assert not digest.full or item.case_id == "gone"  # full once it holds two entries that passed nothing
    assert (digest.listed, digest.omitted) == (2, 2)
    assert [line.split()[1] for line in digest.lines if not line.startswith(" ")] == ["none", "gone"]
    assert "Worst entries" not in render_summary(make_report([], passed=True))


def test_report_writer_streams_one_json_object_and_renames_it_into_place(tmp_path: Path) -> None:
    report = make_report([], passed=True)
    target = tmp_path / "out" / "report.json"
    with ReportWriter(str(target)) as writer:
        writer.add(ReportEntry.of(failing_entry(1)))
        writer.add(
            ReportEntry.from_json(
                b'{"case_id":"c2","trace_id":null,"passed":null,"status":"not_applicable","pass_rate":null}'
            )
        )
        assert not target.exists()  # only the temporary file exists until `finish`
        writer.finish(report)
    loaded = load_report(target)
    assert [e.case_id for e in loaded.entries] == ["c1", "c2"]
    assert loaded.model_copy(update={"entries": []}) == report
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]
    assert target.stat().st_mode & 0o777 == 0o666 & ~current_umask()  # not a 0o600 temp file


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_report_writer_leaves_nothing_behind_on_error(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    with pytest.raises(RuntimeError, match="scoring broke"), ReportWriter(str(target)) as writer:
        writer.add(ReportEntry.of(failing_entry(1)))
        raise RuntimeError("scoring broke")
    assert list(tmp_path.iterdir()) == []
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match=r"file/report\.json: cannot write the JSON report"):
        ReportWriter(str(blocker / "report.json"))


def test_report_writer_to_stdout_writes_nothing_before_the_first_entry(capsys: pytest.CaptureFixture[str]) -> None:
    writer = ReportWriter("-")
    assert capsys.readouterr().out == ""
    writer.finish(make_report([], passed=True))
    data = json.loads(capsys.readouterr().out)
    assert data["entries"] == [] and data["passed"] is True and data["schema_version"] == 1


def test_scorer_tally_counts_verdicts_and_merges_worker_tallies() -> None:
    first, second = ScorerTally(), ScorerTally()
    first.add([ScoreResult(scorer="outcome", passed=True), ScoreResult(scorer="tool_errors", passed=None)])
    second.add(
        [
            ScoreResult(scorer="tool_efficiency", passed=None, details={"unrecorded": True}),
            ScoreResult(scorer="outcome", passed=False, details={"outcome": "unknown", "unrecorded": True}),
            ScoreResult(scorer="tool_errors", passed=False, error="RuntimeError"),
        ]
    )
    first.merge(second)
    rows = [(r.scorer, r.passed, r.failed, r.errors, r.not_applied, r.unrecorded) for r in first.rows()]
    assert rows == [("outcome", 1, 1, 0, 0, 1), ("tool_errors", 0, 1, 1, 1, 0), ("tool_efficiency", 0, 0, 0, 1, 1)]
    # A batch's samples at once (the warm path's, sharing score objects): counted per sample, in first-seen order.
    shared, failing = ScoreResult(scorer="b", passed=True), ScoreResult(scorer="a", passed=False, error="E")
    batch, one_by_one = ScorerTally(), ScorerTally()
    samples = [[shared], [failing, shared], [shared, ScoreResult(scorer="c", passed=None)], [failing]]
    batch.add(*samples)
    for scores in samples:
        one_by_one.add(scores)
    assert batch.rows() == one_by_one.rows()
    assert [(r.scorer, r.passed, r.failed, r.errors, r.not_applied) for r in batch.rows()] == [
        ("b", 3, 0, 0, 0),
        ("a", 0, 2, 2, 0),
        ("c", 0, 0, 0, 1),
    ]


def test_summary_shows_each_scorers_verdicts_and_warns_on_unrecorded_content() -> None:
    report = make_report([], passed=False).model_copy(
        update={
            "scorer_counts": [
                ScorerCount(scorer="tool_call_validity", passed=3, failed=0, not_applied=2, unrecorded=2),
                ScorerCount(scorer="outcome", passed=4, failed=1, unrecorded=1),
                ScorerCount(scorer="judge", passed=1, failed=3, errors=2),
            ]
        }
    )
    lines = render_summary(report).splitlines()
    start = lines.index("scorer              passed  failed  did not apply  errors")
    assert lines[start + 1 : start + 5] == [
        "tool_call_validity       3       0              2       0",
        "outcome                  4       1              0       0",
        "judge                    1       1              0       2",  # failed counts failures; errors apart
        "Warning: 3 verdicts met content that was not recorded (tool_call_validity 2, outcome 1): record content "
        "(is EVALTRACE_CAPTURE_CONTENT=0?) or wrap the agent in evaltrace.collector.agent_run(...)",
    ]
    assert "did not apply" not in render_summary(make_report([], passed=False))  # no scorer ran: no table


def test_summary_gives_the_instrumentation_hint_for_traces_holding_nothing_of_the_agent() -> None:
    # The outcome scorer on a bare root span (an agent whose client nothing instrumented) and on a
    # trace recorded without content: the summary's fix follows what each trace lacked.
    empty = Trace(trace_id="a" * 32, status="success")
    no_content = empty.model_copy(update={"iterations": [Iteration(index=0, model="m")]})
    scorer = create_scorer("outcome", {})

    def summary(*traces: Trace) -> str:
        tally = ScorerTally()
        tally.add([score_result(scorer.score(trace)) for trace in traces])
        report = make_report([], passed=False).model_copy(update={"scorer_counts": tally.rows()})
        return next(line for line in render_summary(report).splitlines() if line.startswith("Warning:"))

    assert summary(empty) == f"Warning: 1 verdict met content that was not recorded (outcome 1): {UNINSTRUMENTED_HINT}"
    assert summary(no_content) == f"Warning: 1 verdict met content that was not recorded (outcome 1): {RECORD_HINT}"
    assert summary(empty, no_content).endswith(
        f"(outcome 2): {RECORD_HINT}; 1 of them on traces holding nothing of the agent's: {UNINSTRUMENTED_HINT}"
    )
