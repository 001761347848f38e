from __future__ import annotations

from typing import Any

import pytest
from _rule_traces import call, schema, trace

from evaltrace.collector.errors import InputError
from evaltrace.collector.traces.records import ToolCall
from evaltrace.evaluators.scoring.scorers.registry import create_scorer

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["C", "F"]},
        "days": {"type": "integer"},
    },
    "required": ["city"],
}
OFFERED = [schema("get_weather", WEATHER), schema("search", None)]


def validity(**config: Any) -> Any:
    return create_scorer("tool_call_validity", config)


def test_valid_calls_pass() -> None:
    score = validity().score(trace(call("get_weather", {"city": "Paris", "unit": "C"}), tool_schemas=OFFERED))
    assert score.passed is True and score.value == 1.0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"unit": "C"}, "(arguments): 'city' is a required property"),
        ({"city": 3}, "city: 3 is not of type 'string'"),
        ({"city": "Paris", "unit": "K"}, "unit: 'K' is not one of ['C', 'F']"),
        ({"city": "Paris", "days": 2.5}, "days: 2.5 is not of type 'integer'"),
    ],
)
def test_schema_violations_are_named(arguments: dict[str, Any], message: str) -> None:
    score = validity().score(trace(call("get_weather", arguments), tool_schemas=OFFERED))
    assert score.passed is False and score.value == 0.0
    assert score.reason is not None and f"call #1 get_weather: {message}" in score.reason


def test_value_is_the_fraction_of_valid_calls() -> None:
    calls = [call("get_weather", {"city": "Paris"}), call("get_weather", {}), call("get_weather", {"city": "Oslo"})]
    score = validity().score(trace(*calls, tool_schemas=OFFERED))
    assert score.value == pytest.approx(2 / 3)
    assert score.reason is not None and score.reason.startswith("1 of 3 calls invalid")


def test_a_call_of_an_offered_tool_with_no_recorded_schema_is_not_checked() -> None:
    # `search` was offered with no parameters recorded: nothing says its arguments are valid.
    calls = [call("get_weather", {"city": "Paris"}), call("get_weather", {}), call("search", {"q": 1})]
    score = validity().score(trace(*calls, tool_schemas=OFFERED))
    assert score.value == pytest.approx(1 / 2) and score.details is not None
    assert (score.details["checked"], score.details["skipped"]) == (2, 1)
    assert score.reason is not None and score.reason.startswith("1 of 2 calls invalid")


def test_calls_with_no_schema_and_no_arguments_are_no_evidence() -> None:
    # Before: "All 2 checked calls match their tool schemas" (a pass) for calls nothing was known about.
    offered = [schema("get_weather", None), schema("search", None)]
    actual = trace(ToolCall(name="get_weather"), ToolCall(name="search"), tool_schemas=offered)
    default = validity().score(actual)
    assert default.passed is None and default.reason is not None
    assert default.reason.startswith("No schema is known for any called tool (get_weather, search)")
    assert "checked calls match" not in default.reason
    check = validity().as_spec_check().score(actual)
    assert (check.passed, check.value) == (False, 0.0) and "checked calls match" not in (check.reason or "")
    # A call of a tool that was not offered is still a finding, schema or not.
    stray = validity().score(trace(ToolCall(name="get_wether"), tool_schemas=offered))
    assert stray.passed is False and "tool was not offered (did you mean 'get_weather'?)" in (stray.reason or "")


def test_strict_rejects_undeclared_parameters() -> None:
    actual = trace(call("get_weather", {"city": "Paris", "country": "FR"}), tool_schemas=OFFERED)
    assert validity().score(actual).passed is True
    score = validity(strict=True).score(actual)
    assert score.passed is False and score.reason is not None and "country: unexpected parameter" in score.reason


def test_additional_properties_false_in_schema_is_enforced_without_strict() -> None:
    closed = {**WEATHER, "additionalProperties": False}
    score = validity().score(
        trace(call("get_weather", {"city": "P", "x": 1}), tool_schemas=[schema("get_weather", closed)])
    )
    assert score.passed is False


def test_unknown_tool_reports_closest_offered_name() -> None:
    score = validity().score(trace(call("get_wether", {"city": "Paris"}), tool_schemas=OFFERED))
    assert score.passed is False
    assert (
        score.reason is not None
        and "call #1 get_wether: tool was not offered (did you mean 'get_weather'?)" in score.reason
    )


def test_truncated_and_raw_arguments_are_invalid_with_a_clear_reason() -> None:
    truncated = call("get_weather", '{"city": "Par', arguments_truncated=True)
    raw = call("get_weather", "city=Paris")
    score = validity().score(trace(truncated, raw, tool_schemas=OFFERED))
    assert score.value == 0.0
    assert score.reason is not None
    assert "call #1 get_weather: arguments are not a JSON object (truncated" in score.reason
    assert "call #2 get_weather: arguments are not a JSON object (got str" in score.reason


HINT = "record content (is EVALTRACE_CAPTURE_CONTENT=0?) or wrap the agent in evaltrace.collector.agent_run(...)"


def test_without_any_schema_a_default_does_not_apply_and_a_spec_check_fails() -> None:
    actual = trace(call("get_weather", {"city": "Paris"}))
    score = validity().score(actual)
    assert score.passed is None
    assert score.reason == f"No tool schemas were recorded in the trace or given in `schemas`; {HINT}."
    assert validity().as_spec_check().score(actual).passed is False


def test_when_no_called_tool_has_a_schema_a_default_does_not_apply_and_a_spec_check_fails() -> None:
    scorer = validity(schemas={"other": {"type": "object"}})
    score = scorer.score(trace(call("search", {"q": "x"})))
    assert score.passed is None and score.reason == (
        f"No schema is known for any called tool (search), or their arguments were not recorded; {HINT}."
    )
    assert scorer.as_spec_check().score(trace(call("search", {"q": "x"}))).passed is False


def test_a_spec_check_fails_when_some_calls_could_not_be_validated() -> None:
    calls = [call("get_weather", {"city": "Paris"}), ToolCall(name="get_weather", arguments=None)]
    actual = trace(*calls, tool_schemas=[schema("get_weather", WEATHER)])
    default = validity().score(actual)
    assert default.passed is True and default.reason is not None and "1 call(s) not checked" in default.reason
    check = validity().as_spec_check().score(actual)
    assert (
        check.passed is False
        and check.reason is not None
        and f"A spec check must see every call: {HINT}" in check.reason
    )


def test_config_schemas_validate_without_recorded_schemas() -> None:
    score = validity(schemas={"get_weather": WEATHER}).score(trace(call("get_weather", {"city": 1})))
    assert score.passed is False


def test_invalid_config_schema_is_a_construction_error_naming_the_tool() -> None:
    with pytest.raises(InputError, match=r"spec.yaml: case c: scorer 'tool_call_validity': .*schema of tool 'f'"):
        create_scorer("tool_call_validity", {"schemas": {"f": {"type": "nope"}}}, where="spec.yaml: case c")


def test_broken_recorded_schema_is_skipped_not_blamed_on_the_agent() -> None:
    broken = [schema("f", {"type": "nope"})]
    score = validity().score(trace(call("f", {"a": 1}), tool_schemas=broken))
    assert score.passed is None


def correctness(mode: str, expected: list[dict[str, Any]] | None, **config: Any) -> Any:
    return create_scorer("tool_correctness", {"mode": mode, "expected": expected, **config})


def test_correctness_names_is_multiset_f1() -> None:
    expected = [{"name": "search"}, {"name": "search"}, {"name": "book"}]
    score = correctness("names", expected).score(trace(call("search"), call("book"), call("log")))
    # common 2, precision 2/3, recall 2/3 -> F1 2/3
    assert score.value == pytest.approx(2 / 3) and score.passed is False
    assert score.reason is not None and "missing: search" in score.reason and "unexpected: log" in score.reason
    assert correctness("names", expected, threshold=0.6).score(trace(call("search"), call("book"), call("log"))).passed


def test_correctness_order_uses_lcs() -> None:
    expected = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
    assert correctness("order", expected).score(trace(call("a"), call("b"), call("c"))).value == 1.0
    score = correctness("order", expected).score(trace(call("c"), call("b"), call("a")))
    assert score.value == pytest.approx(1 / 3)
    assert score.reason is not None and "order differs" in score.reason
    assert correctness("names", expected).score(trace(call("c"), call("b"), call("a"))).value == 1.0


def test_correctness_arguments_mode_uses_the_matcher() -> None:
    expected = [{"name": "book", "arguments": {"nights": 2}}]
    assert correctness("arguments", expected).score(trace(call("book", {"nights": 2.0, "x": 1}))).value == 1.0
    score = correctness("arguments", expected).score(trace(call("book", {"nights": 3})))
    assert score.value == 0.0 and score.reason is not None and "different arguments" in score.reason
    assert correctness("arguments", expected, arguments={"mode": "ignore"}).score(trace(call("book", {}))).passed


def test_correctness_empty_sides() -> None:
    assert correctness("names", []).score(trace()).value == 1.0
    assert correctness("names", []).score(trace(call("a"))).value == 0.0
    assert correctness("names", None).score(trace(call("a"))).passed is None


def test_calls_without_recorded_arguments_are_skipped_and_reported() -> None:
    from evaltrace.collector.traces.records import ToolCall

    actual = trace(
        call("get_weather", {"city": "Paris"}), ToolCall(name="get_weather", arguments=None), tool_schemas=OFFERED
    )
    score = validity().score(actual)
    assert score.passed is True and score.details is not None and score.details["skipped"] == 1
    assert score.reason == (
        "All 1 checked calls match their tool schemas. 1 call(s) not checked (no schema, or arguments not recorded)."
    )


# Patterns of recorded schemas are untrusted: they run on RE2, whose time is linear in the input.
EVIL = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^(a+)+$"}}, "required": ["name"]}


def test_a_catastrophic_pattern_scores_in_well_under_a_second() -> None:
    import time

    # With Python's backtracking `re` this argument took 8 s, and each 2 more characters 4x longer.
    bad = trace(call("lookup", {"name": "a" * 28 + "!"}), tool_schemas=[schema("lookup", EVIL)])
    started = time.perf_counter()
    score = validity().score(bad)
    assert time.perf_counter() - started < 0.5
    assert score.passed is False and score.reason is not None
    assert "call #1 lookup: name: 'aaaaaaaaaaaaaaaaaaaaaaaaaaaa!' does not match '^(a+)+$'" in score.reason
    good = trace(call("lookup", {"name": "a" * 5000}), tool_schemas=[schema("lookup", EVIL)])
    assert validity().score(good).passed is True


def test_pattern_properties_and_additional_properties_run_on_re2() -> None:
    tags = {
        "type": "object",
        "patternProperties": {"^x-[a-z]+$": {"type": "string"}, "^(b+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    offered = [schema("tag", tags)]
    assert validity().score(trace(call("tag", {"x-one": "v", "bbb": 3}), tool_schemas=offered)).passed is True
    wrong_type = validity().score(trace(call("tag", {"x-one": 1}), tool_schemas=offered))
    assert wrong_type.reason is not None and "x-one: 1 is not of type 'string'" in wrong_type.reason
    extra = validity().score(trace(call("tag", {"other": "v", "b" * 40 + "!": 1}), tool_schemas=offered))
    assert extra.passed is False and extra.reason is not None
    assert "do not match any of the regexes: '^(b+)+$', '^x-[a-z]+$'" in extra.reason


def test_ecma_unicode_escapes_in_patterns_are_understood() -> None:
    accented = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^\\u00e9+$"}}}
    offered = [schema("t", accented)]
    assert validity().score(trace(call("t", {"s": "éé"}), tool_schemas=offered)).passed is True
    assert validity().score(trace(call("t", {"s": "e"}), tool_schemas=offered)).passed is False


def test_recorded_patterns_re2_cannot_run_are_skipped_with_a_note() -> None:
    backref = {
        "type": "object",
        "properties": {"twice": {"type": "string", "pattern": "^(a)\\1$"}, "n": {"type": "integer"}},
    }
    offered = [schema("t", backref)]
    score = validity().score(trace(call("t", {"twice": "xyz", "n": 1}), tool_schemas=offered))
    assert score.passed is True  # the rest of the schema is still checked ...
    assert score.reason is not None and "Not checked: tool 't': pattern '^(a)\\\\1$' not checked" in score.reason
    assert "invalid escape sequence" in score.reason
    assert score.details is not None and len(score.details["unchecked"]) == 1
    failing = validity().score(trace(call("t", {"twice": "aa", "n": "one"}), tool_schemas=offered))
    assert failing.passed is False  # ... and its violations are still found
    assert failing.reason is not None and "n: 'one' is not of type 'integer'" in failing.reason
    lookahead = {"type": "object", "patternProperties": {"^(?!x)": {"type": "string"}}, "additionalProperties": False}
    unsure = validity().score(trace(call("t", {"y": 1}), tool_schemas=[schema("t", lookahead)]))
    # The property might match the pattern that was not run: neither its type nor its presence is blamed.
    assert unsure.passed is True and unsure.reason is not None and "'^(?!x)' not checked" in unsure.reason


def test_config_schema_with_a_pattern_re2_cannot_run_is_a_construction_error() -> None:
    backref = {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a)\\1"}}}
    with pytest.raises(InputError, match=r"schema of tool 'lookup': pattern '\(a\)\\\\1' not checked .*lookaround"):
        validity(schemas={"lookup": backref})
