from __future__ import annotations

from typing import Any

import pytest
from _rule_traces import call, iteration, trace

from evaltrace.evaluators.errors import InputError
from evaltrace.evaluators.registry import create_scorer


def output(**config: Any) -> Any:
    return create_scorer("output", config)


def test_contains_not_contains_regex_equals() -> None:
    answer = trace(output="It is 18°C in Paris today.")
    assert output(contains=["18", "Paris"], not_contains="error", regex=r"\d+°C").score(answer).passed is True
    score = output(contains=["18", "Rome"], not_contains=["Paris"], regex=[r"^\d"]).score(answer)
    assert score.passed is False
    assert score.reason == "missing 'Rome'; contains forbidden 'Paris'; no match for regex '^\\d'."
    assert score.value == pytest.approx(1 / 4)


def test_case_sensitivity_option() -> None:
    answer = trace(output="PARIS is sunny")
    assert output(contains="paris").score(answer).passed is False
    assert output(contains="paris", case_sensitive=False).score(answer).passed is True
    assert output(regex="^paris", case_sensitive=False).score(answer).passed is True
    assert output(not_contains="Sunny", case_sensitive=False).score(answer).passed is False


def test_equals_normalises_whitespace_and_optionally_case() -> None:
    answer = trace(output="  Hello,\n  world ")
    assert output(equals="Hello, world").score(answer).passed is True
    assert output(equals="hello, world").score(answer).passed is False
    assert output(equals="hello, world", case_sensitive=False).score(answer).passed is True


def test_json_schema_on_parsed_answer() -> None:
    js = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}
    assert output(json_schema=js).score(trace(output='{"temp": 18}')).passed is True
    assert output(json_schema=js).score(trace(output='```json\n{"temp": 18.5}\n```')).passed is True
    score = output(json_schema=js).score(trace(output='{"temp": "hot"}'))
    assert score.passed is False and score.reason == "JSON schema: temp: 'hot' is not of type 'number'."
    not_json = output(json_schema=js).score(trace(output="It is 18"))
    assert not_json.passed is False and not_json.reason is not None and "answer is not JSON" in not_json.reason


def test_invalid_regex_is_a_construction_error_naming_the_pattern() -> None:
    with pytest.raises(InputError) as info:
        create_scorer("output", {"regex": ["ok", "(unclosed"]}, where="spec.yaml: case paris: expect.output")
    message = str(info.value)
    assert message.startswith("spec.yaml: case paris: expect.output: scorer 'output': regex")
    assert "invalid regular expression '(unclosed'" in message


def test_invalid_json_schema_is_a_construction_error() -> None:
    with pytest.raises(InputError, match=r"json_schema: .*json_schema is not a valid JSON schema"):
        create_scorer("output", {"json_schema": {"type": 12}})


def test_output_not_applicable_or_failed_without_answer() -> None:
    assert output().score(trace(output="x")).passed is None
    missing = output(contains="x").score(trace(output=None))
    assert missing.passed is None and missing.reason is not None and "content capture" in missing.reason
    crashed = output(contains="x").score(trace(output=None, status="error", error="ValueError: boom"))
    assert crashed.passed is False and crashed.reason is not None and "ValueError: boom" in crashed.reason


def test_output_falls_back_to_last_model_reply() -> None:
    from evaltrace.collector.records import Message, MessagePart

    it = iteration(0)
    it = it.model_copy(
        update={"output_messages": [Message(role="assistant", parts=[MessagePart(type="text", text="18C")])]}
    )
    assert output(contains="18").score(trace(iterations=[it])).passed is True


def steps(**config: Any) -> Any:
    return create_scorer("steps", config)


def test_steps_contains_with_argument_subset() -> None:
    actual = trace(call("search", {"q": "H214E/1", "limit": 5}), call("delete_file", {"path": "/tmp"}))
    assert steps(contains=[{"name": "search", "arguments": {"q": "H214E/1"}}]).score(actual).passed is True
    assert steps(contains=[{"name": "search", "input": {"q": "H214E/1"}}]).score(actual).passed is True
    assert steps(contains=[{"name": "search", "input": {"q": "nope"}}]).score(actual).passed is False
    score = steps(contains=[{"name": "search", "arguments": {"q": "other"}}, "analyze"]).score(actual)
    assert score.passed is False
    assert score.reason == "no call search(q='other'); no call analyze(...)."


def test_steps_each_contains_item_needs_its_own_call() -> None:
    actual = trace(call("search", {"q": "a"}))
    score = steps(contains=[{"name": "search"}, {"name": "search", "arguments": {"q": "a"}}]).score(actual)
    assert score.passed is False and score.value == 0.5


def test_steps_not_contains_by_name_or_arguments() -> None:
    actual = trace(call("search", {"q": "a"}), call("delete_file", {"path": "/tmp"}))
    score = steps(not_contains=["delete_file"]).score(actual)
    assert score.passed is False and score.reason == "forbidden call delete_file(...) made (#2)."
    assert steps(not_contains=[{"name": "delete_file", "arguments": {"path": "/"}}]).score(actual).passed is True
    assert steps(not_contains=[{"name": "search_external"}]).score(actual).passed is True
    assert steps().score(actual).passed is None


FAILED_MODEL_CALL = iteration(0).model_copy(update={"error": "429"})
CUT_SHORT = iteration(0).model_copy(update={"finish_reasons": ["length"]})


@pytest.mark.parametrize(
    ("fields", "outcome"),
    [
        ({"status": "success", "output": "done"}, "success"),
        ({"status": "unknown", "output": "done"}, "success"),
        ({"status": "timeout"}, "timeout"),
        ({"status": "error", "error": "RuntimeError: x"}, "error"),
        ({"status": "unknown", "error": "RuntimeError: x"}, "error"),
        ({"output": "done", "calls": [call("f", error="500")]}, "failure"),
        ({"output": "done", "calls": [call("f", error="500"), call("f", result="ok")]}, "success"),
        ({"output": "done", "iterations": [FAILED_MODEL_CALL]}, "failure"),
        ({"output": "done", "iterations": [FAILED_MODEL_CALL, iteration(1)]}, "success"),
        ({"output": "done", "iterations": [CUT_SHORT]}, "failure"),
        ({"status": "success", "output": "  "}, "failure"),
    ],
)
def test_outcome_classification(fields: dict[str, Any], outcome: str) -> None:
    fields = dict(fields)
    actual = trace(*fields.pop("calls", []), **fields)
    for expected in ("success", "failure", "error", "timeout"):
        score = create_scorer("outcome", {"expected": expected}).score(actual)
        assert score.passed is (expected == outcome)
        assert score.details == {"outcome": outcome}


def test_outcome_reason_and_default() -> None:
    score = create_scorer("outcome").score(trace(call("f", error="HTTP 500"), output="x"))
    assert score.reason == (
        "Outcome failure (expected success): the run returned but its only tool call failed (f: HTTP 500)."
    )
    with pytest.raises(InputError, match="expected"):
        create_scorer("outcome", {"expected": "partial"})
