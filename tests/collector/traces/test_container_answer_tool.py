"""Structure rules met by CrewAI and smolagents, on OpenInference spans made with the real OTel SDK.

The whole-framework runs are in tests/frameworks/test_crewai.py and test_smolagents.py; these hold
the edges of each rule: a container holds exactly one run and calls nothing itself; an answer tool
ends the run only when called successfully in the last model call; an argument envelope is
unwrapped only when its keys are exactly the framework's and the model did not send that value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode

from evaltrace.collector.runfiles.spans import span_from_readable
from evaltrace.collector.traces.conventions.envelopes import unwrap_answer, unwrap_arguments
from evaltrace.collector.traces.rebuild import convert_spans
from evaltrace.collector.traces.records import Trace

TASK = "What's the weather in Paris?"


class Run:
    """Nested OpenInference spans made with a real tracer, converted on `traces()`."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("test")

    @contextmanager
    def span(self, name: str, kind: str, error: str | None = None, **attributes: Any) -> Iterator[None]:
        with self.tracer.start_as_current_span(name, attributes={"openinference.span.kind": kind, **attributes}) as s:
            yield
            if error is not None:
                s.set_status(Status(StatusCode.ERROR, error))

    def llm(self, *calls: tuple[str, dict[str, Any]], text: str | None = None, tokens: int = 10) -> None:
        attrs: dict[str, Any] = {
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": f"Current Task: {TASK} (templated)",
            "llm.output_messages.0.message.role": "assistant",
            "llm.token_count.prompt": tokens,
            "llm.token_count.completion": 1,
        }
        for k, (name, arguments) in enumerate(calls):
            prefix = f"llm.output_messages.0.message.tool_calls.{k}.tool_call"
            attrs[f"{prefix}.function.name"] = name
            attrs[f"{prefix}.function.arguments"] = json.dumps(arguments)
        if text is not None:
            attrs["llm.output_messages.0.message.content"] = text
        with self.span("ChatCompletion", "LLM", **attrs):
            pass

    def tool(self, name: str, arguments: Any, result: str, error: str | None = None) -> None:
        attrs = {"tool.name": name, "input.value": json.dumps(arguments), "output.value": result}
        with self.span(f"{name}.run", "TOOL", error, **attrs):
            pass

    def traces(self) -> list[Trace]:
        spans = [span_from_readable(s) for s in self.exporter.get_finished_spans()]
        return convert_spans(spans)


@pytest.fixture
def run() -> Iterator[Run]:
    maker = Run()
    yield maker
    maker.provider.shutdown()


CREW = {
    "crew_tasks": json.dumps([{"description": TASK, "expected_output": "A short answer.", "agent_role": "assistant"}]),
    "output.value": json.dumps({"raw": "18C in Paris.", "pydantic": None, "json_dict": None, "tasks_output": []}),
    "output.mime_type": "application/json",
}
TASK_OUTPUT = json.dumps({"description": TASK, "raw": "18C in Paris.", "pydantic": None, "json_dict": None})


def test_a_crew_around_one_agent_is_a_container_giving_the_prompt_and_answer(run: Run) -> None:
    with (
        run.span("Crew_1.kickoff", "CHAIN", **CREW),
        run.span("assistant._execute_core", "AGENT", **{"output.value": TASK_OUTPUT}),
    ):
        run.llm(("get_weather", {"city": "Paris"}), tokens=100)
        run.tool("get_weather", {"city": "Paris"}, "18C")
        run.llm(text="18C in Paris.", tokens=200)
    (trace,) = run.traces()
    assert trace.name == "assistant._execute_core"
    assert (trace.input, trace.output) == (TASK, "18C in Paris.")
    assert [(c.name, c.arguments, c.result) for c in trace.tool_calls] == [("get_weather", {"city": "Paris"}, "18C")]
    assert (len(trace.iterations), trace.usage.input_tokens) == (2, 300)


def test_a_crew_that_failed_around_a_finished_agent_gives_the_error(run: Run) -> None:
    with (
        run.span("Crew_1.kickoff", "CHAIN", error="crew failed", **CREW),
        run.span("assistant._execute_core", "AGENT", **{"output.value": TASK_OUTPUT}),
    ):
        run.llm(text="done")
    (trace,) = run.traces()
    assert trace.name == "assistant._execute_core"
    assert (trace.error, trace.status) == ("crew failed", "error")


def test_a_crew_of_two_agents_is_no_container_each_agent_is_a_child_run(run: Run) -> None:
    with run.span("Crew_1.kickoff", "CHAIN", **CREW):
        for role in ("researcher", "writer"):
            with run.span(f"{role}._execute_core", "AGENT", **{"output.value": TASK_OUTPUT}):
                run.llm(text=f"{role} done")
    (trace,) = run.traces()
    assert trace.name == "Crew_1.kickoff" and trace.input == TASK and trace.output == "18C in Paris."
    assert [(c.name, c.child is not None) for c in trace.tool_calls] == [
        ("researcher._execute_core", True),
        ("writer._execute_core", True),
    ]


def test_a_workflow_calling_a_model_itself_is_no_container(run: Run) -> None:
    with run.span("Crew_1.kickoff", "CHAIN", **CREW):
        run.llm(text="planning", tokens=7)
        with run.span("assistant._execute_core", "AGENT", **{"output.value": TASK_OUTPUT}):
            run.llm(text="done", tokens=100)
    (trace,) = run.traces()
    assert trace.name == "Crew_1.kickoff"
    assert trace.usage.input_tokens == 7  # the agent's model call is its child run's, not the workflow's


# --- answer tool --------------------------------------------------------------------------------


def test_final_answer_in_the_last_model_call_is_the_answer_not_a_call(run: Run) -> None:
    with run.span("ToolCallingAgent.run", "AGENT", **{"input.value": json.dumps({"task": TASK})}):
        run.llm(("get_weather", {"city": "Paris"}))
        run.tool("get_weather", {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "Paris"}}, "18C")
        run.llm(("final_answer", {"answer": "18C in Paris."}))
        run.tool(
            "final_answer",
            {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"answer": "18C in Paris."}},
            "18C in Paris.",
        )
    (trace,) = run.traces()
    assert (trace.input, trace.output) == (TASK, "18C in Paris.")  # no output.value: the answer tool gives it
    assert [(c.name, c.arguments) for c in trace.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert len(trace.iterations) == 2 and trace.iterations[-1].tool_calls == []


def test_a_failed_or_earlier_final_answer_stays_a_call(run: Run) -> None:
    with run.span("ToolCallingAgent.run", "AGENT", **{"input.value": json.dumps({"task": TASK})}):
        run.llm(("final_answer", {"answer": "too early"}))
        run.tool("final_answer", {"answer": "too early"}, "rejected", error="FinalAnswerCheck failed")
        run.llm(("final_answer", {"answer": "again"}))
        run.tool("final_answer", {"answer": "again"}, "again")
        run.llm(text="plain reply")
    (trace,) = run.traces()
    assert [(c.name, c.error is not None) for c in trace.tool_calls] == [
        ("final_answer", True),
        ("final_answer", False),
    ]
    assert trace.output == "plain reply"


# --- envelopes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "requested", "expected"),
    [
        ({"args": [], "sanitize_inputs_outputs": True, "kwargs": {"city": "Paris"}}, None, {"city": "Paris"}),
        ({"args": [{"city": "Paris"}], "sanitize_inputs_outputs": True, "kwargs": {}}, None, {"city": "Paris"}),
        # Positional arguments the envelope cannot name, or extra keys: kept as recorded.
        ({"args": ["Paris"], "sanitize_inputs_outputs": True, "kwargs": {}}, None, None),
        ({"args": [], "sanitize_inputs_outputs": True, "kwargs": {}, "other": 1}, None, None),
        # A tool whose parameters really are these names: the model sent exactly that value.
        (
            {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"a": 1}},
            {"args": [], "sanitize_inputs_outputs": True, "kwargs": {"a": 1}},
            None,
        ),
        ("plain text", None, None),
    ],
)
def test_smolagents_argument_envelope(recorded: Any, requested: Any, expected: Any) -> None:
    assert unwrap_arguments(recorded, requested) == (recorded if expected is None else expected)


def test_crewai_answer_envelope_needs_its_keys() -> None:
    assert unwrap_answer({"raw": "hi", "pydantic": None, "json_dict": None}) == "hi"
    assert unwrap_answer({"raw": "hi"}) is None
