"""Hostile spec content and runaway scorers end as one-line errors through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import evaltrace
from test_score import GOOD, record


def test_unhashable_yaml_key_is_a_one_line_error_and_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "evals.yaml"
    spec.write_text("cases:\n  - id: a\n    input: x\n    ? [a, b]\n    : 1\n", encoding="utf-8")
    result = evaltrace("score", tmp_path, "--spec", spec)
    assert result.returncode == 2
    assert result.stderr.strip() == f"Error: {spec}: line 4, column 7: invalid YAML: found unhashable key"
    assert "Traceback" not in result.stderr + result.stdout


PLUGIN = """
from typing import Any, ClassVar

from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register


@register
class Forever(Scorer):
    name: ClassVar[str] = "loops_forever"

    def score(self, trace: Any, case: Any = None) -> Score:
        while True:
            pass
"""


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_scorer_that_never_returns_is_stopped_at_the_scorer_timeout(tmp_path: Path, workers: str) -> None:
    runs = record(tmp_path / "runs", GOOD)
    (tmp_path / "forever.py").write_text(PLUGIN, encoding="utf-8")
    spec = tmp_path / "evals.yaml"
    spec.write_text(
        "scorers: [loops_forever]\ncases:\n  - {id: rome, input: anything}\n"
        '  - {id: paris, input: "What\'s the weather in Paris?"}\n',
        encoding="utf-8",
    )
    report = tmp_path / "report.json"
    result = evaltrace(
        "score", runs, "--spec", spec, "--plugin", "forever.py", "--scorer-timeout", "0.5",
        "--workers", workers, "--json", report, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # the gate failed: the run itself went on to the end
    scores = [s for e in json.loads(report.read_text())["entries"] for sample in e["samples"] for s in sample["scores"]]
    assert len(scores) == 2
    for score in scores:
        assert (score["scorer"], score["passed"], score["error"]) == ("loops_forever", False, "ScorerTimeout")
        assert "'loops_forever' ran past its time limit of 0.5 s" in score["reason"]
    assert "loops_forever" in result.stdout
