"""The columnar `output`, `steps`, `outcome` and `cost` equal the reference scorers, on random traces and configs.

Each trace goes through the real traces table (`to_table`); wherever the columnar path answers,
its `Score` must equal `run_scorer` on the decoded trace field for field (`check_same`). Each
scorer also has traces built to pass, on which the columnar path must answer, so the equality
cannot hold only because the forms never answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from _columnar_check import check_rows, check_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.records import Iteration, Message, MessagePart, ToolCall, Trace, Usage
from evaltrace.collector.traces.table import to_table
from evaltrace.evaluators.scoring.columns import BatchCalls
from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.scorers.limits import Cost
from evaltrace.evaluators.scoring.scorers.output import Outcome, Output
from evaltrace.evaluators.scoring.scorers.steps import Steps

_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_WORDS = ["Paris", "paris", "rain", "18", "error", "ok", "Sunny day"]
# Answers: words, blanks, JSON with and without a code fence, and JSON that only looks like it.
_ANSWERS = st.sampled_from(
    [
        None,
        "",
        "   ",
        "Paris: rain, 18 C",
        "PARIS  sunny\n day",
        '{"city": "Paris", "temp": 18}',
        '```json\n{"city": "Paris", "temp": 18}\n```',
        '{"city": 3}',
        "[1, 2",
        "ok",
    ]
)
_NAMES = st.sampled_from(["search", "fetch", "pay"])
_SCALARS = st.sampled_from([1, 1.0, True, "Paris", " Paris ", "paris", None])
_ARGS = st.dictionaries(st.sampled_from(["city", "n"]), _SCALARS, max_size=2)
_RESULTS = st.sampled_from([None, "ok", "18 C", {"temp": 18}, {"error": "boom"}, ["Paris", 1.5]])
_MODELS = st.sampled_from([None, "", "gpt-4o", "openai/gpt-4o-mini-2024-07-18", "my-model", "claude-sonnet-4"])
_COUNT = st.none() | st.integers(0, 5000)


def _reply(text: str | None) -> list[Message] | None:
    if text is None:
        return None
    return [Message(role="assistant", parts=[MessagePart(type="text", text=text), MessagePart(type="other")])]


@st.composite
def _iteration(draw: st.DrawFn, index: int) -> Iteration:
    return Iteration(
        index=index,
        model=draw(_MODELS),
        output_messages=draw(st.sampled_from([None, [], [Message(role="assistant")]]) | _ANSWERS.map(_reply)),
        finish_reasons=draw(st.lists(st.sampled_from(["stop", "LENGTH", "max_tokens", "tool_calls"]), max_size=2)),
        stop_reason=draw(st.sampled_from([None, "stop", "tool_call", "length", "content_filter", "refusal"])),
        usage=Usage(input_tokens=draw(_COUNT), output_tokens=draw(_COUNT), cache_read_tokens=draw(_COUNT)),
        error=draw(st.sampled_from([None, None, "", "rate   limited"])),
    )


@st.composite
def _call(draw: st.DrawFn, nested: bool = True) -> ToolCall:
    child = None
    if nested and draw(st.integers(0, 4)) == 0:
        child = Trace(trace_id="c" * 32, status="success", tool_calls=[draw(_call(nested=False))])
    return ToolCall(
        name=draw(_NAMES),
        arguments=draw(_ARGS) if draw(st.integers(0, 2)) else draw(st.sampled_from([None, "raw text"])),
        arguments_truncated=draw(st.integers(0, 9)) == 0,
        result=draw(_RESULTS),
        error=draw(st.sampled_from([None, "", "timeout"])),
        child=child,
        handoff=child is not None and draw(st.booleans()),
    )


@st.composite
def _trace(draw: st.DrawFn) -> Trace:
    iterations = [draw(_iteration(i)) for i in range(draw(st.integers(0, 3)))]
    return Trace(
        trace_id="o" * 32,
        status=draw(st.sampled_from(["success", "success", "success", "unknown", "error", "timeout"])),
        error=draw(st.sampled_from([None, None, None, "", "it broke"])),
        input=draw(st.sampled_from([None, "weather?"])),
        output=draw(_ANSWERS),
        tool_calls=draw(st.lists(_call(), max_size=4)),
        iterations=iterations,
        models=sorted({it.model for it in iterations if it.model}),
    )


def _marked(scorer: Scorer, check: bool) -> Scorer:
    return scorer.as_spec_check() if check else scorer


# --- output ---------------------------------------------------------------------------------------

_SCHEMAS = st.sampled_from(
    [
        None,
        None,
        {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
        {"type": "array"},
    ]
)


@st.composite
def _output_case(draw: st.DrawFn) -> tuple[Trace, dict[str, Any]]:
    """A trace and checks mostly about its own answer: words from it (cased either way) or not."""
    trace = draw(_trace())
    answer = trace.final_answer() or ""
    own = st.sampled_from(answer.split() or _WORDS).flatmap(lambda word: st.sampled_from([word, word.upper()]))
    words = own | st.sampled_from(_WORDS)
    equals = st.sampled_from([answer, f"  {answer.upper()} ", " ".join(answer.split()[:1])]) | _ANSWERS
    config = {
        "contains": draw(st.none() | own | st.lists(own, max_size=2)),
        "not_contains": draw(st.none() | words | st.lists(words, max_size=2)),
        "regex": draw(st.sampled_from([None, None, r"\d+", "^Par", r"(?i)sunny\s+day", "[{]"])),
        "equals": draw(st.none() | st.none() | equals),
        "json_schema": draw(_SCHEMAS),
        "case_sensitive": draw(st.booleans()),
    }
    return trace, config


@_SETTINGS
@given(_output_case(), st.booleans())
def test_columnar_output_equals_the_reference(case: tuple[Trace, dict[str, Any]], check: bool) -> None:
    trace, config = case
    check_same(trace, _marked(Output.model_validate(config), check))


@_SETTINGS
@given(_output_case(), st.booleans())
def test_columnar_output_of_plain_texts_equals_the_reference(case: tuple[Trace, dict[str, Any]], check: bool) -> None:
    """Case-sensitive `contains`/`not_contains` alone: the batch form's own text search decides the recorded outputs."""
    trace, config = case
    plain = {"contains": config["contains"], "not_contains": config["not_contains"] or trace.final_answer()}
    check_rows([trace, trace.model_copy(update={"output": None})], _marked(Output.model_validate(plain), check))


@_SETTINGS
@given(_trace(), st.booleans(), st.booleans())
def test_output_that_holds_takes_the_columnar_path(trace: Trace, from_reply: bool, check: bool) -> None:
    answer = "Paris: rain, 18 C"
    if from_reply:  # no output column: the answer is the last model reply's text
        replies = [*trace.iterations, Iteration(index=9, output_messages=_reply(answer))]
        trace = trace.model_copy(update={"output": None, "iterations": replies})
    else:
        trace = trace.model_copy(update={"output": answer})
    config = {"contains": ["rain", "PARIS"], "not_contains": "snow", "regex": r"\d+ C", "case_sensitive": False}
    found = check_same(trace, _marked(Output.model_validate({**config, "equals": " paris:  rain, 18 c"}), check))
    assert found is not None and found.reason == "All 5 output checks passed."
    schema = {"type": "object", "required": ["city"]}
    trace = trace.model_copy(update={"output": '{"city": "Paris"}'})
    assert check_same(trace, Output.model_validate({"json_schema": schema})) is not None
    fenced = trace.model_copy(update={"output": '```json\n{"city": "Paris"}\n```'})
    assert check_same(fenced, Output.model_validate({"json_schema": schema})) is not None


# --- steps ----------------------------------------------------------------------------------------


def _pattern(draw: st.DrawFn, trace: Trace) -> Any:
    """Mostly a call the trace made (by name, or with its arguments or a part of them), sometimes another."""
    made = [call for call in trace.all_tool_calls(nested=True)]
    if not made or draw(st.integers(0, 3)) == 0:
        return draw(_NAMES) if draw(st.booleans()) else {"name": draw(_NAMES), "arguments": draw(_ARGS)}
    call = draw(st.sampled_from(made))
    arguments = call.arguments if isinstance(call.arguments, dict) else draw(_ARGS)
    part = dict(list(arguments.items())[: draw(st.integers(0, len(arguments)))])
    return draw(
        st.sampled_from([call.name, {"name": call.name, "arguments": arguments}, {"input": part, "name": call.name}])
    )


_REGEX = st.sampled_from(
    ["^se", "pay", {"name": "fetch", "result": r"\d+"}, {"arguments": '"city": "P'}, {"result": "temp"}]
)


@st.composite
def _steps_case(draw: st.DrawFn) -> tuple[Trace, dict[str, Any]]:
    trace = draw(_trace())
    config = {
        "contains": [_pattern(draw, trace) for _ in range(draw(st.integers(0, 3)))],
        "not_contains": [_pattern(draw, trace) for _ in range(draw(st.integers(0, 2)))],
        "regex": draw(st.lists(_REGEX, max_size=2)),
        "arguments": {
            "mode": draw(st.sampled_from(["subset", "exact", "superset", "ignore"])),
            "trim": draw(st.booleans()),
            "casefold": draw(st.booleans()),
            "per_tool": draw(st.sampled_from([{}, {"fetch": {"mode": "ignore"}}, {"search": {"trim": True}}])),
        },
        "nested": draw(st.booleans()),
    }
    return trace, config


@_SETTINGS
@given(_steps_case(), st.booleans())
def test_columnar_steps_equals_the_reference(case: tuple[Trace, dict[str, Any]], check: bool) -> None:
    trace, config = case
    check_same(trace, _marked(Steps.model_validate(config), check))


@_SETTINGS
@given(st.lists(_call(), min_size=1, max_size=4), st.booleans(), st.booleans())
def test_steps_that_hold_take_the_columnar_path(calls: list[ToolCall], nested: bool, check: bool) -> None:
    calls = [
        call.model_copy(update={"arguments": {"city": "Paris", "n": 2}, "arguments_truncated": False}) for call in calls
    ]
    calls.append(ToolCall(name="mail", arguments={"to": "me"}, result={"sent": 1}))
    trace = Trace(trace_id="s" * 32, status="success", tool_calls=calls)
    config = {
        "contains": [{"name": "mail", "input": {"to": "me"}}, {"name": calls[0].name, "arguments": {"city": "Paris"}}],
        "not_contains": ["delete", {"name": "mail", "arguments": {"to": "you"}}],
        "regex": [{"name": "^ma", "result": '"sent": 1'}, {"arguments": r'"n": 2'}],
        "nested": nested,
    }
    found = check_same(trace, _marked(Steps.model_validate(config), check))
    starts_nested = any(call.child is not None and not call.handoff for call in calls)
    assert (found is None) == (nested and starts_nested)  # nested agents' calls are in other rows


# --- outcome --------------------------------------------------------------------------------------


_OUTCOMES = ("success", "failure", "error", "timeout")


@_SETTINGS
@given(st.lists(_trace(), min_size=2, max_size=6), st.sampled_from(_OUTCOMES), st.booleans())
def test_a_batch_of_rows_gets_each_rows_own_outcome_and_output(traces: list[Trace], expected: str, check: bool) -> None:
    """Asked for a batch's rows at once (as the engine asks), each row's answer is its own."""
    check_rows(traces, _marked(Outcome(expected=expected), check))
    check_rows(traces, _marked(Output.model_validate({"contains": "Paris", "not_contains": "error"}), check))


@_SETTINGS
@given(_trace(), st.booleans())
def test_columnar_outcome_equals_the_reference(trace: Trace, check: bool) -> None:
    answered = [expected for expected in _OUTCOMES if check_same(trace, _marked(Outcome(expected=expected), check))]
    if not answered:  # the one outcome no expectation passes on: nothing shows how the run ended
        assert Outcome().score(trace).details == {"outcome": "unknown", "unrecorded": True}


_FAILED = ToolCall(name="fetch", error="  connection\n refused  " + "x" * 90)


@pytest.mark.parametrize(
    ("changes", "expected", "evidence"),
    [
        ({"status": "timeout", "error": "after 30s"}, "timeout", "the run timed out: after 30s"),
        ({"status": "timeout"}, "timeout", "the run timed out"),
        ({"error": "boom"}, "error", "the run raised: boom"),
        ({"status": "error"}, "error", "the run raised: status error"),
        ({"output": " \n"}, "failure", "the run returned but its final answer is empty"),
        (
            {"iterations": [Iteration(index=0, error="rate\nlimited")]},
            "failure",
            "the run returned but its last model call failed: rate limited",
        ),
        (
            {
                "iterations": [
                    Iteration(index=0, error=""),
                    Iteration(index=1, finish_reasons=["MAX_TOKENS", "length"], stop_reason="length"),
                ]
            },
            "failure",
            "the run returned but its last model call was cut short (length: max_tokens)",
        ),
        (
            {"iterations": [Iteration(index=0, finish_reasons=["SAFETY"], stop_reason="content_filter")]},
            "failure",
            "the run returned but its last model call was cut short (content_filter: safety)",
        ),
        (
            {"iterations": [Iteration(index=0, finish_reasons=["length"], stop_reason="length")]},
            "failure",
            "the run returned but its last model call was cut short (length)",
        ),
        (
            {"tool_calls": [_FAILED]},
            "failure",
            f"the run returned but its only tool call failed (fetch: {'connection refused ' + 'x' * 58}...)",
        ),
        (
            {"tool_calls": [_FAILED, _FAILED]},
            "failure",
            "the run returned but all 2 tool calls failed (fetch: connection",
        ),
        ({"tool_calls": [_FAILED, ToolCall(name="ok", error="")]}, "success", "the run returned normally"),
        ({"output": None, "iterations": [Iteration(index=0, output_messages=_reply("hi"))]}, "success", "the run"),
    ],
)
def test_each_outcome_takes_the_columnar_path(changes: dict[str, Any], expected: str, evidence: str) -> None:
    trace = Trace(trace_id="e" * 32, status="success", output="Done.").model_copy(update=changes)
    found = check_same(trace, Outcome(expected=expected))
    assert found is not None and found.reason is not None
    assert found.reason.startswith(f"Outcome {expected} (as expected): {evidence}")


# --- cost -----------------------------------------------------------------------------------------

_PRICES = st.sampled_from([{}, {"my-model": {"input_per_mtok": 1.0, "output_per_mtok": 3.0}}])


@_SETTINGS
@given(_trace(), st.none() | st.sampled_from([0.0, 0.001, 0.01, 0.05, 1.0]), _PRICES, st.booleans(), st.booleans())
def test_columnar_cost_equals_the_reference(
    trace: Trace, max_usd: float | None, prices: dict[str, Any], fail: bool, check: bool
) -> None:
    scorer = Cost.model_validate({"max_usd": max_usd, "prices": prices, "unknown_model": "fail" if fail else "skip"})
    check_same(trace, _marked(scorer, check))


@_SETTINGS
@given(st.lists(st.tuples(_MODELS, st.integers(0, 5000), st.integers(0, 5000)), min_size=1, max_size=4), st.booleans())
def test_costs_within_the_limit_take_the_columnar_path(calls: list[tuple[str | None, int, int]], check: bool) -> None:
    iterations = [
        Iteration(index=i, model=model, usage=Usage(input_tokens=inputs, output_tokens=outputs))
        for i, (model, inputs, outputs) in enumerate(calls)
    ]
    models = sorted({it.model for it in iterations if it.model})
    trace = Trace(trace_id="p" * 32, status="success", iterations=iterations, models=models)
    priced = Cost.model_validate({"max_usd": 1.0, "prices": {"my-model": {"input_per_mtok": 1, "output_per_mtok": 3}}})
    found = check_same(trace, _marked(priced, check))
    if models:  # some call priced (only calls without a model, with no run model to fall back on, are not)
        assert found is not None and found.reason is not None and found.reason.endswith("within max $1.")
    else:
        assert found is None


# --- the table accessor the forms read ------------------------------------------------------------


def test_iteration_values_cut_per_row_in_a_sliced_batch() -> None:
    traces = [
        Trace(trace_id=f"{i}" * 32, iterations=[Iteration(index=j, model=f"m{i}{j}") for j in range(i)])
        for i in range(4)
    ]
    batch = to_table(traces).to_batches()[0].slice(1)
    calls = BatchCalls(batch)
    for i in range(1, 4):
        row = calls.row(f"{i}" * 32)
        assert row is not None and row.iteration_values("model") == [f"m{i}{j}" for j in range(i)]
    row = calls.row("2" * 32)
    assert row is not None and row.iteration_values("usage") == [Usage().model_dump()] * 2


def test_steps_with_nested_agents_leave_their_calls_to_the_reference() -> None:
    child = Trace(trace_id="c" * 32, status="success", tool_calls=[ToolCall(name="delete", arguments={"path": "/"})])
    trace = Trace(trace_id="n" * 32, status="success", tool_calls=[ToolCall(name="agent", arguments={}, child=child)])
    forbid = {"contains": ["agent"], "not_contains": ["delete"]}
    assert check_same(trace, Steps.model_validate(forbid)) is not None  # the nested call is not looked at
    assert check_same(trace, Steps.model_validate({**forbid, "nested": True})) is None  # it is: the reference fails
    handed = trace.model_copy(update={"tool_calls": [trace.tool_calls[0].model_copy(update={"handoff": True})]})
    assert (
        check_same(handed, Steps.model_validate({**forbid, "nested": True})) is not None
    )  # a handoff's calls are its own


@pytest.mark.parametrize(
    ("replies", "passes"),
    [
        (["Paris", "Lima"], False),  # the last reply is the answer (a failure: graded by `Output.answered`)
        (["Lima", "Paris"], True),
        (["Paris", None], True),  # a reply with no text is skipped
        (["Paris", ""], False),  # an empty text is a text
        ([None, None], False),  # no answer at all
    ],
)
def test_the_answer_is_the_last_reply_with_text(replies: list[str | None], passes: bool) -> None:
    iterations = [Iteration(index=i, output_messages=_reply(text) or []) for i, text in enumerate(replies)]
    trace = Trace(trace_id="r" * 32, status="success", output=None, iterations=iterations)
    found = check_same(trace, Output.model_validate({"contains": "Paris"}))
    assert (found is not None and found.passed) == passes
    assert (found is None) == (replies == [None, None])  # no answer: the reference says what is missing


def test_a_forbidden_step_that_cannot_be_ruled_out_is_left_to_the_reference() -> None:
    calls = [ToolCall(name="fetch", arguments=None), ToolCall(name="pay", arguments="{cut", arguments_truncated=True)]
    trace = Trace(trace_id="b" * 32, status="success", tool_calls=calls)
    forbid = Steps.model_validate({"not_contains": [{"name": "fetch", "arguments": {"city": "Paris"}}]})
    assert check_same(trace, forbid) is None  # fetch's arguments are unknown: the reference fails it
    cut = Steps.model_validate({"not_contains": [{"name": "pay", "arguments": {"city": "Paris"}}]})
    assert check_same(trace, cut) is not None  # cut arguments are recorded, and match nothing


def test_each_required_step_needs_a_call_of_its_own() -> None:
    calls = [ToolCall(name="fetch", arguments={"city": "Paris"}), ToolCall(name="fetch", arguments={"city": "Lima"})]
    trace = Trace(trace_id="d" * 32, status="success", tool_calls=calls)
    paris = {"name": "fetch", "arguments": {"city": "Paris"}}
    # The first required step may take the Paris call; a maximum matching still gives each its own.
    assert check_same(trace, Steps.model_validate({"contains": ["fetch", paris]})) is not None
    assert check_same(trace, Steps.model_validate({"contains": ["fetch", paris, "fetch"]})) is None
    assert check_same(trace, Steps.model_validate({"contains": [paris, paris]})) is None
