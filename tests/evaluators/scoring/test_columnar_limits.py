"""The columnar `usage` equals the reference scorer, on random token counts and bounds."""

from __future__ import annotations

from typing import Any

from _columnar_check import check_rows, check_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.records import Iteration, Trace, Usage
from evaltrace.evaluators.scoring.scorers.limits import UsageLimits

_COUNT = st.none() | st.integers(0, 300)
_METRIC = st.sampled_from(["input_tokens", "output", "total", "input+output", "cached", "reasoning_tokens"])
_LIMIT = st.fixed_dictionaries({}, optional={"min": st.integers(0, 150), "max": st.integers(150, 400)}).filter(bool)


@st.composite
def _trace(draw: st.DrawFn) -> Trace:
    usage = Usage(**{name: draw(_COUNT) for name in Usage.model_fields})
    iterations = [Iteration(index=0, model="gpt-4o", usage=usage)] if draw(st.booleans()) else []
    return Trace(trace_id="u" * 32, status="success", usage=usage, iterations=iterations)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _trace(),
    st.dictionaries(_METRIC, _LIMIT, max_size=3),
    st.sampled_from([{}, {"gpt-4o": {"input": {"max": 200}}}]),
    st.booleans(),
)
def test_columnar_usage_equals_the_reference(
    trace: Trace, total: dict[str, Any], per_model: dict[str, Any], check: bool
) -> None:
    scorer = UsageLimits.model_validate({"total": total, "per_model": per_model})
    check_same(trace, scorer.as_spec_check() if check else scorer)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_trace(), min_size=2, max_size=6), st.dictionaries(_METRIC, _LIMIT, min_size=1, max_size=3))
def test_a_batch_of_rows_gets_each_rows_own_usage_verdict(traces: list[Trace], total: dict[str, Any]) -> None:
    """Asked for a batch's rows at once (as the engine asks), each row's answer is its own."""
    check_rows(traces, UsageLimits.model_validate({"total": total}))


def test_met_bounds_take_the_columnar_path() -> None:
    trace = Trace(trace_id="u" * 32, status="success", usage=Usage(input_tokens=120, output_tokens=30))
    found = check_same(trace, UsageLimits.model_validate({"total": {"total": 200, "input": {"min": 100}}}))
    assert found is not None and found.reason == "All 2 usage limits met."
    assert check_same(trace, UsageLimits.model_validate({"total": {"total": 100}})) is None  # over: the reference
    assert check_same(trace, UsageLimits.model_validate({"total": {"cached": 100}})) is None  # not recorded
