"""The Markdown summary (`--markdown FILE`) for pull requests and GitHub's job summary page.

What it shows is in docs/reports.md. Entries arrive one at a time: only the first `MAX_FAILED`
failed or missing entries' rows and a count of the others are kept. The text is also appended
(never truncating) to the file `GITHUB_STEP_SUMMARY` names.

Untrusted content. Recorded text (reasons quoting answers, model names) is shown, never
interpreted: whitespace runs (newlines included) become one space so a table row stays one row,
terminal controls become visible escapes, `&`, `<` and `>` become entities (no HTML gets through),
`$` becomes `&#36;` (GitHub renders `$...$` and `$$...$$` as math, and a backslash does not
stop it everywhere; an entity is decoded only after that parsing, so it shows as a plain `$`),
and the characters Markdown gives a meaning to inside a line (backslash, backtick, `*`, `_`,
`[`, `]`, `|`, `~`) are backslash-escaped. What GitHub links by itself is broken by a zero-width space
(`&#8203;`, invisible when shown): after `@` (a mention would notify that user or team) and `#`
(an issue reference), and inside `://` and `www.` (a bare link to wherever the recorded text
points), so a report never pings anyone or offers a link its reader did not write.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from evaltrace.collector.errors import InputError
from evaltrace.collector.terminal import plural, printable
from evaltrace.evaluators.results.report._publish import AtomicFile
from evaltrace.evaluators.results.report.model import BaselineResult, EntryResult, Report, ScorerCount, ScoreResult
from evaltrace.evaluators.results.report.writer import AbortOnExit, ReportEntry

if TYPE_CHECKING:
    from evaltrace.evaluators.results.report.formats import ReportTarget

MAX_FAILED = 20
"""Failed and missing entries listed with their reasons; the others are counted."""
_MAX_REASON = 300
_MAX_REASONS = 5
"""Failing scorers named per entry."""

_ENTITIES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "$": "&#36;"})
_MARKDOWN = re.compile(r"([\\`*_\[\]|~])")
_AUTOLINKED = re.compile(r"@|(?<!&)#|:(?=//)|(?i:www)(?=\.)")  # `&#`: our own entities (text's `&` is `&amp;`)
_ZERO_WIDTH_SPACE = "&#8203;"


def markdown_text(text: str, limit: int | None = None) -> str:
    """`text` as inert Markdown on one line (fit for a table cell), cut to `limit` characters first."""
    flat = " ".join(text.split())
    if limit is not None and len(flat) > limit:
        flat = flat[: limit - 3] + "..."
    escaped = _MARKDOWN.sub(r"\\\1", printable(flat).translate(_ENTITIES))
    return _AUTOLINKED.sub(lambda m: m[0] + _ZERO_WIDTH_SPACE, escaped)


class MarkdownWriter(AbortOnExit):
    """Collects the failed entries as they come and writes the summary at `finish`."""

    def __init__(self, destination: str, *, step_summary: str | None = None, limit: int = MAX_FAILED) -> None:
        """Open the summary's temporary file.

        Args:
            destination: the Markdown file to write.
            step_summary: a file the summary is also appended to (`GITHUB_STEP_SUMMARY`), or `None`.
            limit: failed entries listed in full.

        Raises:
            InputError: the destination cannot be written.
        """
        self._file = AtomicFile(destination, "Markdown summary")
        self._step_summary = step_summary
        self._limit = limit
        self._rows: list[str] = []
        self._omitted = 0

    def add(self, entry: ReportEntry) -> None:
        """Note a failed or missing entry (only the first `limit` are kept)."""
        result = entry.result()
        if result.status not in ("failed", "missing"):
            return
        if len(self._rows) < self._limit:
            self._rows.append(_failed_row(result))
        else:
            self._omitted += 1

    def finish(self, report: Report) -> None:
        """Write the summary, publish it, and append it to the step summary file when one is set."""
        text = render_markdown(report, self._rows, self._omitted)
        self._file.write(text.encode())
        self._file.publish()
        if self._step_summary:
            try:
                with open(self._step_summary, "a", encoding="utf-8") as summary:
                    summary.write(text)
            except OSError as exc:
                where = f"GITHUB_STEP_SUMMARY ({self._step_summary})"
                raise InputError(f"{where}: cannot append the Markdown summary: {exc.strerror or exc}") from None

    def abort(self) -> None:
        """Drop the unfinished file."""
        self._file.discard()


def render_markdown(report: Report, failed_rows: list[str], omitted: int) -> str:
    """The summary's Markdown text.

    Args:
        report: the report's header (its `entries` are not read).
        failed_rows: the failed entries' table rows, as `MarkdownWriter` collected them.
        omitted: failed entries not listed.
    """
    verdict = _heading(report)
    source = f"spec `{markdown_text(report.inputs.spec)}`" if report.inputs.spec else "reference-free defaults"
    counts = report.counts
    rate = "n/a" if report.pass_rate is None else f"{report.pass_rate:.1%}"
    lines = [
        f"## evaltrace: {verdict}",
        "",
        f"**Gate {'PASSED' if report.passed else 'FAILED'}**: {markdown_text(report.gate_reason)}",
        "",
        f"Scored with {source}; {plural(counts.traces, 'trace')} read.",
        "",
        "| pass rate | confidence | entries | passed | failed | missing | not applicable |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {rate} | {report.confidence:.1%} | {counts.entries} | {counts.passed} | {counts.failed} | "
        f"{counts.missing} | {counts.not_applicable} |",
    ]
    lines += _baseline_section(report.baseline)
    lines += _scorer_table(report.scorer_counts)
    lines += _failed_section(failed_rows, omitted)
    lines += _stats(report)
    return "\n".join(lines) + "\n"


def _heading(report: Report) -> str:
    """The gate's mark; never success while a case regressed against `--baseline`, significant or not."""
    baseline = report.baseline
    if not report.passed or (baseline is not None and baseline.regressed):
        return "❌ gate failed"
    if baseline is not None and baseline.regressed_cases:
        cases = plural(len(baseline.regressed_cases), "case")
        return f"⚠️ gate passed, {cases} regressed (not significant at alpha={baseline.alpha:g})"
    return "✅ gate passed"


def _baseline_section(baseline: BaselineResult | None) -> list[str]:
    if baseline is None:
        return []
    label = "FAILED" if baseline.regressed else ("WARNING" if baseline.regressed_cases else "OK")
    lines = ["", f"### Against the baseline {markdown_text(baseline.ref)}", ""]
    lines.append(f"**{label}**: {markdown_text(baseline.verdict)}")
    cases = baseline.regressed_cases
    if cases:
        lines += ["", f"Regressed cases (passed -> failed): {len(cases)}", ""]
        lines += [f"- {markdown_text(key, 200)}" for key in cases[:MAX_FAILED]]
        if len(cases) > MAX_FAILED:
            lines.append(f"- … and {len(cases) - MAX_FAILED} more (see the JSON report)")
    return lines


def _scorer_table(counts: list[ScorerCount]) -> list[str]:
    if not counts:
        return []
    lines = ["", "### Scorers", "", "| scorer | passed | failed | did not apply | errors |"]
    lines.append("|---|---:|---:|---:|---:|")
    for c in counts:
        lines.append(
            f"| {markdown_text(c.scorer)} | {c.passed} | {c.failed - c.errors} | {c.not_applied} | {c.errors} |"
        )
    return lines


def _failed_section(rows: list[str], omitted: int) -> list[str]:
    if not rows:
        return []
    lines = ["", "### Failed entries", "", "| entry | status | reasons |", "|---|---|---|", *rows]
    if omitted:
        lines += ["", f"… and {plural(omitted, 'more failed entry', 'more failed entries')} (see the JSON report)."]
    return lines


def _failed_row(entry: EntryResult) -> str:
    name = markdown_text(entry.case_id or entry.trace_id or "(no trace)", 200)
    if entry.case_id and entry.trace_id:
        name += f"<br>trace {markdown_text(entry.trace_id, 64)}"
    status: str = entry.status
    if entry.pass_rate is not None and len(entry.samples) > 1:
        status += f" (pass rate {entry.pass_rate:.0%})"
    return f"| {name} | {status} | {'<br>'.join(_reasons(entry))} |"


def _reasons(entry: EntryResult) -> list[str]:
    problems = [s for s in entry.scores if s.passed is False or s.error is not None]
    if not problems:
        return [markdown_text(entry.reason or "failed", _MAX_REASON)]
    shown = [_reason(score) for score in problems[:_MAX_REASONS]]
    if len(problems) > _MAX_REASONS:
        shown.append(f"and {plural(len(problems) - _MAX_REASONS, 'more scorer')}")
    return shown


def _reason(score: ScoreResult) -> str:
    turn = f" (turn {score.turn})" if score.turn is not None else ""
    label = "error" if score.error is not None else "failed"
    text = score.reason or score.error or label
    return f"**{markdown_text(score.scorer)}**{turn} {label}: {markdown_text(text, _MAX_REASON)}"


def _stats(report: Report) -> list[str]:
    lines = []
    latency = report.latency
    if latency.p50_seconds is not None and latency.p95_seconds is not None:
        lines.append(f"- Latency p50 / p95: {_seconds(latency.p50_seconds)} / {_seconds(latency.p95_seconds)}")
    usage = report.usage
    if usage.total_tokens:
        lines.append(f"- Tokens (in / out): {usage.input_tokens:,} / {usage.output_tokens:,}")
    cost = report.cost
    if cost.estimated_usd is not None:
        lines.append(f"- Estimated cost: ${cost.estimated_usd:.4f}")
    if cost.unpriced_models:
        lines.append(f"- Models without a price: {markdown_text(', '.join(cost.unpriced_models), 500)}")
    if report.unmatched:
        lines.append(f"- Unmatched traces (not scored): {len(report.unmatched)}")
    lost = report.inputs.dropped_spans + report.inputs.unwritten_spans
    if lost:
        lines.append(f"- ⚠️ The recording lost {plural(lost, 'span')}: their traces were scored incomplete")
    return ["", "### Stats", "", *lines] if lines else []


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
"""The file GitHub Actions shows as the job's summary; the Markdown summary is appended to it."""


def for_target(target: ReportTarget) -> MarkdownWriter:
    """The `markdown` format (`formats.FORMATS`), appended to the job's summary on GitHub Actions."""
    return MarkdownWriter(target.destination, step_summary=os.environ.get(STEP_SUMMARY_ENV))
