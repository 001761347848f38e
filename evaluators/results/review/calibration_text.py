"""`evaltrace calibrate`'s table: per scorer, n, agreement, kappa and its interval, the matrix, disagreements.

Scorer names, ids and notes come from the store (recorded or typed by people): each line is laid
out inert by `inline` before it reaches a terminal.
"""

from __future__ import annotations

from evaltrace.collector.terminal import inline
from evaltrace.evaluators.results.review.calibration import MIN_GATED, Calibration, ScorerCalibration

MAX_LISTED = 20
"""Disagreeing entries listed per scorer (the JSON has them all)."""


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _scorer_lines(item: ScorerCalibration, min_kappa: float | None) -> list[str]:
    stats, m = item.stats, item.matrix
    kind = " (judge)" if item.judge else ""
    lines = [f"{item.title}{kind}: n={stats.n}"]
    if stats.n == 0:
        return [lines[0] + " (no labelled verdicts)"]
    interval = f" [{_number(stats.kappa_low)}, {_number(stats.kappa_high)}]" if stats.kappa is not None else ""
    undefined = " (undefined: one verdict only)" if stats.kappa is None else ""
    lines[0] += f", agreement {_number(stats.agreement)}, kappa {_number(stats.kappa)}{interval}{undefined}"
    if min_kappa is not None and item.below(min_kappa):
        lines[0] += f"  BELOW --min-kappa {min_kappa:g}"
    elif stats.n < MIN_GATED:
        lines[0] += f"  (fewer than {MIN_GATED} labels: not gated)"
    lines.append("            judge pass  judge fail")
    lines.append(f"  label pass {m.pass_pass:>10}  {m.pass_fail:>10}")
    lines.append(f"  label fail {m.fail_pass:>10}  {m.fail_fail:>10}")
    for d in item.disagreements[:MAX_LISTED]:
        note = f"  note: {d.note}" if d.note else ""
        lines.append(
            f"  differs: case {d.case_id or '-'} trace {d.trace_id}: label {d.label}, verdict {d.verdict}{note}"
        )
    if len(item.disagreements) > MAX_LISTED:
        lines.append(f"  ... {len(item.disagreements) - MAX_LISTED} more (see --json)")
    return lines


def render_text(result: Calibration, min_kappa: float | None) -> str:
    """The calibration as lines of text."""
    run = f"run {result.run_id}" if result.run_id else "each entry's latest stored verdict"
    lines = [f"{result.labels} labels in {result.store}, against {run}"]
    for item in result.scorers:
        lines += ["", *_scorer_lines(item, min_kappa)]
    return "".join(inline(line) + "\n" for line in lines)
