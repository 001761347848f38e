from __future__ import annotations

import time
from typing import Any

import pytest
from _rule_traces import call, iteration, load, trace

from evaltrace.collector.errors import InputError
from evaltrace.collector.traces.records import ToolCall
from evaltrace.evaluators.errors import SpecError
from evaltrace.evaluators.scoring.scorers.output import strip_code_fence as _strip_code_fence
from evaltrace.evaluators.scoring.scorers.registry import create_scorer


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


@pytest.mark.parametrize(
    "config",
    [
        {"contains": "x"},
        {"not_contains": "error"},
        {"regex": "x"},
        {"equals": "x"},
        {"json_schema": {"type": "object"}},
    ],
)
def test_every_output_check_fails_when_no_answer_was_recorded(config: dict[str, Any]) -> None:
    # Before: "does not apply", so a spec's `output` check passed on a trace recorded without
    # content. not_contains fails too: an answer nobody saw cannot be shown to avoid a word.
    for scorer in (output(**config), output(**config).as_spec_check()):
        missing = scorer.score(trace(output=None, input="hi"))
        assert (missing.passed, missing.value) == (False, 0.0)
        assert missing.reason == (
            "No answer was recorded: the trace has no output; record content (is EVALTRACE_CAPTURE_CONTENT=0?) "
            "or wrap the agent in evaltrace.collector.agent_run(...); the output check failed."
        )
    blank = output(**config).score(trace(output=None))
    assert blank.reason is not None and blank.reason.startswith(
        "No answer was recorded: the trace has no input and no output;"
    )


def test_output_without_answer_after_a_crash_names_the_error() -> None:
    crashed = output(contains="x").score(trace(output=None, status="error", error="ValueError: boom"))
    assert crashed.passed is False and crashed.reason is not None and "ValueError: boom" in crashed.reason


def test_output_with_no_check_does_not_apply_by_default_and_is_a_spec_error() -> None:
    assert output().score(trace(output="x")).passed is None
    with pytest.raises(
        SpecError, match=r"expect.output: scorer 'output': no output check is configured: give contains"
    ):
        load("cases: [{id: a, input: q, expect: {output: {case_sensitive: true}}}]")
    with pytest.raises(SpecError, match=r"scorers\[0\]: scorer 'output': no output check is configured"):
        load("scorers: [output]\ncases: [{id: a, input: q}]")


def test_fence_stripper_is_linear_on_hostile_answers() -> None:
    # Issue 14: the old regex took 7.6 s on 3,000 newlines (cubic backtracking). Many newlines
    # inside and around an unclosed or closed fence now take one pass each.
    js = {"type": "object"}
    hostile = "```json\n" + "\n" * 200_000 + "x"
    started = time.perf_counter()
    score = output(json_schema=js).score(trace(output=hostile))
    elapsed = time.perf_counter() - started
    assert score.passed is False and score.reason is not None and "answer is not JSON" in score.reason
    closed = "```\n" + "\n" * 200_000 + '{"a": 1}' + "\n" * 200_000 + "```"
    assert output(json_schema=js).score(trace(output=closed)).passed is True
    assert elapsed < 1.0, f"200,000 newlines took {elapsed:.2f} s"


@pytest.mark.parametrize(
    ("text", "inner"),
    [
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('  ```\n{"a": 1}\n  ```  ', '{"a": 1}'),
        ('```json  \n{"a": 1}\n\n```', '{"a": 1}\n'),
        ('```python\n{"a": 1}\n```', None),
        ('```json {"a": 1}```', None),
        ("```\n```", None),
        ('{"a": 1}', None),
    ],
)
def test_fence_stripper_keeps_what_the_fence_wraps(text: str, inner: str | None) -> None:
    assert _strip_code_fence(text) == (text if inner is None else inner)


def test_output_falls_back_to_last_model_reply() -> None:
    from evaltrace.collector.traces.records import Message, MessagePart

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


def test_steps_regex_on_name_arguments_and_result() -> None:
    actual = trace(
        call("get_weather", {"city": "Paris"}, result="18°C and sunny"), call("log", {"level": "info"}, result="ok")
    )
    assert steps(regex="^get_").score(actual).passed is True  # a bare pattern reads the name
    matched = steps(regex=[{"name": "weather", "arguments": '"city": "Par', "result": r"\d+°C"}]).score(actual)
    assert matched.passed is True and matched.reason == "All 1 step checks passed."
    # Every pattern of an item must match the same call: the name of one and the result of another do not.
    score = steps(regex=[{"name": "^log$", "result": r"\d+°C"}, "^delete"]).score(actual)
    assert score.passed is False and score.value == 0.0
    assert (
        score.reason == "no step matches regex {name~'^log$', result~'\\d+°C'}; no step matches regex {name~'^delete'}."
    )


def test_steps_regex_reads_structured_results_as_json_text() -> None:
    actual = trace(call("lookup", {"ids": [1, 2]}, result={"temp": 18, "unit": "C"}))
    assert steps(regex=[{"result": '"temp": 18'}, {"arguments": r"\[1, 2\]"}]).score(actual).passed is True


def test_steps_regex_on_unrecorded_arguments_or_result_fails_and_says_so() -> None:
    blind = trace(ToolCall(name="get_weather", arguments=None, result=None))
    score = steps(regex=[{"name": "get_weather", "result": "18"}]).score(blind)
    assert score.passed is False and score.reason is not None
    assert (
        "no step matches regex {name~'get_weather', result~'18'} (the result of some calls were not recorded)"
        in score.reason
    )
    assert "EVALTRACE_CAPTURE_CONTENT" in score.reason and score.details is not None and score.details["unrecorded"]


def test_invalid_steps_regex_is_a_spec_error_naming_the_pattern() -> None:
    text = "cases: [{id: a, input: q, expect: {steps: {regex: [{name: ok, result: '(unclosed'}]}}}]"
    with pytest.raises(SpecError) as info:
        load(text)
    message = str(info.value)
    assert message.startswith("spec.yaml: case 'a': expect.steps: scorer 'steps': regex.0.result:")
    assert "invalid regular expression '(unclosed'" in message
    with pytest.raises(SpecError, match="a steps regex needs name, arguments or result"):
        load("cases: [{id: a, input: q, expect: {steps: {regex: [{}]}}}]")


def test_steps_that_need_unrecorded_arguments_fail() -> None:
    # Content capture off: the calls are there, their arguments are not.
    blind = trace(ToolCall(name="search", arguments=None), ToolCall(name="delete_file", arguments=None))
    required = steps(contains=[{"name": "search", "arguments": {"q": "a"}}]).score(blind)
    assert required.passed is False and required.reason is not None
    assert required.reason.startswith("no call search(q='a') (the arguments of call #1 search were not recorded).")
    assert "EVALTRACE_CAPTURE_CONTENT" in required.reason
    forbidden = steps(not_contains=[{"name": "delete_file", "arguments": {"path": "/"}}]).score(blind)
    assert forbidden.passed is False and forbidden.reason is not None
    assert forbidden.reason.startswith(
        "cannot rule out forbidden call delete_file(path='/'): the arguments of call #2 delete_file were not recorded."
    )
    # By name alone nothing is missing: names are recorded without content.
    assert steps(contains=["search"], not_contains=["rm"]).score(blind).passed is True


FAILED_MODEL_CALL = iteration(0).model_copy(update={"error": "429"})
CUT_SHORT = iteration(0).model_copy(update={"finish_reasons": ["length"], "stop_reason": "length"})
# Gemini's and Anthropic's words for a filtered or length-cut reply, as the converter normalises them.
FILTERED = iteration(0).model_copy(update={"finish_reasons": ["SAFETY"], "stop_reason": "content_filter"})
MAX_TOKENS = iteration(0).model_copy(update={"finish_reasons": ["max_tokens"], "stop_reason": "length"})


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
        ({"output": "done", "iterations": [FILTERED]}, "failure"),
        ({"output": "done", "iterations": [MAX_TOKENS]}, "failure"),
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


@pytest.mark.parametrize("spec_check", [False, True])
def test_outcome_without_a_recorded_answer_is_unknown_and_fails(spec_check: bool) -> None:
    # Before: a run recorded without content was a "success". Nothing shows it succeeded now.
    for expected in ("success", "failure", "error", "timeout"):
        scorer = create_scorer("outcome", {"expected": expected})
        score = (scorer.as_spec_check() if spec_check else scorer).score(trace(call("f", arguments=None)))
        assert score.passed is False and score.details == {"outcome": "unknown", "unrecorded": True}
        assert score.reason == (
            f"Outcome unknown (expected {expected}): the run returned but no answer was recorded: the trace has "
            "no input and no output; record content (is EVALTRACE_CAPTURE_CONTENT=0?) or wrap the agent in "
            "evaltrace.collector.agent_run(...)."
        )


def test_outcome_reason_and_default() -> None:
    score = create_scorer("outcome").score(trace(call("f", error="HTTP 500"), output="x"))
    assert score.reason == (
        "Outcome failure (expected success): the run returned but its only tool call failed (f: HTTP 500)."
    )
    with pytest.raises(InputError, match="expected"):
        create_scorer("outcome", {"expected": "partial"})
