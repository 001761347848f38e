"""The pytest plugin, run with pytester in subprocesses (the plugin sets the global tracer provider)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# `-p no:evaltrace` blocks the installed entry point so the module is loaded exactly once, whether
# or not this checkout's entry points are installed.
PLUGIN = ("-p", "no:evaltrace", "-p", "evaltrace.evaluators.runner.pytest_plugin", "-p", "no:cacheprovider")

AGENT = """
import json
from opentelemetry import trace

tracer = trace.get_tracer("tests.plugin_agent")

def agent(question, tools):
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "bot",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}]),
    }
    with tracer.start_as_current_span("invoke_agent bot", attributes=attributes) as span:
        for name, arguments in tools:
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.arguments": json.dumps(arguments),
            }
            with tracer.start_as_current_span("execute_tool " + name, attributes=tool):
                pass
        answer = "done: " + question
        span.set_attribute(
            "gen_ai.output.messages",
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
        )
        return answer
"""

EVAL_TEST = """
import pytest
from agent import agent

CASES = [("paris", "Paris"), ("tokyo", "Tokyo"), ("london", "London"), ("rome", "Rome"), ("oslo", "Oslo")]

@pytest.mark.evaltrace(confidence={confidence})
@pytest.mark.parametrize(("case", "city"), CASES, ids=[c for c, _ in CASES])
def test_weather(case, city, evaltrace_recorder):
    wrong = "Nowhere" if case == "oslo" else city  # the agent gets one case of five wrong
    with evaltrace_recorder(case_id=case) as run:
        agent("weather in " + city, [("get_weather", {{"city": wrong}})])
    run.trace.assert_tool_call("get_weather", {{"city": city}})
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(agent=AGENT)
    return pytester


def test_four_of_five_pass_at_confidence_0_8(project: pytest.Pytester) -> None:
    project.makepyfile(test_eval=EVAL_TEST.format(confidence=0.8))
    result = project.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=6)  # five cases and the group's gate item
    result.stdout.fnmatch_lines(
        [
            "*= evaltrace =*",
            "test_eval.py::test_weather: evaluation PASSED: pass rate 80.0% (4/5 cases passed every run) "
            ">= confidence 80.0%",
            "  passed paris (1/1 runs)",
            "  FAILED oslo (0/1 runs): AssertionError: no call of tool 'get_weather' has arguments including*",
        ]
    )


def test_four_of_five_fail_at_confidence_0_9(project: pytest.Pytester) -> None:
    project.makepyfile(test_eval=EVAL_TEST.format(confidence=0.9))
    result = project.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=5, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "FAILED test_eval.py::test_weather[[]evaltrace[]]*",
        ]
    )
    result.stdout.fnmatch_lines(["*evaluation FAILED: pass rate 80.0% (4/5 cases passed every run) < confidence 90.0%"])


REPEAT_TEST = """
import pytest

RUNS = {{"steady": 0, "flaky": 0}}

@pytest.mark.evaltrace(confidence={confidence}, repeat=4)
@pytest.mark.parametrize("case", ["steady", "flaky"])
def test_repeated(case):
    RUNS[case] += 1
    if case == "flaky":
        assert RUNS[case] % 2 == 0, "odd run"

def test_every_case_ran_four_times():
    assert RUNS == {{"steady": 4, "flaky": 4}}
"""


@pytest.mark.parametrize(("confidence", "gate_passes"), [(0.75, True), (0.8, False)])
def test_repeats_aggregate_per_case_then_mean(project: pytest.Pytester, confidence: float, gate_passes: bool) -> None:
    # steady passes 4/4 runs (1.0), flaky 2/4 (0.5): the group's pass rate is their mean, 0.75.
    project.makepyfile(test_repeat=REPEAT_TEST.format(confidence=confidence))
    result = project.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=4 if gate_passes else 3, failed=0 if gate_passes else 1)
    verdict = "PASSED" if gate_passes else "FAILED"
    relation = ">=" if gate_passes else "<"
    result.stdout.fnmatch_lines(
        [
            f"test_repeat.py::test_repeated: evaluation {verdict}: pass rate 75.0% (1/2 cases passed every run) "
            f"{relation} confidence {confidence:.1%}, 4 runs per case",
            "  passed steady (4/4 runs)",
            "  FAILED flaky (2/4 runs): AssertionError: odd run",
        ]
    )


def test_recorder_returns_the_trace_of_the_block(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_trace="""
        from agent import agent

        def test_tools(evaltrace_recorder):
            with evaltrace_recorder(case_id="trip") as run:
                answer = agent("plan a trip", [("get_weather", {"city": "Paris"}), ("book", {"seats": 2})])
            trace = run.trace
            assert [c.name for c in trace.tool_calls] == ["get_weather", "book"]
            assert [c.arguments for c in trace.tool_calls] == [{"city": "Paris"}, {"seats": 2}]
            trace.assert_tool_call("book", {"seats": 2.0})
            assert trace.input == "plan a trip"
            assert trace.final_answer() == answer
            assert trace.case_id == "trip"
            assert trace.status == "success"

        def test_blocks_are_separate(evaltrace_recorder):
            with evaltrace_recorder() as first:
                agent("one", [("a", {})])
            with evaltrace_recorder() as second:
                agent("two", [("b", {})])
            assert [c.name for c in first.trace.tool_calls] == ["a"]
            assert [c.name for c in second.trace.tool_calls] == ["b"]
            assert first.trace.trace_id != second.trace.trace_id
        """
    )
    result = project.runpytest_subprocess(*PLUGIN)
    result.assert_outcomes(passed=2)


def test_bad_marker_arguments_are_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.evaltrace(confidence=1.5)
        def test_x():
            pass
        """
    )
    result = pytester.runpytest_subprocess(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_x*@pytest.mark.evaltrace: confidence: Input should be less than or equal to 1*"]
    )
