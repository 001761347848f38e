"""The terminal summary of a report: counts, failing entries with their reasons, stats, the gate line.

The worst entries come first: up to `MAX_LISTED` failing or missing entries with their reasons,
lowest pass rate first (a repeated case that passed in 1 of 5 samples before one that passed in
4), ties in report order; a larger run's others are counted in one line (the JSON report has them
all). A table gives each scorer's verdicts (passed / failed / did not apply / errors), so a scorer
that applied to nothing, or could not run, is seen in the terminal, not only in the JSON; verdicts
that met unrecorded content add a warning with the fix.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Any

from evaltrace.collector.terminal import inline, lines_text, plural
from evaltrace.evaluators.results.report.model import EntryResult, Report, ScorerCount, ScoreResult
from evaltrace.evaluators.scoring.scorers.evidence import RECORD_HINT, UNINSTRUMENTED_HINT

_RULE = "-" * 70
_MAX_REASON = 300


MAX_LISTED = 50
"""Failing and missing entries listed in full; the rest are counted (the JSON report has them all)."""


class FailureDigest:
    """The worst failing and missing entries the summary lists, collected as entries are produced.

    Keeps the rendered lines of the `limit` entries with the lowest pass rate (earlier entries
    first among equals) and a count of the others, so a run's summary does not need the run's
    entries in memory.
    """

    def __init__(self, limit: int = MAX_LISTED) -> None:
        self.limit = limit
        self.omitted = 0
        # A max-heap by (pass rate, arrival) through negated keys: its top is the entry to drop first.
        self._kept: list[tuple[float, int, list[str]]] = []
        self._arrivals = 0

    @property
    def listed(self) -> int:
        """Entries listed in full."""
        return len(self._kept)

    @property
    def lines(self) -> list[str]:
        """The listed entries' lines, lowest pass rate first, then in report order."""
        ranked = sorted(self._kept, key=lambda kept: (-kept[0], -kept[1]))
        return [line for _, _, lines in ranked for line in lines]

    @property
    def full(self) -> bool:
        """Whether further problem entries are only counted (callers may then skip building them).

        True once the list is full of entries that passed nothing: a later entry cannot rank lower.
        """
        return len(self._kept) >= self.limit and (not self._kept or self._kept[0][0] == 0.0)

    def add(self, entry: EntryResult, samples: int) -> None:
        """Note an entry (with its number of samples); only failing and missing ones are kept."""
        if entry.status not in ("failed", "missing"):
            return
        if self.limit <= 0:
            self.omitted += 1
            return
        self._arrivals += 1
        kept = (-(entry.pass_rate or 0.0), -self._arrivals, _entry_lines(entry, samples))
        if len(self._kept) < self.limit:
            heapq.heappush(self._kept, kept)
        else:
            heapq.heappushpop(self._kept, kept)
            self.omitted += 1

    def add_omitted(self) -> None:
        """Count a problem entry past the limit without building it."""
        self.omitted += 1

    @classmethod
    def of(cls, entries: Iterable[EntryResult]) -> FailureDigest:
        """The digest of a report's entries."""
        digest = cls()
        for entry in entries:
            digest.add(entry, len(entry.samples))
        return digest


def render_summary(report: Report, digest: FailureDigest | None = None) -> str:
    """The readable summary `evaltrace score` prints (plain text, ends with the gate line).

    Args:
        report: the report (its `entries` are not read when `digest` is given).
        digest: the failing entries, collected while the entries were streamed.
    """
    digest = digest if digest is not None else FailureDigest.of(report.entries)
    lines = [*_headline(report), _RULE]
    if digest.listed:
        lines += ["Worst entries (lowest pass rate first):", *digest.lines]
    if digest.omitted:
        lines.append(f"... and {plural(digest.omitted, 'more failing entry', 'more failing entries')} (see --json)")
    if digest.listed:
        lines.append(_RULE)
    lines += _scorer_lines(report.scorer_counts)
    lines += _stats_lines(report)
    lines.append(_gate_line(report))
    return lines_text(lines)


def _headline(report: Report) -> list[str]:
    c = report.counts
    source = f"spec {inline(report.inputs.spec)}" if report.inputs.spec else "reference-free defaults (no --spec)"
    parts = [plural(c.entries, "entry", "entries"), f"{c.passed} passed", f"{c.failed} failed"]
    if c.missing:
        parts.append(f"{c.missing} missing")
    if c.not_applicable:
        parts.append(f"{c.not_applicable} not applicable")
    return [f"evaltrace score: {source}; {plural(c.traces, 'trace')} read", ", ".join(parts)]


def _entry_lines(entry: EntryResult, samples: int) -> list[str]:
    # Case ids, trace ids, scorer names and reasons are recorded content: each is one inert fragment.
    label = inline(entry.case_id or "(no case)")
    trace = f" [trace {inline(entry.trace_id)}]" if entry.trace_id else ""
    rate = f" pass rate {entry.pass_rate:.0%}" if entry.pass_rate is not None and samples > 1 else ""
    lines = [f"{entry.status.upper()} {label}{trace}{rate}"]
    if entry.status == "missing" or not entry.scores:
        return lines + [f"  - {inline(entry.reason)}"] if entry.reason else lines
    lines += [f"  - {_score_line(score)}" for score in entry.scores if score.passed is False]
    return lines


def _score_line(score: ScoreResult) -> str:
    turn = f" (turn {score.turn})" if score.turn is not None else ""
    reason = score.reason or score.error or "failed"
    if len(reason) > _MAX_REASON:
        reason = reason[: _MAX_REASON - 3] + "..."
    return f"{inline(score.scorer)}{turn}: {inline(' '.join(reason.split()))}"


def _scorer_lines(counts: list[ScorerCount]) -> list[str]:
    """`scorer  passed  failed  did not apply  errors` rows, and a warning when content was not recorded.

    `failed` counts failures alone here; a scorer that could not run is counted under `errors`.
    """
    if not counts:
        return []
    names = {c.scorer: inline(c.scorer) for c in counts}
    width = max(len("scorer"), *(len(name) for name in names.values()))
    header = ("scorer", "passed", "failed", "did not apply", "errors")
    lines = [f"{header[0]:<{width}}  {header[1]:>6}  {header[2]:>6}  {header[3]:>13}  {header[4]:>6}"]
    lines += [
        f"{names[c.scorer]:<{width}}  {c.passed:>6}  {c.failed - c.errors:>6}  {c.not_applied:>13}  {c.errors:>6}"
        for c in counts
    ]
    unrecorded = [c for c in counts if c.unrecorded]
    if unrecorded:
        total = sum(c.unrecorded for c in unrecorded)
        which = ", ".join(f"{names[c.scorer]} {c.unrecorded}" for c in unrecorded)
        hint = _unrecorded_hint(total, sum(c.uninstrumented for c in unrecorded))
        lines.append(f"Warning: {plural(total, 'verdict')} met content that was not recorded ({which}): {hint}")
    return lines


def _unrecorded_hint(total: int, uninstrumented: int) -> str:
    """The fix for unrecorded evidence: content capture, or instrumentation for traces holding nothing of the agent."""
    if uninstrumented == total:
        return UNINSTRUMENTED_HINT
    if uninstrumented:
        return (
            f"{RECORD_HINT}; {uninstrumented} of them on traces holding nothing of the agent's: {UNINSTRUMENTED_HINT}"
        )
    return RECORD_HINT


def _stats_lines(report: Report) -> list[str]:
    lines = []
    if report.latency.p50_seconds is not None and report.latency.p95_seconds is not None:
        p50, p95 = _seconds(report.latency.p50_seconds), _seconds(report.latency.p95_seconds)
        lines.append(f"Latency p50/p95: {p50} / {p95}")
    usage = report.usage
    if usage.total_tokens:
        lines.append(f"Tokens (in/out): {usage.input_tokens:,} / {usage.output_tokens:,}")
    if report.cost.estimated_usd is not None:
        models = report.cost.unpriced_models
        unpriced = f" (unpriced: {', '.join(map(inline, models))})" if models else ""
        lines.append(f"Estimated cost: ${report.cost.estimated_usd:.4f}{unpriced}")
    if report.judge:
        lines.append(_judge_line(report.judge))
    if report.unmatched:
        lines.append(f"Unmatched traces (not scored): {len(report.unmatched)}")
    inputs = report.inputs
    if inputs.dropped_spans or inputs.unwritten_spans:
        lines.append(
            f"Warning: the recording lost {plural(inputs.dropped_spans + inputs.unwritten_spans, 'span')} "
            f"({inputs.dropped_spans} dropped by a full export queue, {inputs.unwritten_spans} not written); "
            "the traces they belonged to were scored incomplete"
        )
    return lines


def _judge_line(judge: dict[str, Any]) -> str:
    def get(key: str) -> Any:
        return judge.get(key, 0)

    requests = plural(get("requests"), "request")
    line = f"Judge: {requests} ({plural(get('retries'), 'retry', 'retries')}, {plural(get('errors'), 'error')}), "
    line += f"cache {plural(get('cache_hits'), 'hit')} / {plural(get('cache_misses'), 'miss', 'misses')}, "
    line += f"tokens {get('prompt_tokens'):,} / {get('completion_tokens'):,}"
    cost = judge.get("estimated_cost_usd")
    return line + (f", estimated cost ${cost:.4f}" if isinstance(cost, int | float) else "")


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"


def _gate_line(report: Report) -> str:
    verdict = "PASSED" if report.passed else "FAILED"
    return f"Gate {verdict}: {inline(report.gate_reason)}"
