"""`evaltrace compare --html`: the comparison as one self-contained page.

Nothing is fetched and nothing runs: the style is inline, the chart is inline SVG, and a
Content-Security-Policy allows nothing else. Reasons, case ids, scorer names and run references
come from reports or the store and may quote recorded content, so every text goes through `text`
(control characters made visible, then HTML-escaped); numbers are formatted here.
"""

from __future__ import annotations

import html

from evaltrace.collector.terminal import printable
from evaltrace.evaluators.results.compare.model import CaseChange, Comparison, RateRow
from evaltrace.evaluators.results.compare.render import (
    STAT_LABELS,
    changes_count,
    configs_text,
    headline,
    row_cells,
    scorer_label,
    stat_text,
    status,
)

MAX_CHANGES = 500
"""Regressions and fixes listed on the page; the rest are counted (`--json` has them all)."""
_MAX_REASON = 2000
_CSP = "default-src 'none'; style-src 'unsafe-inline'"
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1f2328; max-width: 72em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin: 1.6em 0 0.4em; }
table { border-collapse: collapse; } td, th { border: 1px solid #d0d7de; padding: 2px 8px; text-align: left; }
td.num { text-align: right; } .bad { color: #cf222e; } .good { color: #1a7f37; } .warn { color: #9a6700; }
.verdict { font-weight: 600; font-size: 1.1em; } .base { fill: #8c959f; } .new { fill: #0969da; }
.axis { fill: #57606a; font-size: 11px; } .reason { white-space: pre-wrap; }
"""
_BAR_HEIGHT, _LABEL_WIDTH, _BAR_WIDTH = 9, 200, 360


def render_html(comparison: Comparison) -> str:
    """The whole page: verdict, the rows' table and chart, regressions, fixes, cases, statistics."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        "<title>evaltrace compare</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>evaltrace compare</h1>",
        f"<p>{text(headline(comparison))}</p>",
        _verdict(comparison),
        *_rows_table(comparison),
        _chart(comparison.rows),
        *_changes("Regressions (passed → failed)", comparison.regressions, "bad"),
        *_changes("Fixes (failed → passed)", comparison.fixes, "good"),
        *_cases(comparison),
        *_stats(comparison),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def text(value: object) -> str:
    """Report or store content as inert HTML text (also safe inside a quoted attribute)."""
    return html.escape(printable(str(value)), quote=True)


def _verdict(comparison: Comparison) -> str:
    label = status(comparison)
    css = {"FAILED": "bad", "WARNING": "warn"}.get(label, "good")
    return f'<p class="verdict {css}">{label}: {text(comparison.verdict)}</p>'


def _rows_table(comparison: Comparison) -> list[str]:
    level = f"{comparison.confidence_level:.0%} CI"
    head = "".join(f"<th>{text(h)}</th>" for h in ("scorer", "base", "new", "delta", level, "p", "test"))
    rows = [f"<h2>Pass rates</h2><table><tr>{head}</tr>"]
    for row in comparison.rows:
        css = ' class="bad"' if row.significant_regression else ""
        cells = "".join(f'<td class="num">{text(cell)}</td>' for cell in row_cells(row)[1:])
        rows.append(f"<tr{css}><td>{text(scorer_label(row))}</td>{cells}</tr>")
    rows.append("</table>")
    return rows


def _chart(rows: list[RateRow]) -> str:
    """Base (grey) and new (blue) pass rate of each row as a pair of horizontal bars."""
    height = len(rows) * (2 * _BAR_HEIGHT + 8) + 20
    width = _LABEL_WIDTH + _BAR_WIDTH + 60
    parts = [f'<svg width="{width}" height="{height}" role="img" aria-label="pass rates, base and new">']
    for index, row in enumerate(rows):
        top = index * (2 * _BAR_HEIGHT + 8)
        label = text(scorer_label(row))
        parts.append(f'<text class="axis" x="0" y="{top + _BAR_HEIGHT + 4}">{label}</text>')
        for offset, rate, css in ((0, row.base_rate, "base"), (_BAR_HEIGHT, row.new_rate, "new")):
            length = 0.0 if rate is None else rate * _BAR_WIDTH
            y = top + offset
            parts.append(
                f'<rect class="{css}" x="{_LABEL_WIDTH}" y="{y}" width="{length:.1f}" height="{_BAR_HEIGHT}"/>'
            )
            shown = "-" if rate is None else f"{rate:.0%}"
            parts.append(
                f'<text class="axis" x="{_LABEL_WIDTH + length + 4:.1f}" y="{y + _BAR_HEIGHT - 1}">{shown}</text>'
            )
    legend_y = height - 4
    parts.append(f'<text class="axis" x="{_LABEL_WIDTH}" y="{legend_y}">grey: base, blue: new</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def _changes(title: str, changes: list[CaseChange], css: str) -> list[str]:
    if not changes:
        return []
    parts = [
        f"<h2>{text(title)}: {text(changes_count(changes))}</h2>",
        "<table><tr><th>case</th><th>scorer</th><th>reason (new)</th></tr>",
    ]
    for change in changes[:MAX_CHANGES]:
        what = "entry" if change.scorer is None else change.scorer
        reason = (change.reason or "no reason given")[:_MAX_REASON]
        parts.append(
            f'<tr class="{css}"><td>{text(change.key)}</td><td>{text(what)}</td>'
            f'<td class="reason">{text(reason)}</td></tr>'
        )
    parts.append("</table>")
    if len(changes) > MAX_CHANGES:
        parts.append(f"<p>… and {len(changes) - MAX_CHANGES} more (all of them are in --json).</p>")
    return parts


def _cases(comparison: Comparison) -> list[str]:
    parts = []
    for title, keys in (
        ("New cases (only in new)", comparison.new_cases),
        ("Missing cases (only in base)", comparison.missing_cases),
    ):
        if keys:
            shown = ", ".join(text(key) for key in keys[:MAX_CHANGES])
            more = f" and {len(keys) - MAX_CHANGES} more" if len(keys) > MAX_CHANGES else ""
            parts.append(f"<h2>{text(title)}: {len(keys)}</h2><p>{shown}{more}</p>")
    return parts


def _stats(comparison: Comparison) -> list[str]:
    items = [
        f"<li>{text(STAT_LABELS[s.name])}: {text(stat_text(s))}</li>" for s in comparison.stats if s.base is not None
    ]
    items += [
        f"<li>Changed scorer: {text(c.scorer)} ({text(configs_text(c.base))} → {text(configs_text(c.new))})</li>"
        for c in comparison.changed_scorers
    ]
    return ["<h2>Statistics and scorers</h2><ul>", *items, "</ul>"] if items else []
