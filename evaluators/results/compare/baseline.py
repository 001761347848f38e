"""`score --baseline REF`: the scoring compared with REF as it finishes, before its reports are written.

`BaselineCheck` is a report writer standing in front of the others: it keeps each entry's outcomes
(not its samples, so no JSON file is needed), and at `finish` compares them with REF and hands the
report on with the result in `Report.baseline`, so the JSON report and the Markdown summary say how
many cases regressed.
"""

from __future__ import annotations

from evaltrace.evaluators.results.compare.comparison import CompareOptions, compare_sides
from evaltrace.evaluators.results.compare.model import Comparison
from evaltrace.evaluators.results.compare.sides import Side, SideEntry, report_entry, side_from_report
from evaltrace.evaluators.results.report.model import BaselineResult, Report
from evaltrace.evaluators.results.report.writer import ReportEntry, ReportFormat


class BaselineCheck:
    """A `ReportFormat` comparing the scoring with `baseline`, then finishing `then` (if any) with the result."""

    def __init__(self, baseline: Side, options: CompareOptions, then: ReportFormat | None) -> None:
        self._baseline = baseline
        self._options = options
        self._then = then
        self._entries: list[SideEntry] = []
        self.comparison: Comparison | None = None
        """Set by `finish`."""

    def add(self, entry: ReportEntry) -> None:
        """Keep the entry's outcomes and pass it on."""
        self._entries.append(report_entry(entry.result()))
        if self._then is not None:
            self._then.add(entry)

    def finish(self, report: Report) -> None:
        """Compare with the baseline, then finish the other writers with the comparison in the report."""
        scored = side_from_report("this scoring", report, self._entries)
        self.comparison = compare_sides(self._baseline, scored, self._options)
        if self._then is not None:
            self._then.finish(report.model_copy(update={"baseline": baseline_result(self.comparison)}))

    def abort(self) -> None:
        """Drop the other writers' unfinished outputs."""
        if self._then is not None:
            self._then.abort()


def baseline_result(comparison: Comparison) -> BaselineResult:
    """What the report keeps of the comparison: REF, the settings, the regressed cases and the verdict."""
    return BaselineResult(
        ref=comparison.base,
        alpha=comparison.alpha,
        strict=comparison.strict,
        regressed=comparison.regressed,
        regressed_cases=comparison.regressed_cases,
        verdict=comparison.verdict,
    )
