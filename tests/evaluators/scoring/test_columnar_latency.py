"""The columnar `latency` equals the reference scorer, on random times and bounds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from _columnar_check import check_same
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.records import Iteration, ToolCall, Trace
from evaltrace.evaluators.scoring.scorers.limits import Latency

T0 = datetime(2026, 1, 1, tzinfo=UTC)
# Microsecond times around the bounds, so durations land on both sides and exactly on them.
_SECONDS = st.none() | st.integers(0, 4_000_000).map(lambda us: timedelta(microseconds=us))
_BOUND = st.sampled_from([0.5, 1.0, 2.0, 3.999999])


def _span(draw: st.DrawFn) -> tuple[datetime | None, datetime | None]:
    start = T0 + timedelta(microseconds=draw(st.integers(0, 10**6))) if draw(st.integers(0, 5)) else None
    took = draw(_SECONDS)
    return start, None if start is None or took is None else start + took


@st.composite
def _trace(draw: st.DrawFn) -> Trace:
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        start, end = _span(draw)
        calls.append(ToolCall(name=draw(st.sampled_from(["search", "fetch"])), start_time=start, end_time=end))
    start, end = _span(draw)
    iterations = [Iteration(index=0)] if draw(st.booleans()) else []
    return Trace(
        trace_id="l" * 32, status="success", tool_calls=calls, iterations=iterations, start_time=start, end_time=end
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _trace(),
    st.none() | _BOUND,
    st.none() | _BOUND,
    st.none() | _BOUND | st.dictionaries(st.sampled_from(["search", "other"]), _BOUND, max_size=2),
    st.booleans(),
)
def test_columnar_latency_equals_the_reference(
    trace: Trace, run: float | None, iteration: float | None, tool: Any, check: bool
) -> None:
    config = {"max_seconds": run, "max_iteration_seconds": iteration, "max_tool_seconds": tool}
    scorer = Latency.model_validate(config)
    check_same(trace, scorer.as_spec_check() if check else scorer)


def test_measured_durations_within_bounds_take_the_columnar_path() -> None:
    call = ToolCall(name="search", start_time=T0, end_time=T0 + timedelta(seconds=1))
    trace = Trace(
        trace_id="l" * 32, status="success", tool_calls=[call], start_time=T0, end_time=T0 + timedelta(seconds=2)
    )
    found = check_same(trace, Latency(max_seconds=2.0, max_tool_seconds={"search": 1.0}))
    assert found is not None and found.reason == "All 2 measured durations within limits."
    assert check_same(trace, Latency(max_seconds=1.999999)) is None  # over: the reference
