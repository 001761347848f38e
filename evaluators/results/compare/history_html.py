"""`evaltrace history --html`: one self-contained page with a line chart of pass rates per scorer.

Nothing is fetched: the style is inline and each chart is inline SVG (no script, no font, no
link). Scorer names, spec paths and run ids are store content and may hold anything: every text
goes through `text` (control characters made visible, then HTML-escaped), and numbers are
formatted by this module. A scorer's line is broken where its version or configuration changed
(a dashed rule marks the run) and where it has no rate, so no trend is drawn across a change.
The x axis is the runs in order, each tick labelled with its run's start (date, then time, UTC).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from evaltrace.evaluators.results.compare.history import History, RunPoint
from evaltrace.evaluators.results.compare.history_render import Row, rows_of
from evaltrace.evaluators.results.compare.render_html import text

_WIDTH, _HEIGHT = 640, 214
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 16, 14, 58
_MAX_TICKS = 7
"""Dated ticks under the x axis at most (a label is about 70 pixels wide)."""
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1f2328; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin: 1.6em 0 0.3em; }
svg { display: block; } .grid { stroke: #d0d7de; } .axis { fill: #57606a; font-size: 11px; }
.line { fill: none; stroke: #0969da; stroke-width: 2; } .dot { fill: #0969da; }
.change { stroke: #cf222e; stroke-dasharray: 4 3; } .note { fill: #cf222e; font-size: 11px; }
table { border-collapse: collapse; } td, th { border: 1px solid #d0d7de; padding: 2px 8px; text-align: left; }
.failed { color: #cf222e; } .passed { color: #1a7f37; }
"""


def render_html(history: History) -> str:
    """The whole page: headline, a chart per row (the gate first), and the runs table."""
    runs = history.runs
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>evaltrace history</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>evaltrace history</h1>",
        f"<p>{len(runs)} scoring runs of {history.runs_in_store} in {text(history.store)}"
        + (f", spec {text(history.spec)}" if history.spec is not None else "")
        + ", oldest first. Pass rate: results that passed over results that applied (an error fails).</p>",
    ]
    for row in rows_of(history):
        parts.append(f"<h2>{text(row.label)}</h2>")
        parts.append(_chart(row, runs))
    parts += _runs_table(runs)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _x(index: int, count: int) -> float:
    width = _WIDTH - _LEFT - _RIGHT
    return _LEFT + (width / 2 if count == 1 else index * width / (count - 1))


def _y(rate: float) -> float:
    return _TOP + (1 - rate) * (_HEIGHT - _TOP - _BOTTOM)


def _chart(row: Row, runs: Sequence[RunPoint]) -> str:
    count = len(runs)
    label = text(f"{row.label}: pass rate by run")
    parts = [
        f'<svg width="{_WIDTH}" height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-label="{label}">'
    ]
    parts += list(_grid(runs))
    for index, mark in enumerate(row.changed):
        if mark:
            x = (_x(index - 1, count) + _x(index, count)) / 2
            parts.append(f'<line class="change" x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_HEIGHT - _BOTTOM}"/>')
            parts.append(f'<text class="note" x="{x + 3:.1f}" y="{_TOP + 10}">changed</text>')
    for segment in _segments(row):
        points = " ".join(f"{_x(i, count):.1f},{_y(rate):.1f}" for i, rate in segment)
        parts.append(f'<polyline class="line" points="{points}"/>')
    for index, rate in enumerate(row.rates):
        if rate is not None:
            started = f"{runs[index].started_at:%Y-%m-%d %H:%M} UTC"
            tip = text(f"run {index + 1} {runs[index].run_id}, {started}: {rate:.1%}")
            x, y = _x(index, count), _y(rate)
            parts.append(f'<circle class="dot" cx="{x:.1f}" cy="{y:.1f}" r="3.5"><title>{tip}</title></circle>')
    parts.append("</svg>")
    return "\n".join(parts)


def _grid(runs: Sequence[RunPoint]) -> Iterator[str]:
    """The rate rules, and under the x axis the runs' start dates and times (UTC)."""
    for rate in (0.0, 0.5, 1.0):
        y = _y(rate)
        yield f'<line class="grid" x1="{_LEFT}" y1="{y:.1f}" x2="{_WIDTH - _RIGHT}" y2="{y:.1f}"/>'
        yield f'<text class="axis" x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{rate:.0%}</text>'
    count = len(runs)
    step = max(1, math.ceil(count / _MAX_TICKS))
    top = _HEIGHT - _BOTTOM
    for index in range(0, count, step):
        x, started = _x(index, count), runs[index].started_at
        yield (
            f'<text class="axis tick" x="{x:.1f}" y="{top + 15}" text-anchor="middle">{started:%Y-%m-%d}'
            f'<tspan x="{x:.1f}" dy="13">{started:%H:%M}</tspan></text>'
        )
    middle = _LEFT + (_WIDTH - _LEFT - _RIGHT) / 2
    yield f'<text class="axis" x="{middle:.1f}" y="{_HEIGHT - 4}" text-anchor="middle">run started (UTC)</text>'


def _segments(row: Row) -> Iterator[list[tuple[int, float]]]:
    """Runs of consecutive rates, cut at a missing rate and before a change."""
    segment: list[tuple[int, float]] = []
    for index, (rate, mark) in enumerate(zip(row.rates, row.changed, strict=True)):
        if rate is None or mark:
            if segment:
                yield segment
            segment = []
        if rate is not None:
            segment.append((index, rate))
    if segment:
        yield segment


def _runs_table(runs: Sequence[RunPoint]) -> list[str]:
    rows = ["<h2>Runs</h2>", "<table><tr><th>#</th><th>run</th><th>started (UTC)</th><th>gate</th><th>spec</th></tr>"]
    for number, run in enumerate(runs, 1):
        verdict = "passed" if run.gate_passed else "failed"
        rate = "-" if run.gate_pass_rate is None else f"{run.gate_pass_rate:.1%}"
        rows.append(
            f"<tr><td>{number}</td><td>{text(run.run_id)}</td><td>{run.started_at:%Y-%m-%d %H:%M:%S}</td>"
            f'<td class="{verdict}">{verdict} {rate} ({run.entries_passed}/{run.entries})</td>'
            f"<td>{text(run.spec or '(defaults)')}</td></tr>"
        )
    rows.append("</table>")
    return rows
