"""The `anthropic` SDK in a hand-written tool loop, recorded for real on each of its three routes.

Routes: the SDK's own spans alone; OpenInference's `openinference-instrumentation-anthropic`; and
OpenLLMetry's `opentelemetry-instrumentation-anthropic`. Each instrumentation registers its
instrumentor as `anthropic` on `opentelemetry-instrument`'s entry point, so each has a venv of
its own. The SDK's own spans stay on in every route, as the SDK ships (content switched on with
`ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content`), so two spans describe each model call in
the instrumented routes: OpenInference's around the SDK's, OpenLLMetry's beside it. The model is
`FakeLLM`'s Messages API on 127.0.0.1.

Two ways the loop is recorded: each tool inside `evaltrace.collector.tool_call` (the README's
recipe), and with no tool spans at all, when every call, result and error is read from the model
spans. A failing tool's `tool_result` block carries `is_error: true`: only OpenInference's spans
keep it (in the raw request), so only there is the call an error without a tool span.
"""

from __future__ import annotations

from pathlib import Path

import harness
import pytest
from _venvs import cached_venv
from fake_llm import call, text_turn, tool_turn
from harness import ANSWERS, PROMPTS, SCENARIOS, Recorded, assert_facts, check_readme_recipe, record

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.scorers.outcome import trace_outcome

SDK = "anthropic==2.10.0"
ROUTES: dict[str, tuple[str, ...]] = {
    "sdk": (SDK,),
    "openinference": (SDK, "openinference-instrumentation-anthropic==3.1.0"),
    "openllmetry": (SDK, "opentelemetry-instrumentation-anthropic==0.62.4"),
}
VENV_NAMES = {"sdk": "anthropic", "openinference": "anthropic_openinference", "openllmetry": "anthropic_openllmetry"}
APP = "anthropic_app.py"


@pytest.fixture(scope="module", params=list(ROUTES))
def route(request: pytest.FixtureRequest) -> tuple[str, Path]:
    """A route's name and the interpreter of its cached venv."""
    name: str = request.param
    return name, cached_venv(harness.VENVS / VENV_NAMES[name], ROUTES[name], with_evaltrace=True)


def _one_iteration_per_call(route: str, trace: Trace, recorded: Recorded) -> None:
    """Each model call is one iteration; the instrumented routes' second span of it is merged, not counted."""
    assert len(trace.iterations) == recorded.model_calls
    for iteration in trace.iterations:
        assert len(iteration.merged_span_ids) == (0 if route == "sdk" else 1), iteration
    reasons = [iteration.stop_reason for iteration in trace.iterations]
    assert reasons == ["tool_call"] * (len(reasons) - 1) + ["stop"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_anthropic_rebuilds_every_fact(route: tuple[str, Path], scenario: str, tmp_path: Path) -> None:
    """With tool spans: input, calls (arguments, results, errors), answer, usage, iterations and stops, exact."""
    name, python = route
    recorded = record(python, APP, scenario, tmp_path)
    assert_facts(recorded, PROMPTS[scenario])
    (trace,) = recorded.traces
    _one_iteration_per_call(name, trace, recorded)
    assert trace.status == "success"
    if name == "openinference":  # it records each call under two attribute families: read once
        assert [it.duplicate_call_ids for it in trace.iterations] == [
            [c.call_id for c in it.tool_calls] for it in trace.iterations
        ]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_anthropic_from_model_spans_alone(route: tuple[str, Path], scenario: str, tmp_path: Path) -> None:
    """Without tool spans the calls come from the model spans: results as the model was told, errors where recorded."""
    name, python = route
    recorded = record(python, APP, scenario, tmp_path, TOOL_SPANS="0")
    (trace,) = recorded.traces
    assert (trace.input, trace.output) == (PROMPTS[scenario], ANSWERS[scenario])
    assert recorded.answer == ANSWERS[scenario]
    got = [(c.name, c.arguments, c.result, c.error) for c in trace.tool_calls]
    want = []
    for tool in recorded.tools:
        told = tool["result"] if tool["error"] is None else f"Tool error: {tool['error']!r}"
        # Only OpenInference keeps the `is_error` of the tool_result block (in its raw request).
        error = told if tool["error"] is not None and name == "openinference" else None
        want.append((tool["name"], tool["arguments"], told, error))
    assert got == want
    assert all(c.span_id is None for c in trace.tool_calls)
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == recorded.usage
    _one_iteration_per_call(name, trace, recorded)


def test_anthropic_reply_cut_at_max_tokens_is_a_failure(route: tuple[str, Path], tmp_path: Path) -> None:
    """A reply stopped by `max_tokens` is read as cut by the length limit: the run's outcome is a failure."""
    _, python = route
    script = [tool_turn(call("get_weather", {"city": "Paris"})), text_turn("Paris: 18C and", stop_reason="max_tokens")]
    recorded = record(python, APP, "no_tool", tmp_path, script=script)
    (trace,) = recorded.traces
    assert [it.stop_reason for it in trace.iterations] == ["tool_call", "length"]
    assert "max_tokens" in trace.iterations[-1].finish_reasons or "length" in trace.iterations[-1].finish_reasons
    assert trace_outcome(trace)[0] == "failure"


def test_anthropic_recipe_as_written(tmp_path: Path) -> None:
    """The README recipe, run as written in a venv with its pinned packages, rebuilds the whole run."""
    python = cached_venv(harness.VENVS / VENV_NAMES["sdk"], ROUTES["sdk"], with_evaltrace=True)
    check_readme_recipe("anthropic", python, tmp_path, ROUTES["sdk"])
