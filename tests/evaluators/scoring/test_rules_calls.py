from __future__ import annotations

from _rule_traces import call, iteration, schema, trace

from evaltrace.evaluators.scoring.scorers.registry import create_scorer


def test_tool_errors_counts_recorded_errors_and_error_results() -> None:
    calls = [call("a", result="ok"), call("b", error="HTTP 500"), call("c", result={"error": "not found"})]
    score = create_scorer("tool_errors").score(trace(*calls))
    assert score.passed is False and score.value == 1 / 3
    assert score.reason is not None
    assert "2 of 3 tool calls failed (max 0)" in score.reason
    assert "call #2 b: HTTP 500" in score.reason and "call #3 c: result error: 'not found'" in score.reason


def test_tool_errors_max_errors_and_error_results_switch() -> None:
    calls = [call("b", error="boom"), call("c", result={"error": "x"}), call("d", result={"error": None})]
    assert create_scorer("tool_errors", {"max_errors": 2}).score(trace(*calls)).passed is True
    score = create_scorer("tool_errors", {"error_results": False}).score(trace(*calls))
    assert score.details is not None and score.details["failures"] == ["call #1 b: boom"]


def test_tool_errors_unrecorded_result_is_not_a_failure_and_no_calls_is_not_applicable() -> None:
    assert create_scorer("tool_errors").score(trace(call("a", result=None))).passed is True
    assert create_scorer("tool_errors").score(trace()).passed is None


def test_efficiency_redundant_calls_compare_arguments_by_value() -> None:
    calls = [call("get", {"id": 1}), call("other"), call("get", {"id": 1.0}), call("get", {"id": 2})]
    score = create_scorer("tool_efficiency").score(trace(*calls))
    assert score.passed is False and score.value == 3 / 4
    assert score.reason is not None and "#3 repeats #1 get" in score.reason
    assert create_scorer("tool_efficiency", {"max_redundant": 1}).score(trace(*calls)).passed is True


def test_efficiency_reports_consecutive_repeats_as_loops() -> None:
    calls = [call("poll", {"job": 7})] * 3 + [call("done")]
    score = create_scorer("tool_efficiency", {"max_redundant": 5, "max_loop": 2}).score(trace(*calls))
    assert score.passed is False
    assert score.details is not None and score.details["loops"] == [[0, 3]]
    assert score.reason is not None and "loop: poll(job=7) 3 times in a row from #1" in score.reason
    assert create_scorer("tool_efficiency", {"max_redundant": 5, "max_loop": 3}).score(trace(*calls)).passed is True


def test_efficiency_retry_after_failure_is_not_redundant_unless_counted() -> None:
    calls = [call("fetch", {"u": "x"}, error="timeout"), call("fetch", {"u": "x"}, result="ok")]
    assert create_scorer("tool_efficiency").score(trace(*calls)).passed is True
    assert create_scorer("tool_efficiency", {"count_retries": True}).score(trace(*calls)).passed is False


def test_efficiency_never_flags_calls_whose_arguments_were_not_recorded_nor_passes_them() -> None:
    from evaltrace.collector.traces.records import ToolCall

    # Before: such calls passed as distinct (value 1.0), so a recording without content passed.
    unrecorded = [ToolCall(name="search", arguments=None), ToolCall(name="search", arguments=None)]
    default = create_scorer("tool_efficiency").score(trace(*unrecorded))
    assert default.passed is None and default.details is not None and default.details["redundant"] == []
    assert default.reason == (
        "Repeats cannot be ruled out: the arguments of call #1 search, call #2 search were not recorded; "
        "record content (is EVALTRACE_CAPTURE_CONTENT=0?) or wrap the agent in evaltrace.collector.agent_run(...)."
    )
    check = create_scorer("tool_efficiency").as_spec_check().score(trace(*unrecorded))
    assert (check.passed, check.reason) == (False, default.reason)
    # One call per tool cannot repeat: nothing is missing.
    single = [ToolCall(name="search", arguments=None), ToolCall(name="fetch", arguments=None)]
    assert create_scorer("tool_efficiency").as_spec_check().score(trace(*single)).passed is True
    # A repeat among the recorded calls still fails, whatever else is unknown.
    mixed = [call("f", {"a": 1}), call("f", {"a": 1}), ToolCall(name="f", arguments=None)]
    assert create_scorer("tool_efficiency").score(trace(*mixed)).passed is False


def test_no_tool_calls_passes_a_spec_check_and_does_not_apply_as_a_default() -> None:
    for name in ("tool_errors", "tool_efficiency", "tool_call_validity"):
        assert create_scorer(name).score(trace()).passed is None, name
        check = create_scorer(name).as_spec_check().score(trace())
        assert check.passed is True and check.reason is not None and "made no tool calls" in check.reason, name


def test_efficiency_not_applicable_without_calls_and_bool_is_not_int() -> None:
    assert create_scorer("tool_efficiency").score(trace()).passed is None
    assert create_scorer("tool_efficiency").score(trace(call("f", {"a": True}), call("f", {"a": 1}))).passed is True


def test_budget_limits() -> None:
    actual = trace(call("a"), call("b"), call("c"), iterations=[iteration(0), iteration(1)])
    assert create_scorer("budget", {"max_tool_calls": 3, "max_model_calls": 2, "max_steps": 5}).score(actual).passed
    score = create_scorer("budget", {"max_tool_calls": 2, "max_steps": 4}).score(actual)
    assert score.passed is False
    assert score.reason == "Over budget: tool calls: 3 > max 2; steps: 5 > max 4."
    assert create_scorer("budget").score(actual).passed is None


def test_name_reliability_flags_unoffered_calls_with_closest_name() -> None:
    offered = [schema("get_weather"), schema("search_flights")]
    score = create_scorer("tool_name_reliability").score(trace(call("get_wheather"), tool_schemas=offered))
    assert score.passed is False
    assert (
        score.reason is not None
        and "'get_wheather' was called but not offered (closest: 'get_weather')" in score.reason
    )


def test_name_reliability_grades_offered_names() -> None:
    offered = [
        schema("get_weather"),
        schema("summarize_with_llm"),
        schema("bad name!"),
        schema("getUserProfileDataFromTheRemoteServerNow"),
        schema("search"),
    ]
    score = create_scorer("tool_name_reliability").score(trace(tool_schemas=offered))
    assert score.value == 2 / 5 and score.passed is False
    assert score.details is not None
    problems = score.details["problems"]
    assert set(problems) == {"summarize_with_llm", "bad name!", "getUserProfileDataFromTheRemoteServerNow"}
    assert any("names its implementation" in p for p in problems["summarize_with_llm"])
    assert any("has 9 words" in p for p in problems["getUserProfileDataFromTheRemoteServerNow"])
    snake = create_scorer("tool_name_reliability", {"snake_case": True})
    assert "is not snake_case" in snake.score(trace(tool_schemas=[schema("getWeather")])).reason  # type: ignore[operator]


def test_name_reliability_not_applicable_without_tools() -> None:
    assert create_scorer("tool_name_reliability").score(trace()).passed is None


def test_description_reliability() -> None:
    good = schema(
        "get_weather",
        {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name"}},
            "required": ["city"],
        },
        "Current weather for a city, in Celsius.",
    )
    bad = schema(
        "lookup",
        {"type": "object", "properties": {"q": {"description": "query"}, "n": {"type": "integer"}}},
        "Lookup",
    )
    score = create_scorer("tool_description_reliability").score(trace(tool_schemas=[good, bad]))
    assert score.value == 0.5 and score.passed is False
    assert score.reason is not None
    assert "lookup: description shorter than 20 characters" in score.reason
    assert "parameters without a description: n" in score.reason
    assert "parameters without a type: q" in score.reason
    assert "get_weather" not in score.reason
    many = schema("f", {"properties": {k: {"type": "string", "description": k} for k in "abcd"}}, "x" * 30)
    reason = create_scorer("tool_description_reliability").score(trace(tool_schemas=[many])).reason
    assert reason is not None and "4 optional parameters (max 3)" in reason
    assert create_scorer("tool_description_reliability").score(trace()).passed is None
