"""The registry and the scorer boundary hold against custom scorers' mistakes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer, arun_scorer, run_scorer
from evaltrace.evaluators.scoring.scorers.registry import load_plugins, register, scorer_class

TRACE = Trace(trace_id="t1", output="hello")


class Returns(Scorer):
    """Returns whatever `answer` holds, to exercise the boundary."""

    name: ClassVar[str] = "t_custom_returns"
    answer: Any = None

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.answer  # type: ignore[no-any-return]


class Thing:
    def __str__(self) -> str:
        return "a thing"


def test_register_rejects_a_class_without_a_name() -> None:
    class Nameless(Scorer):
        def score(self, trace: Trace, case: Any | None = None) -> Score:
            return self.result(True)

    with pytest.raises(ValueError, match=r"^scorer class .*Nameless has no `name` \(a ClassVar\[str\]\)$"):
        register(Nameless)


def test_register_rejects_a_class_without_score() -> None:
    class Unfinished(Scorer):
        name: ClassVar[str] = "t_custom_unfinished"

    with pytest.raises(ValueError, match=r"^scorer class .*Unfinished does not implement score$"):
        register(Unfinished)  # type: ignore[type-abstract]


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (None, "scorer failed: TypeError: Returns.score returned NoneType, not a Score"),
        (True, "scorer failed: TypeError: Returns.score returned bool, not a Score"),
        (
            Score(scorer="x", passed=True, value=1.5),
            "scorer failed: ValueError: Returns.score gave value 1.5, outside [0, 1]",
        ),
        (
            Score(scorer="x", passed=True, value=-0.1),
            "scorer failed: ValueError: Returns.score gave value -0.1, outside [0, 1]",
        ),
    ],
)
def test_a_result_that_is_not_a_valid_score_is_an_error_result(answer: Any, message: str) -> None:
    for verdict in (run_scorer(Returns(answer=answer), TRACE), asyncio.run(arun_scorer(Returns(answer=answer), TRACE))):
        assert (verdict.passed, verdict.reason) == (False, message)
        assert verdict.error is not None


def test_details_the_report_cannot_encode_are_shown_as_text() -> None:
    score = Score(scorer="x", passed=True, value=1.0, details={"thing": Thing(), "ids": ("a", "b"), "n": 3})
    verdict = run_scorer(Returns(answer=score), TRACE)
    assert verdict.error is None and verdict.passed is True
    assert verdict.details == {"thing": "a thing", "ids": ["a", "b"], "n": 3}
    json.dumps(verdict.details)  # what the report writer needs
    plain = Score(scorer="x", passed=False, value=0.0, details={"n": 3})
    assert run_scorer(Returns(answer=plain), TRACE) is plain, "JSON-ready details are kept as they are"


@pytest.mark.usefixtures("isolated_registry")
def test_the_same_plugin_file_named_twice_loads_once(tmp_path: Path) -> None:
    plugin = tmp_path / "twice.py"
    plugin.write_text(
        "from typing import ClassVar\n"
        "from evaltrace.evaluators import Scorer, register\n"
        "@register\n"
        "class Twice(Scorer):\n"
        "    name: ClassVar[str] = 't_custom_twice'\n"
        "    def score(self, trace, case=None):\n"
        "        return self.result(True)\n",
        encoding="utf-8",
    )
    load_plugins([str(plugin), str(plugin)])  # running the file twice would register the name twice
    assert scorer_class("t_custom_twice").__name__ == "Twice"
