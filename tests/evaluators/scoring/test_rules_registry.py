from __future__ import annotations

import pytest
from _rule_traces import call, iteration, schema, trace
from rule_scorer_names import RULE_SCORERS

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring.scorers.base import run_scorer
from evaltrace.evaluators.scoring.scorers.registry import create_scorer

ODD = trace(
    call("search", '{"q": "tru', arguments_truncated=True, result=None),
    ToolCall(name="search", arguments=None, result={"error": {"code": 500}}),
    call("get", [1, 2], result=["a", 3]),
    tool_schemas=[schema("search", {"type": "object"}), schema("get", None, "")],
    iterations=[iteration(0, None), iteration(1, "unknown-model", input_tokens=5)],
    output=None,
    status="unknown",
)


@pytest.mark.parametrize("name", RULE_SCORERS)
@pytest.mark.parametrize("actual", [trace(), ODD], ids=["empty", "odd"])
def test_default_rule_scorers_never_raise(name: str, actual: Trace) -> None:
    scorer = create_scorer(name)
    score = run_scorer(scorer, actual)
    assert score.error is None, score.reason
    assert score.scorer == name
    assert score.value is None or 0.0 <= score.value <= 1.0
    assert score.reason, "every verdict carries a reason"


@pytest.mark.parametrize("name", RULE_SCORERS)
def test_config_hash_is_stable(name: str) -> None:
    assert create_scorer(name).config_hash() == create_scorer(name).config_hash()
