from __future__ import annotations

from datetime import timedelta

import pytest
from _rule_traces import T0, call, iteration, trace

from evaltrace.collector.errors import InputError
from evaltrace.collector.traces.records import Trace, Usage
from evaltrace.evaluators.scoring.scorers.prices import DEFAULT_PRICES, find_price
from evaltrace.evaluators.scoring.scorers.registry import create_scorer


def two_models() -> Trace:
    its = [
        iteration(0, "gpt-4.1-2025-04-14", input_tokens=1000, output_tokens=200),
        iteration(1, "gpt-4.1-2025-04-14", input_tokens=3000, output_tokens=300),
        iteration(2, "claude-sonnet-4", input_tokens=500, output_tokens=50),
    ]
    return trace(iterations=its, usage=Usage(input_tokens=4500, output_tokens=550))


def test_usage_total_and_per_model_bounds_with_sums() -> None:
    config = {
        "total": {"total_tokens": {"max": 6000}, "input+output": 5050},
        "per_model": {"gpt-4.1": {"input_text_tokens": {"min": 1000, "max": 5000}, "output": {"max": 600}}},
    }
    score = create_scorer("usage", config).score(two_models())
    assert score.passed is True and score.reason == "All 4 usage limits met."


def test_usage_violations_are_named() -> None:
    config = {
        "total": {"input+output": {"max": 5000}},
        "per_model": {"gpt-4.1": {"input_tokens": {"min": 5000}}, "claude-sonnet-4": {"output_tokens": 10}},
    }
    score = create_scorer("usage", config).score(two_models())
    assert score.passed is False
    assert score.reason == (
        "Usage out of bounds: run input+output 5050 > max 5000; gpt-4.1 input_tokens 4000 < min 5000; "
        "claude-sonnet-4 output_tokens 50 > max 10."
    )


def test_usage_unknown_model_and_unrecorded_usage_are_not_checked() -> None:
    config = {"per_model": {"gpt-5": {"input_tokens": 10}}}
    score = create_scorer("usage", config).score(two_models())
    assert score.passed is None
    assert (
        score.reason == "No usage limit could be checked. Not checked: gpt-5: no model call of this model was recorded."
    )
    partial = create_scorer("usage", {"total": {"reasoning": 10, "input": 10000}}).score(two_models())
    assert partial.passed is True and partial.reason is not None and "run reasoning: not recorded" in partial.reason
    empty = create_scorer("usage", {"total": {"total_tokens": 10}}).score(trace())
    assert empty.passed is None and empty.reason is not None and "not recorded" in empty.reason


def test_usage_spec_check_fails_on_what_it_cannot_check() -> None:
    unknown_model = create_scorer("usage", {"per_model": {"gpt-5": {"input_tokens": 10}}}).as_spec_check()
    score = unknown_model.score(two_models())
    assert score.passed is False
    assert score.reason == ("Usage out of bounds: gpt-5: no model call of this model was recorded (cannot be checked).")
    partial = create_scorer("usage", {"total": {"reasoning": 10, "input": 10000}}).as_spec_check().score(two_models())
    assert (
        partial.passed is False
        and partial.reason == "Usage out of bounds: run reasoning: not recorded (cannot be checked)."
    )
    empty = create_scorer("usage", {"total": {"total_tokens": 10}}).as_spec_check().score(trace())
    assert empty.passed is False


def test_latency_spec_check_fails_on_unrecorded_durations() -> None:
    unmeasured = create_scorer("latency", {"max_seconds": 5}).as_spec_check().score(trace())
    assert unmeasured.passed is False and unmeasured.reason == "Cannot check latency: the run: duration not recorded."
    no_calls = create_scorer("latency", {"max_iteration_seconds": 5}).as_spec_check().score(trace())
    assert no_calls.passed is False and no_calls.reason is not None and "no model call was recorded" in no_calls.reason
    untouched = create_scorer("latency", {"max_tool_seconds": {"search": 1}}).as_spec_check().score(trace())
    assert untouched.passed is True


def test_usage_config_errors() -> None:
    with pytest.raises(InputError, match="unknown usage metric 'inptu'"):
        create_scorer("usage", {"total": {"inptu+output": 5}})
    with pytest.raises(InputError, match="min 10 is greater than max 5"):
        create_scorer("usage", {"per_model": {"m": {"input": {"min": 10, "max": 5}}}})
    assert create_scorer("usage").score(two_models()).passed is None


def test_latency_run_iteration_and_tool_bounds() -> None:
    slow_tool = call("search", start_time=T0, end_time=T0 + timedelta(seconds=4))
    actual = trace(
        slow_tool,
        call("book", start_time=T0, end_time=T0 + timedelta(seconds=1)),
        iterations=[iteration(0, seconds=2.0), iteration(1, seconds=0.5)],
        start_time=T0,
        end_time=T0 + timedelta(seconds=9),
    )
    assert create_scorer("latency", {"max_seconds": 10, "max_iteration_seconds": 2}).score(actual).passed is True
    score = create_scorer("latency", {"max_seconds": 5, "max_tool_seconds": {"search": 3}}).score(actual)
    assert score.passed is False
    assert score.reason == "Too slow: the run took 9.00s > max 5s; call #1 search took 4.00s > max 3s."
    assert create_scorer("latency", {"max_tool_seconds": 3.5}).score(actual).passed is False


def test_latency_not_applicable_when_unmeasured_or_unconfigured() -> None:
    assert create_scorer("latency", {"max_seconds": 5}).score(trace()).passed is None
    assert create_scorer("latency").score(trace()).passed is None


def test_price_lookup_prefers_the_longest_prefix() -> None:
    assert find_price("gpt-4o-mini-2024-07-18", DEFAULT_PRICES) is DEFAULT_PRICES["gpt-4o-mini"]
    assert find_price("openai/gpt-4o-2024-08-06", DEFAULT_PRICES) is DEFAULT_PRICES["gpt-4o"]
    assert find_price("claude-sonnet-4-5-20250929", DEFAULT_PRICES) is DEFAULT_PRICES["claude-sonnet-4-5"]
    assert find_price("gpt-4oo", DEFAULT_PRICES) is None
    assert find_price("my-local-llama", DEFAULT_PRICES) is None


def test_cost_from_usage_and_prices() -> None:
    its = [iteration(0, "gpt-4o", input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=200_000)]
    # 800k x 2.50 + 200k x 1.25 + 100k x 10.00 = 2.00 + 0.25 + 1.00 = $3.25
    score = create_scorer("cost", {"max_usd": 3.30}).score(trace(iterations=its))
    assert score.passed is True and score.details == {"usd": pytest.approx(3.25)}
    over = create_scorer("cost", {"max_usd": 3}).score(trace(iterations=its))
    assert over.passed is False and over.reason == "Cost estimated $3.2500 exceeds max $3."
    custom = {"gpt-4o": {"input_per_mtok": 1, "output_per_mtok": 1}}
    assert create_scorer("cost", {"prices": custom}).score(trace(iterations=its)).details == {"usd": pytest.approx(1.1)}


def test_cost_unknown_model_is_skipped_and_named_unless_fail() -> None:
    its = [iteration(0, "gpt-4o", input_tokens=1000, output_tokens=0), iteration(1, "my-llama", input_tokens=10)]
    # `skip` checks the priced calls and names the others (before: the whole scorer did not apply).
    skipped = create_scorer("cost", {"max_usd": 1}).score(trace(iterations=its))
    assert skipped.passed is True
    assert skipped.reason == "Cost estimated $0.0025 without 1 unpriced call(s): model call 1 (my-llama) within max $1."
    # With no call priced there is nothing to check: a spec check fails, a default does not apply.
    unpriced = trace(iterations=[iteration(0, "my-llama", input_tokens=10)])
    assert create_scorer("cost", {"max_usd": 1}).score(unpriced).passed is None
    nothing = create_scorer("cost", {"max_usd": 1}).as_spec_check().score(unpriced)
    assert nothing.passed is False and nothing.reason is not None and "`prices`" in nothing.reason
    assert create_scorer("cost", {"max_usd": 1, "unknown_model": "fail"}).score(trace(iterations=its)).passed is False
    assert create_scorer("cost", {"max_usd": 0.000001}).score(trace(iterations=its)).passed is False
    priced = create_scorer("cost", {"max_usd": 1, "prices": {"my-llama": {"input_per_mtok": 0, "output_per_mtok": 0}}})
    assert priced.score(trace(iterations=its)).passed is True


def test_cost_without_limit_or_model_calls() -> None:
    its = [iteration(0, "gpt-4o", input_tokens=1000, output_tokens=0)]
    report_only = create_scorer("cost").score(trace(iterations=its))
    assert report_only.passed is None and report_only.reason == "Cost estimated $0.0025 (no max_usd set)."
    assert create_scorer("cost", {"max_usd": 1}).score(trace()).passed is None
    no_calls = create_scorer("cost", {"max_usd": 1}).as_spec_check().score(trace())
    assert (
        no_calls.passed is False and no_calls.reason is not None and "No model calls were recorded" in no_calls.reason
    )
    with pytest.raises(InputError, match="unknown_model"):
        create_scorer("cost", {"unknown_model": "ignore"})


def test_estimate_cost_uses_the_runs_only_model_when_a_call_lacks_one() -> None:
    from evaltrace.evaluators.scoring.scorers.limits import estimate_cost

    its = [iteration(0, None, input_tokens=1_000_000, output_tokens=0)]
    assert estimate_cost(trace(iterations=its, models=["gpt-4o-mini"])).usd == pytest.approx(0.15)
    unknown = estimate_cost(trace(iterations=its, models=["a", "b"]))
    assert unknown.usd == 0.0 and unknown.unpriced == ["model call 0 (model not recorded)"]


def test_call_cost_prices_cache_reads_as_a_subset_of_input() -> None:
    from evaltrace.evaluators.scoring.scorers.prices import ModelPrice, call_cost

    price = ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.3)
    # OpenAI and the OTel conventions: 200k of the 1M input tokens came from the cache.
    subset = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=200_000)
    assert call_cost(subset, price) == pytest.approx(0.8 * 3.0 + 0.2 * 0.3 + 0.1 * 15.0)
    # Anthropic's counts passed through as reported: 100 uncached input tokens, 10,000 cache reads.
    apart = Usage(input_tokens=100, output_tokens=0, cache_read_tokens=10_000)
    assert call_cost(apart, price) == pytest.approx((100 * 3.0 + 10_000 * 0.3) / 1e6)
    # Without a cached price, cache reads cost the input price.
    plain = ModelPrice(input_per_mtok=1.0, output_per_mtok=1.0)
    assert call_cost(apart, plain) == pytest.approx(10_100 / 1e6)


def test_cost_scorer_and_run_cost_agree_when_cache_reads_exceed_input() -> None:
    from evaltrace.evaluators.engine.sample import RunStats
    from evaltrace.evaluators.scoring.scorers.limits import estimate_cost

    its = [iteration(0, "claude-sonnet-4", input_tokens=100, output_tokens=10, cache_read_tokens=10_000)]
    run = trace(iterations=its)
    expected = (100 * 3.0 + 10_000 * 0.30 + 10 * 15.0) / 1e6
    assert estimate_cost(run).usd == pytest.approx(expected)
    assert RunStats().add(run) == pytest.approx(expected)
    assert create_scorer("cost").score(run).details == {"usd": pytest.approx(expected)}
