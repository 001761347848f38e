from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from _rule_traces import call, trace

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.scoring.scorers._text import key_terms, mentions, numbers
from evaltrace.evaluators.scoring.scorers.registry import create_scorer

PRICE_ALIASES = ["price", "$", "USD", "cost"]


@pytest.mark.parametrize(
    "text",
    [
        "Our profit margin grew this quarter.",
        "The painting is priceless.",
        "What a surprise!",
        "The appraisal is done.",
        "Costume party tonight.",
        "a$b",
        "price_list attached",
    ],
)
def test_price_aliases_do_not_match_inside_other_words(text: str) -> None:
    assert not mentions(text, PRICE_ALIASES)


@pytest.mark.parametrize("text", ["Price: 20", "It is $199.", "199 USD", "the cost is low", "PRICE dropped", "(USD)"])
def test_price_aliases_match_whole_words_and_symbols(text: str) -> None:
    assert mentions(text, PRICE_ALIASES)


def test_margin_and_multi_word_aliases() -> None:
    assert not mentions("marginal gains", ["margin"])
    assert mentions("the profit margin is 12%", ["margin"])
    assert mentions("profit\n  margin: 12%", ["profit margin"])
    assert not mentions("profit margins", ["profit margin"])
    assert not mentions("anything", ["  "])


def test_numbers_by_value() -> None:
    assert numbers("1,234.50 and -3 and 2024-05-01 and H214E/1 and v2") == [1234.5, -3.0, 2024.0, 5.0, 1.0, 1.0]
    assert key_terms("The temperature in Paris is 18 degrees, and the price is 1,200.") == [
        "temperature",
        "Paris",
        "18",
        "degrees",
        "price",
        "1,200",
    ]


def answer(name: str, **config: Any) -> Any:
    return create_scorer(name, config)


def test_completeness_profit_margin_does_not_count_as_price() -> None:
    config = {"fields": ["price", "rating"], "aliases": {"price": PRICE_ALIASES, "rating": ["stars"]}}
    wrong = answer("completeness", **config).score(trace(output="The profit margin is great, 4 stars."))
    assert wrong.value == 0.5 and wrong.passed is False
    assert wrong.reason == "1 of 2 fields found; missing: price."
    right = answer("completeness", **config).score(trace(output="Sony XM5 at $348, rated 4.7 stars."))
    assert right.value == 1.0 and right.passed is True


def test_completeness_defaults_to_facts_and_is_not_applicable_without_any() -> None:
    assert answer("completeness", facts=["Paris"]).score(trace(output="In Paris.")).value == 1.0
    assert answer("completeness").score(trace(output="x")).passed is None


def test_correctness_partial_credit_numbers_by_value_extras_not_penalised() -> None:
    scorer = answer("correctness", facts=["18", "Paris", "sunny"], threshold=0.6)
    score = scorer.score(trace(output="Paris: 18.0 degrees and cloudy, with lots of extra detail."))
    assert score.value == pytest.approx(2 / 3) and score.passed is True
    assert score.reason == "2 of 3 expected facts found; missing: sunny."
    assert answer("correctness", facts=["18"]).score(trace(output="about 180 degrees")).value == 0.0


def test_correctness_from_expected_answer_or_case() -> None:
    actual = trace(output="It is 18 degrees in Paris.")
    assert answer("correctness", expected="Paris: 18 degrees").score(actual).value == 1.0
    case = SimpleNamespace(expected_output="Rome is 25 degrees")
    score = answer("correctness").score(actual, case)
    assert score.value == pytest.approx(1 / 3) and score.details == {"missing": ["Rome", "25"]}
    assert answer("correctness").score(actual).passed is None


def test_groundedness_requires_a_tool_call_by_default() -> None:
    score = answer("groundedness").score(trace(output="Paris is 18 degrees."))
    assert score.passed is False and score.value == 0.0
    assert score.reason == "The agent answered without calling any tool."
    assert answer("groundedness", require_tool_call=False).score(trace(output="Hello there!")).passed is True


def test_groundedness_numbers_must_appear_in_sources() -> None:
    weather = call("get_weather", {"city": "Paris"}, result={"temp_c": 18.0, "humidity": 71})
    grounded = answer("groundedness").score(trace(weather, input="Weather in Paris?", output="18°C, humidity 71%."))
    assert grounded.passed is True and grounded.value == 1.0
    invented = answer("groundedness").score(trace(weather, output="It is 18°C with 40 km/h winds, 3 days."))
    assert invented.passed is False
    assert invented.reason == "Not found in the input or tool results: 40."


def test_groundedness_does_not_take_a_handoff_targets_answer_as_evidence() -> None:
    # After a handoff, the transfer call's child is the rest of this same run: its output IS the
    # final answer, so counting it as a source would make every handoff answer grounded.
    final = "It is 18°C with 40 km/h winds."
    rest_of_run = trace(output=final, agent_name="weather-agent")
    transfer = call("transfer_to_weather_agent", {}, result="weather-agent", child=rest_of_run, handoff=True)
    weather = call("get_weather", {"city": "Paris"}, result={"temp_c": 18})
    score = answer("groundedness").score(trace(transfer, weather, input="Weather in Paris?", output=final))
    assert score.passed is False
    assert score.reason == "Not found in the input or tool results: 40."
    # A nested agent used as a tool is a real source: its answer grounds the caller's.
    nested = call("ask_forecaster", {"q": "wind"}, result=None, child=trace(output="winds at 40 km/h"))
    assert answer("groundedness").score(trace(nested, weather, output=final)).passed is True


def test_groundedness_facts_stated_must_appear_in_sources() -> None:
    weather = call("get_weather", {"city": "Paris"}, result="sunny")
    scorer = answer("groundedness", facts=["sunny", "Lyon"])
    assert scorer.score(trace(weather, output="Sunny in Paris")).passed is True
    failed = scorer.score(trace(weather, output="Sunny in Lyon"))
    assert failed.passed is False and failed.details == {"unsupported": ["Lyon"]}


def test_groundedness_not_applicable_when_nothing_to_check_against() -> None:
    no_answer = answer("groundedness").score(trace(call("f")))
    assert no_answer.passed is None
    unrecorded = answer("groundedness").score(trace(call("f", None, result=None), output="It costs 348 dollars"))
    assert (
        unrecorded.passed is None and unrecorded.reason is not None and "no input or tool result" in unrecorded.reason
    )


HINT = "record content (is EVALTRACE_CAPTURE_CONTENT=0?) or wrap the agent in evaltrace.collector.agent_run(...)"


@pytest.mark.parametrize("name", ["correctness", "completeness", "answer_quality"])
def test_answer_checks_with_facts_fail_when_no_answer_was_recorded(name: str) -> None:
    # Before: "does not apply" (so a spec's `answer:` check passed on a recording without content).
    for scorer in (answer(name, facts=["18"]), answer(name, facts=["18"]).as_spec_check()):
        score = scorer.score(trace(call("get_weather", result="18"), input="Weather?"))
        assert score.passed is False and score.reason is not None and HINT in score.reason
        assert "no answer was recorded: the trace has no output" in score.reason.lower()


def test_groundedness_spec_check_fails_where_the_default_does_not_apply() -> None:
    claims = trace(call("f", None, result=None), output="It costs 348 dollars")
    check = answer("groundedness").as_spec_check()
    unrecorded = check.score(claims)
    assert unrecorded.passed is False and unrecorded.reason == (
        f"The answer makes claims but no input or tool result was recorded to check them; {HINT}."
    )
    assert check.score(trace(call("f"))).passed is False
    # answer_quality in a spec counts the unverifiable axis as 0 rather than leaving it out.
    quality = answer("answer_quality", facts=["348"])
    assert quality.score(claims).passed is True
    strict = quality.as_spec_check().score(claims)
    assert strict.passed is False and strict.value == pytest.approx(0.6)


def test_answer_quality_weights_40_40_20_by_default() -> None:
    weather = call("get_weather", {"city": "Paris"}, result={"temp": 18})
    config = {"facts": ["18", "Paris"], "fields": ["temperature", "humidity"]}
    asked = trace(weather, input="Weather in Paris?", output="Paris: 18, temperature only.")
    score = answer("answer_quality", **config).score(asked)
    # groundedness 1, correctness 1, completeness 0.5 -> 0.4 + 0.4 + 0.1
    assert score.value == pytest.approx(0.9) and score.passed is True
    assert score.details is not None and score.details["axes"]["completeness"]["value"] == 0.5
    # Without the input, "Paris" (only in the tool's arguments) is not grounded: 0 + 0.4 + 0.1.
    unasked = trace(weather, output="Paris: 18, temperature only.")
    assert answer("answer_quality", **config).score(unasked).value == pytest.approx(0.5)


def test_answer_quality_custom_weights_and_inapplicable_axes() -> None:
    config = {"facts": ["18"], "weights": {"groundedness": 0, "correctness": 1, "completeness": 1}}
    score = answer("answer_quality", **config).score(trace(output="no idea"))
    assert score.value == 0.0 and score.passed is False
    assert score.reason is not None and "weakest: correctness" in score.reason
    # Only groundedness applies (no facts, fields or expected answer): its weight is all of it.
    only = answer("answer_quality").score(trace(call("f", result="x"), output="done"))
    assert only.value == 1.0 and only.passed is True
    assert answer("answer_quality").score(trace()).passed is None


def test_answer_weights_must_not_all_be_zero() -> None:
    with pytest.raises(InputError, match="at least one weight must be positive"):
        create_scorer("answer_quality", {"weights": {"groundedness": 0, "correctness": 0, "completeness": 0}})


def test_all_axes_accept_the_shared_answer_block() -> None:
    block = {"expected": "18", "facts": ["18"], "aliases": {"18": ["eighteen"]}, "weights": {"groundedness": 1}}
    for name in ("groundedness", "correctness", "completeness", "answer_quality"):
        assert create_scorer(name, block).name == name
    assert answer("correctness", **block).score(trace(output="eighteen")).value == 1.0


def test_groundedness_large_and_decimal_numbers_compare_by_value() -> None:
    lookup = call("revenue", {"year": 2024}, result={"revenue": 1234500, "margin": 12.75})
    score = answer("groundedness").score(trace(lookup, output="Revenue was 1,234,500 at a 12.750 margin."))
    assert score.passed is True and score.details == {"claims": ["1234500", "12.75"]}
    wrong = answer("groundedness").score(trace(lookup, output="Revenue was 1,234,600."))
    assert wrong.passed is False and wrong.details == {"unsupported": ["1234600"]}
