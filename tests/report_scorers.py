"""Plugin scorers for the report-format tests: one that errors, one that never applies, one quoting the answer.

Loaded by file (`--plugin tests/report_scorers.py` in the CLI tests, `load_plugins` in process).
"""

from __future__ import annotations

from typing import Any, ClassVar

from evaltrace.collector import Trace
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register


@register
class ReportBoom(Scorer):
    """Raises, so its result is an error."""

    name: ClassVar[str] = "t_report_boom"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        raise RuntimeError("scorer blew up <b>&</b>")


@register
class ReportNotApplicable(Scorer):
    """Never applies."""

    name: ClassVar[str] = "t_report_na"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.result(None, reason="does not apply")


@register
class ReportEcho(Scorer):
    """Fails, quoting the recorded answer whole in its reason (as a judge's reason may)."""

    name: ClassVar[str] = "t_report_echo"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.result(False, 0.0, f"the answer was: {trace.output}")
