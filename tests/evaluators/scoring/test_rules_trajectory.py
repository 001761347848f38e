from __future__ import annotations

from typing import Any

import pytest
from _rule_traces import call, load, trace

from evaltrace.collector.traces.records import ToolCall
from evaltrace.evaluators.scoring.scorers.registry import create_scorer
from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory


def traj(expected: list[dict[str, Any]] | None, mode: str = "in_order", **config: Any) -> Trajectory:
    scorer = create_scorer("trajectory", {"expected": expected, "mode": mode, **config})
    assert isinstance(scorer, Trajectory)
    return scorer


SEARCH_BOOK = [{"name": "search"}, {"name": "book"}]


@pytest.mark.parametrize(
    ("mode", "names", "passed", "value"),
    [
        ("strict", ["search", "book"], True, 1.0),
        ("strict", ["search", "book", "log"], False, 0.0),
        ("strict", ["book", "search"], False, 0.0),
        ("in_order", ["search", "log", "book"], True, 1.0),
        ("in_order", ["book", "search"], False, 0.5),
        ("in_order", ["search"], False, 0.5),
        ("any_order", ["book", "search"], True, 1.0),
        ("any_order", ["book", "search", "log"], False, 2 / 3),
        ("superset", ["log", "book", "search"], True, 1.0),
        ("superset", ["search"], False, 0.5),
        ("subset", ["search"], True, 1.0),
        ("subset", ["search", "log"], False, 0.5),
        ("precision", ["search", "log", "log", "book"], False, 0.5),
        ("recall", ["search", "log"], False, 0.5),
        ("recall", ["book", "log", "search"], True, 1.0),
    ],
)
def test_modes(mode: str, names: list[str], passed: bool, value: float) -> None:
    score = traj(SEARCH_BOOK, mode).score(trace(*[call(n) for n in names]))
    assert score.passed is passed
    assert score.value == pytest.approx(value)


def test_threshold_applies_to_graded_modes_only() -> None:
    actual = trace(call("search"), call("log"))
    assert traj(SEARCH_BOOK, "recall", threshold=0.5).score(actual).passed is True
    assert traj(SEARCH_BOOK, "superset", threshold=0.5).score(actual).passed is False


def test_repeated_names_matched_optimally_where_greedy_fails() -> None:
    # The first expectation accepts any `search`; greedy would give it the Paris call,
    # leaving the Paris expectation with only the Rome call.
    expected = [{"name": "search"}, {"name": "search", "arguments": {"city": "Paris"}}]
    actual = trace(call("search", {"city": "Paris"}), call("search", {"city": "Rome"}))
    score = traj(expected, "any_order").score(actual)
    assert score.passed is True and score.value == 1.0
    assert score.details is not None and score.details["matched"] == [[0, 1], [1, 0]]


def test_arguments_compared_with_numbers_by_value() -> None:
    expected = [{"name": "book", "arguments": {"nights": 1, "pets": False}}]
    assert traj(expected).score(trace(call("book", {"nights": 1.0, "pets": False}))).passed is True
    score = traj(expected).score(trace(call("book", {"nights": 1, "pets": 0})))
    assert score.passed is False
    assert score.reason is not None and "pets: expected False, got 0" in score.reason


def test_argument_mode_ignore_compares_names_only() -> None:
    expected = [{"name": "book", "arguments": {"city": "Paris"}}]
    actual = trace(call("book", {"city": "Rome"}))
    assert traj(expected, arguments={"mode": "ignore"}).score(actual).passed is True
    assert traj(expected, arguments={"per_tool": {"book": {"mode": "ignore"}}}).score(actual).passed is True


def test_reason_names_missing_extra_and_out_of_order_calls() -> None:
    expected = [{"name": "search"}, {"name": "book"}, {"name": "pay"}]
    reason = traj(expected, "strict").score(trace(call("book"), call("search"), call("email"))).reason
    assert reason is not None
    assert "missing pay(...)" in reason
    assert "out of order: search" in reason or "out of order: book" in reason
    assert "extra #3 email" in reason


def test_reason_says_extras_are_allowed_in_in_order_mode() -> None:
    score = traj(SEARCH_BOOK).score(trace(call("search"), call("log"), call("book")))
    assert score.reason is not None and "extra #2 log (allowed in this mode)" in score.reason


@pytest.mark.parametrize("mode", ["strict", "in_order", "any_order", "superset", "subset", "precision", "recall"])
def test_expected_empty_and_actual_empty_passes(mode: str) -> None:
    score = traj([], mode).score(trace())
    assert score.passed is True and score.value == 1.0


@pytest.mark.parametrize("mode", ["strict", "any_order", "subset", "precision", "in_order", "superset", "recall"])
def test_expected_empty_and_actual_not_empty(mode: str) -> None:
    # `tool_calls: []` means "no tool calls" in every mode. Before, in_order, superset and recall
    # passed (extra calls allowed), so the expectation forbade nothing unless `trajectory: strict`.
    score = traj([], mode).score(trace(call("delete_all"), call("log")))
    assert (score.passed, score.value) == (False, 0.0)
    assert score.reason == f"Failed ({mode}): no tool calls were expected, but 2 were made: #1 delete_all, #2 log."
    assert traj([], mode).score(trace()).passed is True


def test_empty_expectation_in_a_spec_fails_on_any_call_whatever_the_trajectory_mode() -> None:
    for mode in ("in_order", "superset", "recall"):
        loaded = load(f"cases: [{{id: a, input: q, expect: {{tool_calls: [], trajectory: {mode}}}}}]")
        (scorer,) = loaded.case_scorers["a"][0]
        assert scorer.spec_check and scorer.score(trace(call("delete_all"))).passed is False


def test_expected_call_against_unrecorded_arguments_says_they_were_not_recorded() -> None:
    blind = trace(ToolCall(name="get_weather", arguments=None))
    score = traj([{"name": "get_weather", "arguments": {"city": "Paris"}}], "strict").score(blind)
    assert score.passed is False and score.reason is not None and score.details is not None
    assert score.reason.endswith(
        "The arguments of call #1 get_weather were not recorded; record content (is EVALTRACE_CAPTURE_CONTENT=0?) "
        "or wrap the agent in evaltrace.collector.agent_run(...)."
    )
    assert score.details["unrecorded"] is True


def test_calls_expected_but_none_made() -> None:
    for mode in ("strict", "in_order", "any_order", "superset", "precision", "recall"):
        score = traj(SEARCH_BOOK, mode).score(trace())
        assert score.passed is False, mode
        assert score.value == 0.0, mode
    assert traj(SEARCH_BOOK, "subset").score(trace()).passed is True


def test_not_applicable_without_expectations() -> None:
    score = traj(None).score(trace(call("x")))
    assert score.passed is None and score.reason == "No expected tool calls are configured."


def test_nested_calls_only_with_nested() -> None:
    child = trace(call("inner"))
    actual = trace(call("delegate", child=child))
    assert traj([{"name": "delegate"}, {"name": "inner"}], "strict").score(actual).passed is False
    assert traj([{"name": "delegate"}, {"name": "inner"}], "strict", nested=True).score(actual).passed is True


def test_invalid_mode_is_a_config_error() -> None:
    from evaltrace.collector.errors import InputError

    with pytest.raises(InputError, match="mode"):
        create_scorer("trajectory", {"expected": [], "mode": "fuzzy"}, where="spec.yaml: case a")


def test_out_of_order_reason_points_at_step_and_call() -> None:
    score = traj(SEARCH_BOOK).score(trace(call("book"), call("search")))
    assert score.reason == "Failed (in_order, score 0.50): out of order: search (expected step 1, made as call #2)."
