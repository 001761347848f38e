"""The HTML report (`--html FILE`): one self-contained page to read a scoring in a browser.

What it shows is in docs/reports.md. The first `MAX_DETAILED_FAILED` failed or missing entries and
the first `MAX_DETAILED_OTHER` others open into a drill-down, with the rebuilt trace of up to
`MAX_TREES_PER_ENTRY` samples as a tree (`_html_trace.py`); every other entry is one compact row.

Streaming. Entries' HTML is spooled to an unnamed temporary file as they arrive, since the
summary, the charts and the filters' choices come first in the page but are known only at the end.
Memory holds the scorer and tier names, three numbers per sample for the histograms, and the ids of
the traces to draw; `finish` writes the page under a temporary name and renames it into place.

Self-contained and inert. No external script, style sheet, font or image: the style and one
small script are inline, the charts inline SVG. A Content-Security-Policy allows no fetch at all and
only that script (by its SHA-256). Recorded content never enters the script: it is HTML-escaped
text in the DOM, terminal and bidi controls shown as visible escapes (`_html_page.text`).
"""

from __future__ import annotations

import tempfile
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from evaltrace.evaluators.results.report import _html_page as page
from evaltrace.evaluators.results.report._html_page import text
from evaltrace.evaluators.results.report._html_summary import summary_html
from evaltrace.evaluators.results.report._html_trace import write_trees
from evaltrace.evaluators.results.report._publish import AtomicFile
from evaltrace.evaluators.results.report.model import EntryResult, Report, SampleResult, ScoreResult
from evaltrace.evaluators.results.report.writer import AbortOnExit, ReportEntry

if TYPE_CHECKING:
    from evaltrace.evaluators.results.report.formats import ReportTarget

MAX_DETAILED_FAILED = 100
"""Failed and missing entries shown with their drill-down; later ones are compact rows."""
MAX_DETAILED_OTHER = 50
"""Passed and not-applicable entries shown with their drill-down; later ones are compact rows."""
MAX_TREES_PER_ENTRY = 5
"""Samples of one entry whose trace tree is drawn (a repeated case may have many)."""
_MAX_SAMPLES = 20
"""Samples of one entry listed in its drill-down."""
_MAX_REASON = 2000
_SPOOL_BUFFER = 1 << 16
_FAILED = frozenset({"failed", "missing"})


@dataclass
class _Tally:
    """What the page needs of the entries beyond their rows, gathered as they stream."""

    scorers: dict[str, int] = field(default_factory=dict)
    tiers: dict[str, int] = field(default_factory=dict)
    tier_rates: dict[str, list[int]] = field(default_factory=dict)
    """Per tier: entries passed, entries counted (passed, failed or missing)."""
    durations: array[float] = field(default_factory=lambda: array("d"))
    tokens: array[float] = field(default_factory=lambda: array("d"))
    costs: array[float] = field(default_factory=lambda: array("d"))
    detailed_failed: int = 0
    detailed_other: int = 0
    compact: int = 0

    def index(self, names: dict[str, int], name: str) -> int:
        """The number standing for `name` in the rows' filter attributes (recorded names never go there)."""
        return names.setdefault(name, len(names))

    def add(self, entry: EntryResult) -> None:
        """Count the entry's tier outcome and its samples' numbers."""
        tier = entry.tier or "(no tier)"
        rate = self.tier_rates.setdefault(tier, [0, 0])
        if entry.status != "not_applicable":
            rate[0] += entry.status == "passed"
            rate[1] += 1
        for sample in entry.samples:
            if sample.duration_seconds is not None:
                self.durations.append(sample.duration_seconds)
            self.tokens.append(sample.usage.input_tokens + sample.usage.output_tokens)
            if sample.cost_usd is not None:
                self.costs.append(sample.cost_usd)


class HtmlWriter(AbortOnExit):
    """Spools the entries' rows as they come and writes the whole page at `finish`."""

    def __init__(self, destination: str, *, cache: bool = True, files: Sequence[Path] | None = None) -> None:
        """Open the page's temporary file.

        Args:
            destination: the HTML file to write.
            cache: read the trace trees' span files through the traces cache (`--no-cache`: not).
            files: the scoring's run files (its PATHs resolved); `None`: the report's paths resolved again.

        Raises:
            InputError: the destination cannot be written.
        """
        self._file = AtomicFile(destination, "HTML report")
        self._cache = cache
        self._files = files
        self._spool: IO[bytes] = tempfile.TemporaryFile(buffering=_SPOOL_BUFFER)
        self._tally = _Tally()
        self._wanted: dict[str, int] = {}
        """Trace ids to draw, each with the number of its `<template>`."""

    def add(self, entry: ReportEntry) -> None:
        """Spool the entry's row: a drill-down while within the limits, else a compact row."""
        result = entry.result()
        self._tally.add(result)
        failed = result.status in _FAILED
        tally = self._tally
        detailed = tally.detailed_failed < MAX_DETAILED_FAILED if failed else tally.detailed_other < MAX_DETAILED_OTHER
        if detailed:
            tally.detailed_failed += failed
            tally.detailed_other += not failed
        else:
            tally.compact += 1
        row = self._detailed(result) if detailed else self._compact(result)
        self._spool.write(row.encode("utf-8", "backslashreplace"))

    def finish(self, report: Report) -> None:
        """Write the page (summary, charts, filters, rows, trace trees) and publish it."""
        failed = not report.passed or (report.baseline is not None and report.baseline.regressed)
        self._write(page.page_head(f"evaltrace: {'gate failed' if failed else 'gate passed'}"))
        self._write(summary_html(report))
        self._write(self._charts(report))
        self._write(self._filters(report))
        self._spool.seek(0)
        while chunk := self._spool.read(_SPOOL_BUFFER):
            self._file.write(chunk)
        self._write("</div>\n</section>\n")
        found, problem = write_trees(report.inputs.paths, self._wanted, self._cache, self._write, self._files)
        if problem is not None:
            self._write(f'<p class="note" id="trees-note">Trace trees: {found} drawn; {text(problem)}.</p>\n')
        self._write(page.page_tail())
        self._spool.close()
        self._file.publish()

    def abort(self) -> None:
        """Drop the unfinished page and the spool."""
        self._spool.close()
        self._file.discard()

    def _write(self, html: str) -> None:
        self._file.write(html.encode("utf-8", "backslashreplace"))

    def _attributes(self, entry: EntryResult) -> str:
        scores = _all_scores(entry)
        ran = sorted({self._tally.index(self._tally.scorers, s.scorer) for s in scores})
        fails = sorted({self._tally.index(self._tally.scorers, s.scorer) for s in scores if _problem(s)})
        tier = "" if entry.tier is None else str(self._tally.index(self._tally.tiers, entry.tier))
        return (
            f'data-status="{entry.status}" data-failed="{int(entry.status in _FAILED)}" data-tier="{tier}" '
            f'data-scorers="{" ".join(map(str, ran))}" data-fails="{" ".join(map(str, fails))}"'
        )

    def _compact(self, entry: EntryResult) -> str:
        return f'<div class="entry compact" {self._attributes(entry)}>{_headline(entry)}</div>\n'

    def _detailed(self, entry: EntryResult) -> str:
        parts = [f'<details class="entry" {self._attributes(entry)}><summary>{_headline(entry)}</summary>']
        parts.append('<div class="body">')
        if entry.reason:
            parts.append(f'<p class="reason">{text(entry.reason, _MAX_REASON)}</p>')
        parts.append(_scores_table(entry.scores))
        for number, sample in enumerate(entry.samples[:_MAX_SAMPLES], start=1):
            parts.append(self._sample(sample, number, len(entry.samples), number <= MAX_TREES_PER_ENTRY))
        if len(entry.samples) > _MAX_SAMPLES:
            parts.append(f'<p class="note">{len(entry.samples) - _MAX_SAMPLES} more samples in the JSON report</p>')
        parts.append("</div></details>\n")
        return "".join(parts)

    def _sample(self, sample: SampleResult, number: int, total: int, tree: bool) -> str:
        parts = [f"<h4>Sample {number}/{total}: {text(sample.status.replace('_', ' '))}{_sample_facts(sample)}</h4>"]
        for label, value in (("input", sample.input), ("answer", sample.output), ("error", sample.error)):
            if value is not None:
                parts.append(f'<p><b>{label}</b> <span class="pre">{text(value, _MAX_REASON)}</span></p>')
        if total > 1:
            parts.append(_scores_table(sample.scores))
        if tree:
            for trace_id in sample.trace_ids or ([sample.trace_id] if sample.trace_id else []):
                slot = self._wanted.setdefault(trace_id, len(self._wanted))
                parts.append(
                    f'<div class="slot" data-slot="{slot}"><span class="note">trace tree not drawn</span></div>'
                )
        return "".join(parts)

    def _charts(self, report: Report) -> str:
        tally = self._tally
        by_scorer = [(c.scorer, c.passed, c.passed + c.failed) for c in report.scorer_counts]
        by_tier = [(name, rate[0], rate[1]) for name, rate in tally.tier_rates.items()]
        charts = [
            page.bar_chart("Pass rate by scorer (verdicts)", by_scorer),
            page.bar_chart("Pass rate by tier (entries)", by_tier),
            page.histogram("Latency", tally.durations, "s"),
            page.histogram("Tokens per sample", tally.tokens, "tokens"),
            page.histogram("Cost per sample", tally.costs, "$"),
        ]
        return f'<section id="charts"><h2>Charts</h2><div class="charts">{"".join(charts)}</div></section>\n'

    def _filters(self, report: Report) -> str:
        tally = self._tally
        scorers = "".join(f'<option value="{i}">{text(name, 80)}</option>' for name, i in tally.scorers.items())
        tiers = "".join(f'<option value="{i}">{text(name, 80)}</option>' for name, i in tally.tiers.items())
        compact = tally.compact
        note = (
            f"{compact} entries past the first {MAX_DETAILED_FAILED} failed and {MAX_DETAILED_OTHER} other entries "
            "are compact rows; the JSON report (--json) has every entry whole."
            if compact
            else "Open an entry for its scores, samples and trace tree."
        )
        return (
            f'<section id="entries"><h2>Entries ({report.counts.entries})</h2><p class="note">{note}</p>'
            '<div class="filters"><label><input type="checkbox" id="f-failed"> Failed only</label>'
            f'<label>Scorer <select id="f-scorer"><option value="">all</option>{scorers}</select></label>'
            f'<label>Tier <select id="f-tier"><option value="">all</option>{tiers}</select></label>'
            '<span><span id="shown"></span> shown</span></div>\n<div id="entry-list">\n'
        )


def _all_scores(entry: EntryResult) -> list[ScoreResult]:
    return [*entry.scores, *(score for sample in entry.samples for score in sample.scores)]


def _problem(score: ScoreResult) -> bool:
    return score.passed is False or score.error is not None


def _headline(entry: EntryResult) -> str:
    name = entry.case_id or entry.trace_id or "(no trace)"
    parts = [
        f'<span class="status">{text(entry.status.replace("_", " "))}</span> <b class="case">{text(name, 200)}</b>'
    ]
    if entry.tier:
        parts.append(f'<span class="chip">tier {text(entry.tier, 80)}</span>')
    if entry.pass_rate is not None and len(entry.samples) > 1:
        parts.append(f'<span class="chip">pass rate {entry.pass_rate:.0%} of {len(entry.samples)}</span>')
    parts += [_chip(score) for score in _unique(entry.scores)]
    return " ".join(parts)


def _unique(scores: Iterable[ScoreResult]) -> list[ScoreResult]:
    """One score per scorer name: the first failing one, else the first."""
    chosen: dict[str, ScoreResult] = {}
    for score in scores:
        if score.scorer not in chosen or (_problem(score) and not _problem(chosen[score.scorer])):
            chosen[score.scorer] = score
    return list(chosen.values())


def _chip(score: ScoreResult) -> str:
    verdict = _verdict(score)
    css = "failed" if _problem(score) else "passed" if score.passed else ""
    return f'<span class="chip {css}">{text(score.scorer, 80)}: {verdict}</span>'


def _verdict(score: ScoreResult) -> str:
    if score.error is not None:
        return "error"
    return {True: "passed", False: "failed", None: "did not apply"}[score.passed]


def _scores_table(scores: list[ScoreResult]) -> str:
    if not scores:
        return ""
    rows = []
    for score in scores:
        value = "" if score.value is None else f"{score.value:.3g}"
        reason = score.reason or ""
        if score.error is not None:
            reason = f"{score.error}: {reason}" if reason else score.error
        turn = "" if score.turn is None else str(score.turn)
        rows.append(
            f"<tr><td>{text(score.scorer, 200)}</td><td>{turn}</td><td>{_verdict(score)}</td>"
            f'<td class="num">{value}</td><td class="reason">{text(reason, _MAX_REASON)}</td></tr>'
        )
    head = "<tr><th>scorer</th><th>turn</th><th>verdict</th><th>value</th><th>reason</th></tr>"
    return f'<table class="scores">{head}{"".join(rows)}</table>'


def _sample_facts(sample: SampleResult) -> str:
    facts = []
    if sample.trace_id:
        facts.append(f"trace {text(sample.trace_id, 64)}")
    if sample.duration_seconds is not None:
        facts.append(f"{sample.duration_seconds:.3f} s")
    tokens = sample.usage.input_tokens + sample.usage.output_tokens
    if tokens:
        facts.append(f"{tokens:,} tokens")
    if sample.cost_usd is not None:
        facts.append(f"${sample.cost_usd:.4f}")
    return (" · " + " · ".join(facts)) if facts else ""


def for_target(target: ReportTarget) -> HtmlWriter:
    """The `html` format (`formats.FORMATS`)."""
    return HtmlWriter(target.destination, cache=target.cache, files=target.files)
