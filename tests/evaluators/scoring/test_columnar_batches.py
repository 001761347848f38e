"""The batch forms decide a batch's rows at once: each row's own answer, one `Score` object for rows alike.

The engine's keep step (`_routers.keep_rows`) makes each distinct score's JSON once by object: rows
whose answers are equal passes get the same object, within a batch and across the run's batches.
"""

from __future__ import annotations

from typing import Any

from _columnar_check import batch_form, check_own

from evaltrace.collector.traces.records import Iteration, Message, MessagePart, ToolCall, ToolSchema, Trace, Usage
from evaltrace.collector.traces.table import to_table
from evaltrace.evaluators.scoring.columns import BatchCalls, ask_rows
from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.scorers.calls import ToolEfficiency, ToolErrors
from evaltrace.evaluators.scoring.scorers.limits import UsageLimits
from evaltrace.evaluators.scoring.scorers.output import Outcome, Output
from evaltrace.evaluators.scoring.scorers.tools import ToolCallValidity
from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory

_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def _trace(number: int, calls: list[tuple[str, dict[str, Any]]], output: str = "Paris is sunny") -> Trace:
    reply = Message(role="assistant", parts=[MessagePart(type="text", text=output)])
    return Trace(
        trace_id=f"{number + 1:032x}",
        status="success",
        output=output,
        tool_calls=[ToolCall(name=name, arguments=arguments, result={"ok": True}) for name, arguments in calls],
        tool_schemas=[ToolSchema(name=name, parameters=_SCHEMA) for name in ("weather", "flights")],
        iterations=[Iteration(index=0, output_messages=[reply], stop_reason="stop")],
        usage=Usage(input_tokens=100 + number, output_tokens=20),
    )


def _asked(traces: list[Trace], scorers: list[Scorer]) -> list[Any]:
    batch = BatchCalls(to_table(traces).to_batches()[0])
    rows = [index for _, index in batch.rows()]
    return batch_form(scorers[0])(scorers, batch, rows)


def _alike_traces() -> list[Trace]:
    calls = [("weather", {"city": "Paris"}), ("flights", {"city": "Lima"})]
    return [_trace(number, calls) for number in range(4)]


def test_rows_alike_share_one_score_object() -> None:
    scorers: list[Scorer] = [
        ToolErrors(),
        ToolEfficiency(),
        ToolCallValidity(),
        UsageLimits.model_validate({"total": {"total_tokens": {"max": 1000}}}),
        Outcome(),
        Output(contains="Paris"),
        Trajectory.model_validate({"expected": [{"name": "weather", "arguments": {"city": "Paris"}}]}),
    ]
    traces = _alike_traces()
    for scorer in scorers:
        found = _asked(traces, [scorer] * len(traces))
        assert found[0] is not None and found[0].passed, scorer.name
        assert all(score is found[0] for score in found), scorer.name
        assert _asked(traces, [scorer] * len(traces))[0] is found[0], scorer.name  # the next batch's too


def test_cases_interleaved_in_a_batch_get_their_own_scorers_answers() -> None:
    # Two cases' scorers of one class, their rows interleaved: each row answered with its own case's configuration.
    traces = _alike_traces()
    wanted = [
        Trajectory.model_validate({"expected": [{"name": name, "arguments": {"city": city}}], "mode": "superset"})
        for name, city in (("weather", "Paris"), ("flights", "Oslo"))
    ]
    found = check_own([(trace, wanted[number % 2]) for number, trace in enumerate(traces)])
    assert [score is not None and score.passed for score in found] == [True, False, True, False]
    usage = [UsageLimits.model_validate({"total": {"input": {"max": limit}}}) for limit in (1000, 100)]
    found = check_own([(trace, usage[number % 2]) for number, trace in enumerate(traces)])
    assert [score is not None for score in found] == [True, False, True, False]  # rows 1 and 3: 101, 103 tokens


def test_failures_alike_in_names_and_matches_keep_their_own_reasons() -> None:
    # The two rows make the same calls by name, each missing the expected one: its reason quotes its arguments.
    scorer = Trajectory.model_validate({"expected": [{"name": "weather", "arguments": {"city": "Paris"}}]})
    traces = [_trace(number, [("weather", {"city": city}), ("flights", {})]) for number, city in enumerate("AB")]
    batch = BatchCalls(to_table(traces).to_batches()[0])
    found = ask_rows([scorer, scorer], batch, [index for _, index in batch.rows()])
    assert [score.passed for score in found] == [False, False]
    assert "'A'" in str(found[0].reason) and "'B'" in str(found[1].reason)
    check_own([(trace, scorer) for trace in traces])
