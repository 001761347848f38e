"""The comparison's verdict counts regressed cases once each and never reads as success while one regressed.

Issue 29's case: four cases, one of which went from passed to failed (its outcome and three scorers),
used to read "OK: no significant regression ... (4 case outcome(s) regressed)" under a ✅ heading.
"""

from __future__ import annotations

import pytest

from evaltrace.evaluators.results.compare.comparison import CompareOptions, compare_sides
from evaltrace.evaluators.results.compare.render import markdown_heading, render_markdown, render_text, status
from evaltrace.evaluators.results.compare.sides import Outcome, RunStats, Side, SideEntry

SCORERS = ("output", "trajectory", "judge")


def _side(label: str, failing: set[str]) -> Side:
    entries = []
    for case in ("a", "b", "c", "d"):
        passed = case not in failing
        scorers = {name: Outcome(passed, None if passed else f"{name} failed") for name in SCORERS}
        entries.append(SideEntry(case, f"trace-{label}-{case}", Outcome(passed), scorers))
    return Side(label, entries, {(name, 1, "h") for name in SCORERS}, RunStats(latency_p50_seconds=0.25))


def test_one_case_regressed_on_four_rows_is_one_case_and_a_warning() -> None:
    comparison = compare_sides(_side("base", set()), _side("new", {"c"}), CompareOptions())
    assert len(comparison.regressions) == 4  # the entry and its three scorers
    assert comparison.regressed_cases == ["c"]
    assert not comparison.regressed  # McNemar p = 1.0 for one discordant pair
    assert comparison.verdict == "1 case regressed (not significant at alpha=0.05)"
    assert status(comparison) == "WARNING"
    assert render_text(comparison).splitlines()[-1] == "WARNING: 1 case regressed (not significant at alpha=0.05)"
    markdown = render_markdown(comparison)
    assert markdown.startswith("## evaltrace compare: ⚠️ 1 case regressed (not significant at alpha=0.05)\n")
    assert "✅" not in markdown and "**OK**" not in markdown


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_strict_fails_on_one_regressed_case_at_any_alpha(alpha: float) -> None:
    comparison = compare_sides(_side("base", set()), _side("new", {"c"}), CompareOptions(alpha=alpha, strict=True))
    assert comparison.regressed and status(comparison) == "FAILED"
    assert comparison.verdict == "REGRESSION (--strict): 1 case went from passed to failed"
    assert markdown_heading(comparison) == "❌ regression (1 case regressed)"


def test_no_regressed_case_is_ok_and_a_fix_is_not_a_regression() -> None:
    comparison = compare_sides(_side("base", {"b"}), _side("new", set()), CompareOptions(strict=True))
    assert (comparison.regressed_cases, comparison.regressed, comparison.verdict) == ([], False, "no regression")
    assert markdown_heading(comparison) == "✅ no regression"
    assert render_text(comparison).splitlines()[-1] == "OK: no regression"
