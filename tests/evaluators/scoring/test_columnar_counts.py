"""The columnar `tool_errors` and `budget` equal the reference scorers, on random traces and configurations."""

from __future__ import annotations

from typing import Any

from _columnar_check import check_rows, check_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.records import Iteration, ToolCall, Trace
from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.scorers.calls import Budget, ToolErrors

# Results that are failures and results that only look like them to a text search.
_RESULTS = st.sampled_from(
    [
        None,
        "ok",
        {"temp": 18},
        {"error": None},
        {"error": False},
        {"error": ""},
        {"error": "boom"},
        {"message": "no error here"},
        "error",
        ["error"],
        {"nested": {"error": "deep"}},
    ]
)
_ERRORS = st.sampled_from([None, None, None, "", "timeout"])


@st.composite
def _call(draw: st.DrawFn, nested: bool = True) -> ToolCall:
    child = None
    if nested and draw(st.integers(0, 3)) == 0:
        child = Trace(trace_id="c" * 32, status="success", tool_calls=[draw(_call(nested=False))])
    return ToolCall(
        name=draw(st.sampled_from(["search", "fetch"])),
        arguments={"q": 1},
        result=draw(_RESULTS),
        error=draw(_ERRORS),
        child=child,
        handoff=child is not None and draw(st.integers(0, 3)) == 0,
    )


@st.composite
def _trace(draw: st.DrawFn) -> Trace:
    iterations = [Iteration(index=i) for i in range(draw(st.integers(0, 4)))]
    return Trace(
        trace_id="t" * 32, status="success", tool_calls=draw(st.lists(_call(), max_size=4)), iterations=iterations
    )


def _marked(scorer: Scorer, check: bool) -> Scorer:
    return scorer.as_spec_check() if check else scorer


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_trace(), st.integers(0, 2), st.booleans(), st.booleans(), st.booleans())
def test_columnar_tool_errors_equals_the_reference(
    trace: Trace, max_errors: int, error_results: bool, nested: bool, check: bool
) -> None:
    scorer = ToolErrors(max_errors=max_errors, error_results=error_results, nested=nested)
    check_same(trace, _marked(scorer, check))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_trace(), min_size=2, max_size=6), st.booleans(), st.booleans(), st.booleans())
def test_a_batch_of_rows_gets_each_rows_own_tool_errors_verdict(
    traces: list[Trace], error_results: bool, nested: bool, check: bool
) -> None:
    """Asked for a batch's rows at once (as the engine asks), each row's answer is its own."""
    check_rows(traces, _marked(ToolErrors(error_results=error_results, nested=nested), check))


_LIMIT = st.none() | st.integers(0, 8)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_trace(), _LIMIT, _LIMIT, _LIMIT, st.booleans(), st.booleans())
def test_columnar_budget_equals_the_reference(
    trace: Trace, tools: int | None, models: int | None, steps: int | None, nested: bool, check: bool
) -> None:
    config: dict[str, Any] = {"max_tool_calls": tools, "max_model_calls": models, "max_steps": steps, "nested": nested}
    check_same(trace, _marked(Budget.model_validate(config), check))


def test_clean_calls_and_budgets_take_the_columnar_path() -> None:
    calls = [
        ToolCall(name="search", arguments={}, result={"hits": 2}),
        ToolCall(name="fetch", arguments={}, result="ok"),
    ]
    trace = Trace(trace_id="a" * 32, status="success", tool_calls=calls, iterations=[Iteration(index=0)])
    assert check_same(trace, ToolErrors()) is not None
    assert check_same(trace, Budget(max_tool_calls=2, max_steps=3)) is not None
    assert check_same(Trace(trace_id="b" * 32, status="success"), ToolErrors().as_spec_check()) is not None


def test_possible_failures_are_graded_by_the_references_own_code() -> None:
    # A result that holds "error" or a call with an error: `ToolErrors.graded` on the row's calls.
    for result, error, passed in (
        ({"error": "boom"}, None, False),
        ({"error": None}, None, True),
        ("ok", "timeout", False),
    ):
        calls = [ToolCall(name="search", arguments={}, result=result, error=error)]
        found = check_same(Trace(trace_id="a" * 32, status="success", tool_calls=calls), ToolErrors())
        assert found is not None and found.passed is passed
    calls = [ToolCall(name="search", arguments={})] * 3
    assert check_same(Trace(trace_id="a" * 32, status="success", tool_calls=calls), Budget(max_tool_calls=2)) is None
