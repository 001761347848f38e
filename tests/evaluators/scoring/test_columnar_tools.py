"""The columnar tool-use forms equal the reference scorers, on random traces and configurations.

`tool_call_validity`, `tool_correctness`, `tool_efficiency`, `tool_name_reliability` and
`tool_description_reliability`: each trace goes through the real traces table, and wherever the
columnar path answers, its `Score` must be the reference's (`check_same`). Each scorer also has a
property on traces built to pass, where the columnar path must answer, so the first cannot hold
by the form never answering.
"""

from __future__ import annotations

from typing import Any

from _columnar_check import check_rows, check_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.records import ToolCall, ToolSchema, Trace
from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.scorers.calls import ToolEfficiency
from evaltrace.evaluators.scoring.scorers.reliability import ToolDescriptionReliability, ToolNameReliability
from evaltrace.evaluators.scoring.scorers.tools import ToolCallValidity, ToolCorrectness

_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_PASSING = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City"},
        "days": {"type": "integer", "description": "Days"},
    },
    "required": ["city"],
}
_SCHEMAS = [
    None,
    _WEATHER,
    {"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "additionalProperties": False},
    {"type": "object", "properties": {"code": {"type": "string", "pattern": "^(a)\\1$"}}},  # RE2 cannot run it
    {"type": 5},  # not a valid schema: the reference skips its calls
    {"type": "object", "patternProperties": {"^x": {"type": "string"}}, "unevaluatedProperties": False},
]
_TOOLS = ["get_weather", "search", "book_flight", "getWeather", "fetch_via_api"]
_CALLED = [*_TOOLS, "get_wether", "lookup"]
_ARGUMENTS = [
    {"city": "Paris"},
    {"city": "Paris", "days": 2},
    {"city": "Paris", "days": 2.0},
    {"city": 3},
    {},
    {"unit": "c"},
    {"unit": "k"},
    {"code": "aa"},
    {"x1": "v"},
    {"q": "x"},
    {"extra": True},
    None,
    "raw text",
]
_RESULTS = [None, "ok", {"error": "boom"}, {"error": ""}, {"error": False}, {"hits": 2}, "error"]


def _marked(scorer: Scorer, check: bool) -> Scorer:
    return scorer.as_spec_check() if check else scorer


@st.composite
def _call(draw: st.DrawFn, names: list[str], arguments: list[Any], nested: bool = True) -> ToolCall:
    child = None
    if nested and draw(st.integers(0, 4)) == 0:
        child = Trace(trace_id="c" * 32, status="success", tool_calls=[draw(_call(names, arguments, nested=False))])
    return ToolCall(
        name=draw(st.sampled_from(names)),
        arguments=draw(st.sampled_from(arguments)),
        arguments_truncated=draw(st.integers(0, 9)) == 0,
        result=draw(st.sampled_from(_RESULTS)),
        error=draw(st.sampled_from([None, None, None, "", "timeout"])),
        child=child,
        handoff=child is not None and draw(st.booleans()),
    )


@st.composite
def _schemas(draw: st.DrawFn) -> list[ToolSchema]:
    names = draw(st.lists(st.sampled_from(_TOOLS), max_size=4))
    return [
        ToolSchema(
            name=name,
            description=draw(st.sampled_from([None, "Finds things by a query, in order."])),
            parameters=draw(st.sampled_from([*_SCHEMAS, _WEATHER, _WEATHER])),
        )
        for name in names
    ]


@st.composite
def _trace(draw: st.DrawFn, names: list[str] = _CALLED, arguments: list[Any] = _ARGUMENTS) -> Trace:
    return Trace(
        trace_id="t" * 32,
        status="success",
        tool_calls=draw(st.lists(_call(names, arguments), max_size=5)),
        tool_schemas=draw(_schemas()),
    )


# tool_call_validity ----------------------------------------------------------------------------

_CONFIG_SCHEMAS = [{}, {"search": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}]


# Weighted towards calls of offered tools with valid arguments, so that many traces pass.
_VALIDITY_TRACE = _trace([*_TOOLS, *_TOOLS, *_CALLED], [*_ARGUMENTS, *[{"city": "Paris"}] * 6, {"q": "x"}, {"q": "x"}])


@_SETTINGS
@given(
    st.lists(_VALIDITY_TRACE, min_size=1, max_size=4),  # rows of one batch share what the form worked out
    st.sampled_from(_CONFIG_SCHEMAS),
    st.booleans(),
    st.sampled_from([0.0, 0.5, 1.0]),
    st.booleans(),
    st.booleans(),
)
def test_columnar_tool_call_validity_equals_the_reference(
    traces: list[Trace], schemas: dict[str, Any], strict: bool, threshold: float, nested: bool, check: bool
) -> None:
    scorer = ToolCallValidity(schemas=schemas, strict=strict, threshold=threshold, nested=nested)
    check_rows(traces, _marked(scorer, check))
    # The rows of a run offer the same tools: what one row's calls were found to be, the next ones reuse.
    check_rows([trace.model_copy(update={"tool_schemas": traces[0].tool_schemas}) for trace in traces], scorer)


_VALID = [{"city": "Paris"}, {"city": "Oslo", "days": 3}, {"city": "Rome", "days": 2.0}]


def test_each_distinct_call_of_a_batch_gets_its_own_verdict() -> None:
    # Rows of one batch share their calls' verdicts by name, arguments and truncation (the batch's
    # call keys) under the same offered tools: a call differing in any of them is checked anew.
    tools = [ToolSchema(name="get_weather", parameters=_WEATHER)]
    made = [{"city": "Paris"}, {"city": 3}, {"city": "Paris", "days": 2}, {}, {"city": "Paris"}]
    traces = [
        Trace(
            trace_id="v" * 32, status="success", tool_calls=[ToolCall(name="get_weather", arguments=a)], tool_schemas=t
        )
        for a, t in zip(made, [tools, tools, tools, tools, []], strict=True)
    ]
    traces.append(traces[0].model_copy(update={"tool_calls": [ToolCall(name="get_weather", arguments_truncated=True)]}))
    scorer = ToolCallValidity()
    found = check_rows(traces, scorer)  # each the reference's; the failures graded by its own code
    assert [score is not None and score.passed is True for score in found] == [True, False, True, False, False, False]
    # The verdicts are kept for the next batches by the offered tools' and the call's texts.
    stricter = [ToolSchema(name="get_weather", parameters={**_WEATHER, "required": ["city", "days"]})]
    again = [traces[0], traces[0].model_copy(update={"tool_schemas": stricter}), traces[2]]
    assert [score is not None and score.passed is True for score in check_rows(again, scorer)] == [True, False, True]


@_PASSING
@given(
    st.lists(st.sampled_from(["get_weather", "search", "lookup"]), max_size=4),
    st.sampled_from(_VALID),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_valid_calls_take_the_columnar_path(
    names: list[str], weather: dict[str, Any], unrecorded: bool, strict: bool, check: bool
) -> None:
    # get_weather: valid arguments; search: offered without recorded parameters, so there is no
    # schema to check it against (not checked: fine for a default, not for a check); lookup: its
    # schema given in config.
    known = {"get_weather": weather, "search": {"anything": 1}, "lookup": {"q": "x"}}
    calls = [ToolCall(name=name, arguments=known[name]) for name in names]
    if unrecorded:  # a call that cannot be checked: fine for a default, not for a check
        calls.append(ToolCall(name="get_weather"))
    tools = [ToolSchema(name="get_weather", parameters=_WEATHER), ToolSchema(name="search")]
    trace = Trace(trace_id="v" * 32, status="success", tool_calls=calls, tool_schemas=tools)
    scorer = ToolCallValidity(schemas={"lookup": _CONFIG_SCHEMAS[1]["search"]}, strict=strict)
    found = check_same(trace, _marked(scorer, check))
    checked = any(name != "search" for name in names)
    skipped = "search" in names or unrecorded
    assert (found is not None and found.passed is True) == (
        checked and not (skipped and check) or (not calls and check)
    )


def test_failing_calls_are_graded_by_the_references_own_code() -> None:
    tools = [ToolSchema(name="get_weather", parameters=_WEATHER)]
    for call in (
        ToolCall(name="get_weather", arguments={"city": 3}),  # invalid
        ToolCall(name="get_wether", arguments={"city": "Paris"}),  # not offered
        ToolCall(name="get_weather", arguments={"city": "Paris"}, arguments_truncated=True),
    ):
        trace = Trace(trace_id="d" * 32, status="success", tool_calls=[call], tool_schemas=tools)
        found = check_same(trace, ToolCallValidity())
        assert found is not None and found.passed is False
    unrecorded = [ToolCall(name="get_weather", arguments={"city": "Oslo"}), ToolCall(name="get_weather")]
    trace = Trace(trace_id="d" * 32, status="success", tool_calls=unrecorded, tool_schemas=tools)
    found = check_same(trace, ToolCallValidity())
    assert found is not None and found.details == {"invalid": [], "checked": 1, "skipped": 1}
    found = check_same(trace, ToolCallValidity().as_spec_check())  # a check must see every call
    assert found is not None and found.passed is False


# tool_correctness ------------------------------------------------------------------------------

_NAMES = ["search", "fetch", "book", "pay"]
_SCALARS = st.sampled_from([1, 1.0, True, "Paris", " Paris ", "paris", None])
_ARGS = st.dictionaries(st.sampled_from(["city", "n"]), _SCALARS, max_size=2)


@st.composite
def _correctness_case(draw: st.DrawFn) -> tuple[Trace, ToolCorrectness]:
    calls = draw(st.lists(_call(_NAMES, [{"city": "Paris"}, {"n": 1}, {"n": 1.0}, {}, None, "raw"]), max_size=5))
    expected: list[dict[str, Any]] = []
    for call in calls:
        arguments = call.arguments if isinstance(call.arguments, dict) else draw(_ARGS)
        part = {key: value for key, value in arguments.items() if draw(st.booleans())}  # a subset of the keys
        if draw(st.integers(0, 3)):
            expected.append({"name": call.name, "arguments": draw(st.sampled_from([arguments, None, arguments, part]))})
    if draw(st.integers(0, 3)) == 0:
        expected.insert(draw(st.integers(0, len(expected))), {"name": draw(st.sampled_from(_NAMES)), "arguments": None})
    if draw(st.booleans()):
        expected.reverse()
    config: dict[str, Any] = {
        "expected": None if draw(st.integers(0, 15)) == 0 else expected,
        "mode": draw(st.sampled_from(["names", "order", "arguments"])),
        "threshold": draw(st.sampled_from([0.0, 0.5, 0.8, 1.0])),
        "nested": draw(st.booleans()),
        "arguments": {
            "mode": draw(st.sampled_from(["exact", "subset", "superset", "ignore"])),
            "trim": draw(st.booleans()),
            "casefold": draw(st.booleans()),
            "per_tool": draw(st.sampled_from([{}, {"fetch": {"mode": "ignore"}}])),
        },
    }
    return Trace(trace_id="t" * 32, status="success", tool_calls=calls), ToolCorrectness.model_validate(config)


@_SETTINGS
@given(_correctness_case(), st.lists(_correctness_case(), max_size=3), st.booleans())
def test_columnar_tool_correctness_equals_the_reference(
    case: tuple[Trace, ToolCorrectness], others: list[tuple[Trace, ToolCorrectness]], check: bool
) -> None:
    trace, scorer = case  # the other cases' traces: more rows of the batch, for the same scorer
    check_rows([trace, *(other for other, _ in others)], _marked(scorer, check))


@_PASSING
@given(
    st.lists(st.tuples(st.sampled_from(_NAMES), _ARGS), max_size=4),
    st.sampled_from(["names", "order", "arguments"]),
    st.booleans(),
)
def test_expected_calls_take_the_columnar_path(made: list[tuple[str, dict[str, Any]]], mode: str, check: bool) -> None:
    calls = [ToolCall(name=name, arguments=arguments) for name, arguments in made]
    trace = Trace(trace_id="k" * 32, status="success", tool_calls=calls)
    expected = [{"name": name, "arguments": arguments} for name, arguments in made]
    scorer = ToolCorrectness.model_validate({"expected": expected, "mode": mode})
    found = check_same(trace, _marked(scorer, check))
    assert found is not None and found.value == 1.0


def test_a_partial_match_above_the_threshold_gives_the_references_reason() -> None:
    calls = [ToolCall(name="search", arguments={"q": 1}), ToolCall(name="fetch", arguments={"q": 2})]
    trace = Trace(trace_id="p" * 32, status="success", tool_calls=calls)
    scorer = ToolCorrectness.model_validate({"expected": [{"name": "search"}], "mode": "names", "threshold": 0.5})
    found = check_same(trace, scorer)
    assert (
        found is not None
        and found.reason == "1 of 1 expected calls matched (names mode, score 0.67); unexpected: fetch."
    )
    other = ToolCorrectness.model_validate(
        {"expected": [{"name": "search", "arguments": {"q": 1.0}}], "mode": "arguments", "threshold": 0.5}
    )
    # 1 and 1.0: equal values in different text, asked of the argument matcher as the reference asks it.
    found = check_same(trace, other)
    assert found is not None and found.value == 2 / 3
    both = [{"name": "fetch", "arguments": {}}, {"name": "search", "arguments": {"q": 1}}]
    subset = ToolCorrectness.model_validate({"expected": both, "mode": "arguments"})
    found = check_same(trace, subset)  # the expected keys a subset of the made ones (the default key mode)
    assert found is not None and found.value == 1.0
    other_value = [{"name": "search", "arguments": {"q": 3}}]
    wrong = ToolCorrectness.model_validate({"expected": other_value, "mode": "arguments"})
    found = check_same(trace, wrong)  # no match: failed by the reference's own grading of the row's calls
    assert found is not None and found.passed is False


# tool_efficiency -------------------------------------------------------------------------------

_REPEATABLE = [{"q": 1}, {"q": 1.0}, {"q": 2}, {"a": 1, "b": 2}, {"b": 2, "a": 1}, None, "raw"]


@_SETTINGS
@given(
    st.lists(_trace(["search", "fetch"], _REPEATABLE), min_size=1, max_size=4),
    st.integers(0, 2),
    st.none() | st.integers(1, 3),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_columnar_tool_efficiency_equals_the_reference(
    traces: list[Trace], max_redundant: int, max_loop: int | None, count_retries: bool, nested: bool, check: bool
) -> None:
    scorer = ToolEfficiency(max_redundant=max_redundant, max_loop=max_loop, count_retries=count_retries, nested=nested)
    check_rows(traces, _marked(scorer, check))


@_PASSING
@given(st.lists(st.sampled_from(_NAMES), unique=True, max_size=4), st.integers(0, 3), st.booleans())
def test_distinct_calls_take_the_columnar_path(names: list[str], retries: int, check: bool) -> None:
    calls = [ToolCall(name=name, arguments={"q": i}) for i, name in enumerate(names)]
    calls += [ToolCall(name="retry", arguments={"q": 1}, error="timeout")] * retries  # retries of a failed call
    trace = Trace(trace_id="e" * 32, status="success", tool_calls=calls)
    found = check_same(trace, _marked(ToolEfficiency(), check))
    assert (found is not None) == (bool(calls) or check)
    if retries > 1:
        assert (
            found is not None and found.reason == f"loop: retry(q=1) {retries} times in a row from #{len(names) + 1}."
        )


def test_unrecorded_arguments_of_a_repeated_tool_are_left_to_the_reference() -> None:
    calls = [ToolCall(name="search", arguments={"q": 1}), ToolCall(name="search")]
    assert check_same(Trace(trace_id="u" * 32, status="success", tool_calls=calls), ToolEfficiency()) is None


# tool_name_reliability -------------------------------------------------------------------------

_TOOL_NAMES = [
    "search",
    "get_weather",
    "getWeather",
    "fetch_via_api",
    "a-b-c-d-e-f-g-h",
    "bad name!",
    "x" * 70,
    "Search",
    "book_flight_with_llm",
]


@_SETTINGS
@given(
    st.lists(st.sampled_from(_TOOL_NAMES), max_size=4),
    st.lists(st.sampled_from([*_TOOL_NAMES, "get_wether", "lookup"]), max_size=4),
    st.sampled_from([0.0, 0.5, 0.8, 1.0]),
    st.booleans(),
    st.sampled_from([1, 2, 7]),
    st.sampled_from([None, ["via"]]),
    st.booleans(),
)
def test_columnar_tool_name_reliability_equals_the_reference(
    offered: list[str],
    called: list[str],
    threshold: float,
    snake_case: bool,
    max_segments: int,
    words: list[str] | None,
    check: bool,
) -> None:
    trace = Trace(
        trace_id="n" * 32,
        status="success",
        tool_calls=[ToolCall(name=name) for name in called],
        tool_schemas=[ToolSchema(name=name) for name in offered],
    )
    config: dict[str, Any] = {"threshold": threshold, "snake_case": snake_case, "max_segments": max_segments}
    if words is not None:
        config["implementation_words"] = words
    check_same(trace, _marked(ToolNameReliability.model_validate(config), check))


@_PASSING
@given(st.lists(st.sampled_from(["search", "get_weather", "book_flight"]), min_size=1, max_size=3), st.booleans())
def test_clear_offered_names_take_the_columnar_path(names: list[str], offer: bool) -> None:
    tools = [ToolSchema(name=name) for name in names] if offer else []
    trace = Trace(trace_id="o" * 32, status="success", tool_calls=[ToolCall(name=names[0])], tool_schemas=tools)
    assert check_same(trace, ToolNameReliability(snake_case=True)) is not None


# tool_description_reliability ------------------------------------------------------------------

_PARAMETERS = [
    None,
    _WEATHER,
    {"type": "object", "properties": {"a": {}, "b": {"description": "B"}, "c": {"type": "string", "description": " "}}},
    {"properties": "not an object"},
    {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "description": "d"} for i in range(7)},
        "required": ["p0"],
    },
    {"required": "x", "properties": {"a": {"enum": [1], "description": "d"}}},
]
_DESCRIPTIONS = [None, "", "short", "Looks up the weather for a city.", "   padded, but long enough to pass   "]


@_SETTINGS
@given(
    st.lists(
        st.tuples(st.sampled_from(_TOOLS), st.sampled_from(_DESCRIPTIONS), st.sampled_from(_PARAMETERS)), max_size=4
    ),
    st.sampled_from([0.0, 0.5, 0.8, 1.0]),
    st.sampled_from([1, 20, 40]),
    st.sampled_from([0, 2, 5]),
    st.sampled_from([0, 1, 3]),
    st.booleans(),
)
def test_columnar_tool_description_reliability_equals_the_reference(
    tools: list[tuple[str, str | None, dict[str, Any] | None]],
    threshold: float,
    min_chars: int,
    max_parameters: int,
    max_optional: int,
    check: bool,
) -> None:
    schemas = [ToolSchema(name=name, description=text, parameters=parameters) for name, text, parameters in tools]
    trace = Trace(trace_id="r" * 32, status="success", tool_schemas=schemas)
    scorer = ToolDescriptionReliability(
        threshold=threshold,
        min_description_chars=min_chars,
        max_parameters=max_parameters,
        max_optional_parameters=max_optional,
    )
    check_same(trace, _marked(scorer, check))


@_PASSING
@given(st.lists(st.sampled_from(_TOOLS), min_size=1, max_size=3), st.sampled_from([None, _WEATHER]), st.booleans())
def test_well_described_tools_take_the_columnar_path(names: list[str], parameters: Any, check: bool) -> None:
    tools = [
        ToolSchema(name=name, description="Looks up the weather for a city.", parameters=parameters) for name in names
    ]
    trace = Trace(trace_id="w" * 32, status="success", tool_schemas=tools)
    found = check_same(trace, _marked(ToolDescriptionReliability(), check))
    assert found is not None and found.reason == f"All {len(names)} tool definitions are well described."
