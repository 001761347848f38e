"""`evaltrace history` as terminal text: one row per scorer with a sparkline of its pass rates.

A sparkline has one character per run, oldest first: the pass rate on a fixed 0-100% scale
(`level`), `·` where the scorer did not run or nothing applied to it, and `|` before a run where
the scorer's version or configuration changed (for the gate row: the spec file's content). Scorer
names, run ids and spec paths are store content: each is one `collector.terminal.inline` fragment
here (so the table's columns line up and none starts a line or a CI log command), and every line
goes through `lines_text`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evaltrace.collector.terminal import inline, lines_text, plural
from evaltrace.evaluators.results.compare.history import History, RunPoint, ScorerSeries

BLOCKS = "▁▂▃▄▅▆▇█"
"""The sparkline's levels, 0% to 100%."""
NO_RATE = "·"
"""A run where the scorer did not run or nothing applied to it."""
CHANGE = "|"
"""Put before a run where the scorer's version or configuration (the gate: the spec) changed."""
GATE_LABEL = "gate (entries)"


def level(rate: float) -> str:
    """The block of `rate` (0.0-1.0): eight even levels, rounded half up (0% is `▁`, 100% is `█`)."""
    return BLOCKS[min(len(BLOCKS) - 1, max(0, int(rate * (len(BLOCKS) - 1) + 0.5)))]


@dataclass(frozen=True)
class Row:
    """One line of the table: a label and its series (a pass rate, or `None`, per run, and the change marks)."""

    label: str
    rates: Sequence[float | None]
    changed: Sequence[bool]


def sparkline(rates: Sequence[float | None], changed: Sequence[bool]) -> str:
    """One character per rate (see the module docstring), `CHANGE` before each changed one."""
    return "".join(
        (CHANGE if mark else "") + (NO_RATE if rate is None else level(rate))
        for rate, mark in zip(rates, changed, strict=True)
    )


def rows_of(history: History) -> list[Row]:
    """The gate's row, then one per scorer, in the order of `history.scorers`."""
    gate = Row(GATE_LABEL, [r.gate_pass_rate for r in history.runs], [r.spec_changed for r in history.runs])
    return [gate, *(_scorer_row(series) for series in history.scorers)]


def _scorer_row(series: ScorerSeries) -> Row:
    return Row(series.scorer, [p.pass_rate for p in series.points], [p.changed for p in series.points])


def render_text(history: History) -> str:
    """The headline, the table (sparkline, latest, change, min, max), the footnotes and the runs listed."""
    rows = rows_of(history)
    lines = [_headline(history), ""]
    lines += _table(rows)
    lines += _footnotes(history)
    lines += ["", "Runs, oldest first:"]
    lines += [_run_line(n, run) for n, run in enumerate(history.runs, 1)]
    return lines_text(lines)


def _headline(history: History) -> str:
    shown = len(history.runs)
    selection = f" of spec {history.spec}" if history.spec is not None else ""
    return (
        f"evaltrace history: {plural(shown, 'scoring run')}{inline(selection)} "
        f"(of {history.runs_in_store} in {inline(history.store)}), oldest first"
    )


def _table(rows: list[Row]) -> list[str]:
    cells = [("scorer", "pass rate by run", "latest", "change", "min", "max")]
    cells += [(inline(row.label), sparkline(row.rates, row.changed), *_figures(row.rates)) for row in rows]
    widths = [max(len(line[column]) for line in cells) for column in range(len(cells[0]))]
    return [
        "  ".join(_align(n, cell, w) for n, (cell, w) in enumerate(zip(line, widths, strict=True))).rstrip()
        for line in cells
    ]


def _align(column: int, cell: str, width: int) -> str:
    """The label and the sparkline to the left, the figures to the right."""
    return cell.ljust(width) if column < 2 else cell.rjust(width)


def _figures(rates: Sequence[float | None]) -> tuple[str, str, str, str]:
    """Latest rate, the change from the run before, and the min and max over the runs shown."""
    latest = rates[-1] if rates else None
    previous = rates[-2] if len(rates) > 1 else None
    known = [rate for rate in rates if rate is not None]
    change = _points(latest - previous) if latest is not None and previous is not None else "-"
    return (_percent(latest), change, _percent(min(known, default=None)), _percent(max(known, default=None)))


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1%}"


def _points(delta: float) -> str:
    """A change in percentage points, signed (`±0.0 pts` when none)."""
    value = round(delta * 100, 1)
    return "±0.0 pts" if value == 0 else f"{value:+.1f} pts"


def _footnotes(history: History) -> list[str]:
    notes = []
    if history.runs:  # the sparklines' time axis: one character per run, from the first start to the last
        first, last = history.runs[0].started_at, history.runs[-1].started_at
        notes.append(f"Runs from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} UTC, one character each.")
    changes = [
        f"{inline(series.scorer)} at run {n}"
        for series in history.scorers
        for n, point in enumerate(series.points, 1)
        if point.changed
    ]
    specs = [f"run {n}" for n, run in enumerate(history.runs, 1) if run.spec_changed]
    if changes:
        notes.append(
            f"{CHANGE} a scorer's version or configuration changed from the run before; its rates on either side "
            f"are not comparable: {', '.join(changes)}."
        )
    if specs:
        notes.append(f"{CHANGE} on the gate: the spec's content changed at {', '.join(specs)}.")
    if any(rate is None for row in rows_of(history) for rate in row.rates):
        notes.append(f"{NO_RATE} the scorer did not run, or nothing applied to it, in that run.")
    return ["", *notes] if notes else []


def _run_line(number: int, run: RunPoint) -> str:
    when = run.started_at.strftime("%Y-%m-%d %H:%M:%S")
    gate = "PASSED" if run.gate_passed else "FAILED"
    return (
        f"{number:>3}  {inline(run.run_id)}  {when}  gate {gate} {_percent(run.gate_pass_rate)} "
        f"({run.entries_passed}/{run.entries})  spec {inline(run.spec or '(defaults)')}"
    )
