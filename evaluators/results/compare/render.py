"""The comparison as terminal text and as Markdown for a pull-request comment (HTML: `render_html.py`).

Run names, scorer names, case keys, configuration hashes and reasons come from the compared
reports (untrusted): in the terminal text each is one `collector.terminal.inline` fragment and every
line goes through `lines_text`, so none can start a line or a CI log command; the Markdown goes
through `markdown_text`, which makes it inert there.
"""

from __future__ import annotations

from collections.abc import Callable

from evaltrace.collector.terminal import inline, lines_text, plural
from evaltrace.evaluators.results.compare.model import CaseChange, Comparison, RateRow, StatDelta
from evaltrace.evaluators.results.report.markdown_writer import markdown_text

MAX_LISTED = 20
"""Regressions listed by name; the rest are counted."""
_MAX_REASON = 200
STAT_LABELS = {
    "latency_p50_seconds": "latency p50",
    "latency_p95_seconds": "latency p95",
    "input_tokens": "input tokens",
    "output_tokens": "output tokens",
    "cost_usd": "cost",
}


def render_text(comparison: Comparison) -> str:
    """The terminal summary: the rows' table, the regressions with NEW's reasons, the statistics, the verdict."""
    lines = [headline(comparison), ""]
    lines += _text_table(comparison.rows, comparison.confidence_level)
    lines += _text_changes(comparison)
    lines += [f"{STAT_LABELS[s.name]}: {stat_text(s)}" for s in comparison.stats if s.base is not None]
    changed = comparison.changed_scorers
    lines += [
        f"Changed scorer: {inline(c.scorer)} ({inline(configs_text(c.base))} -> {inline(configs_text(c.new))})"
        for c in changed
    ]
    lines.append(f"{status(comparison)}: {inline(comparison.verdict)}")
    return lines_text(lines)


def render_baseline(comparison: Comparison) -> str:
    """What `score --baseline` adds to the summary: the rows, the regressions and the verdict against REF."""
    lines = ["", f"Against the baseline {inline(comparison.base)}:"]
    lines += _text_table(comparison.rows, comparison.confidence_level)
    lines += _text_changes(comparison)
    changed = ", ".join(inline(c.scorer) for c in comparison.changed_scorers)
    if changed:
        lines.append(f"Scorers changed since the baseline (their results may differ for that reason): {changed}")
    lines.append(f"Baseline: {status(comparison)}: {inline(comparison.verdict)}")
    return lines_text(lines)


def render_markdown(comparison: Comparison) -> str:
    """The comparison as Markdown (a heading, the rows' table, the regressions, the statistics)."""
    lines = [f"## evaltrace compare: {markdown_heading(comparison)}", "", markdown_text(headline(comparison)), ""]
    level = f"{comparison.confidence_level:.0%} CI"
    lines += [f"| scorer | base | new | delta | {level} | p | test |", "|---|---:|---:|---:|---|---:|---|"]
    for row in comparison.rows:
        cells = [markdown_text(scorer_label(row)), *(cell.replace("|", "\\|") for cell in row_cells(row)[1:])]
        lines.append("| " + " | ".join(cells) + " |")
    if comparison.regressions:
        lines += ["", f"### Regressions: {changes_count(comparison.regressions)}", ""]
        lines += [f"- {_markdown_change(change)}" for change in comparison.regressions[:MAX_LISTED]]
        lines += _more(len(comparison.regressions))
    lines += _markdown_notes(comparison)
    lines += ["", f"**{status(comparison)}**: {markdown_text(comparison.verdict)}"]
    return "\n".join(lines) + "\n"


def status(comparison: Comparison) -> str:
    """`FAILED` (the comparison fails), `WARNING` (a case regressed, not significantly) or `OK` (none did)."""
    if comparison.regressed:
        return "FAILED"
    return "WARNING" if comparison.regressed_cases else "OK"


def markdown_heading(comparison: Comparison) -> str:
    """The heading's mark and words: success only when no case regressed."""
    count = plural(len(comparison.regressed_cases), "case")
    if comparison.regressed:
        return f"❌ regression ({count} regressed)" if comparison.regressed_cases else "❌ regression"
    if comparison.regressed_cases:
        return f"⚠️ {count} regressed (not significant at alpha={comparison.alpha:g})"
    return "✅ no regression"


def headline(comparison: Comparison) -> str:
    """Which runs are compared, how cases were matched, and whether the test is paired."""
    pairing = "paired" if comparison.rows and comparison.rows[0].paired else "unpaired (no case in common)"
    sides = f"Comparing {comparison.base} (base) with {comparison.new} (new)"
    return f"{sides}, matched by {comparison.matched_by}: {pairing}"


def _text_table(rows: list[RateRow], level: float) -> list[str]:
    header = ["scorer", "base", "new", "delta", f"{level:.0%} CI", "p", "test"]
    table = [header] + [[inline(scorer_label(row)), *row_cells(row)[1:]] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in table]


def row_cells(row: RateRow) -> list[str]:
    """A row as table cells: scorer, base and new rates, delta (`*` when significant), CI, p, test."""
    counts = f"{row.n_base} pairs" if row.paired else f"n {row.n_base}/{row.n_new}"
    ci = "-" if row.ci_low is None or row.ci_high is None else f"[{_pct(row.ci_low)}, {_pct(row.ci_high)}]"
    test = f"{'McNemar' if row.paired else 'z-test'}, {counts}"
    delta = _signed(row.delta) + (" *" if row.significant_regression else "")
    return [scorer_label(row), _rate(row.base_rate), _rate(row.new_rate), delta, ci, f"{row.p_value:.3g}", test]


def _text_changes(comparison: Comparison) -> list[str]:
    lines = [""]
    if comparison.regressions:
        lines.append(f"Regressions (passed -> failed), {changes_count(comparison.regressions)}:")
        lines += [f"  {_text_change(change)}" for change in comparison.regressions[:MAX_LISTED]]
        lines += _more(len(comparison.regressions))
    if comparison.fixes:
        lines.append(f"Fixes (failed -> passed): {inline(_names(comparison.fixes))}")
    if comparison.new_cases:
        lines.append(f"New cases (only in new): {inline(_list(comparison.new_cases))}")
    if comparison.missing_cases:
        lines.append(f"Missing cases (only in base): {inline(_list(comparison.missing_cases))}")
    return lines


def changes_count(changes: list[CaseChange]) -> str:
    """`7 cases (14 outcomes)`: the cases, each once, and their outcome and scorer changes when more."""
    cases = plural(len({change.key for change in changes}), "case")
    return cases if len(changes) == len({c.key for c in changes}) else f"{cases} ({plural(len(changes), 'outcome')})"


def _text_change(change: CaseChange) -> str:
    what = "entry" if change.scorer is None else change.scorer
    reason = inline(" ".join((change.reason or "no reason given").split()))
    return f"{inline(change.key)}  {inline(what)}: {reason[:_MAX_REASON]}"


def _markdown_change(change: CaseChange) -> str:
    what = "entry" if change.scorer is None else change.scorer
    reason = markdown_text(change.reason or "no reason given", _MAX_REASON)
    return f"`{markdown_text(change.key).replace('`', '')}` {markdown_text(what)}: {reason}"


def _markdown_notes(comparison: Comparison) -> list[str]:
    notes = []
    if comparison.fixes:
        notes.append(f"- Fixes: {markdown_text(_names(comparison.fixes))}")
    if comparison.new_cases:
        notes.append(f"- New cases: {markdown_text(_list(comparison.new_cases))}")
    if comparison.missing_cases:
        notes.append(f"- Missing cases: {markdown_text(_list(comparison.missing_cases))}")
    notes += [f"- {STAT_LABELS[s.name]}: {markdown_text(stat_text(s))}" for s in comparison.stats if s.base is not None]
    notes += [f"- Changed scorer: {markdown_text(c.scorer)}" for c in comparison.changed_scorers]
    return ["", *notes] if notes else []


def _names(changes: list[CaseChange]) -> str:
    return _list([c.key if c.scorer is None else f"{c.key} ({c.scorer})" for c in changes])


def _list(keys: list[str]) -> str:
    shown = ", ".join(keys[:MAX_LISTED])
    return shown + (f" and {len(keys) - MAX_LISTED} more" if len(keys) > MAX_LISTED else "")


def _more(count: int) -> list[str]:
    return [f"  ... and {plural(count - MAX_LISTED, 'more regression')}"] if count > MAX_LISTED else []


def scorer_label(row: RateRow) -> str:
    """The row's scorer, or `(entries)` for the entries' outcome."""
    return "(entries)" if row.scorer is None else row.scorer


def stat_text(stat: StatDelta) -> str:
    """`base -> new (delta, relative)` of one statistic, each value with its unit (ms or s, $, tokens)."""
    shown = _UNITS[stat.name]
    if stat.base is None or stat.new is None or stat.delta is None:
        return f"{_or_na(shown, stat.base)} -> {_or_na(shown, stat.new)}"
    relative = "" if stat.relative is None else f", {stat.relative:+.1%}"
    sign = "+" if stat.delta >= 0 else "-"
    return f"{shown(stat.base)} -> {shown(stat.new)} ({sign}{shown(abs(stat.delta))}{relative})"


def seconds_text(value: float) -> str:
    """A time with its unit: milliseconds below a second (`850 ms`, `1.24 ms`), seconds from there (`2.35 s`)."""
    return f"{value * 1000:.3g} ms" if abs(value) < 1 else f"{value:,.2f} s"


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.4g}"


def _usd(value: float) -> str:
    return f"${value:,.4f}"


_UNITS: dict[str, Callable[[float], str]] = {
    "latency_p50_seconds": seconds_text,
    "latency_p95_seconds": seconds_text,
    "input_tokens": _number,
    "output_tokens": _number,
    "cost_usd": _usd,
}


def _or_na(shown: Callable[[float], str], value: float | None) -> str:
    return "n/a" if value is None else shown(value)


def configs_text(configs: list[str]) -> str:
    """Config hashes as a list, or `none`."""
    return ", ".join(configs) or "none"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _signed(value: float | None) -> str:
    return "-" if value is None else _pct(value)
