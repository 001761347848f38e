"""The terminal summary of a report: counts, each failing entry with its reasons, stats, the gate line."""

from __future__ import annotations

from typing import Any

from evaltrace.evaluators.report import EntryResult, Report, ScoreResult

_RULE = "-" * 70
_MAX_REASON = 300


def render_summary(report: Report) -> str:
    """The readable summary `evaltrace score` prints (plain text, ends with the gate line)."""
    lines = [_headline(report), _RULE]
    problems = [e for e in report.entries if e.status in ("failed", "missing")]
    for entry in problems:
        lines += _entry_lines(entry)
    if problems:
        lines.append(_RULE)
    lines += _stats_lines(report)
    lines.append(_gate_line(report))
    return "\n".join(lines) + "\n"


def _headline(report: Report) -> str:
    c = report.counts
    source = f"spec {report.inputs.spec}" if report.inputs.spec else "reference-free defaults (no --spec)"
    parts = [f"{c.entries} {'entry' if c.entries == 1 else 'entries'}", f"{c.passed} passed", f"{c.failed} failed"]
    if c.missing:
        parts.append(f"{c.missing} missing")
    if c.not_applicable:
        parts.append(f"{c.not_applicable} not applicable")
    return f"evaltrace score: {source}; {c.traces} traces read\n" + ", ".join(parts)


def _entry_lines(entry: EntryResult) -> list[str]:
    label = entry.case_id or "(no case)"
    trace = f" [trace {entry.trace_id}]" if entry.trace_id else ""
    rate = f" pass rate {entry.pass_rate:.0%}" if entry.pass_rate is not None and len(entry.samples) > 1 else ""
    lines = [f"{entry.status.upper()} {label}{trace}{rate}"]
    if entry.status == "missing" or not entry.scores:
        return lines + [f"  - {entry.reason}"] if entry.reason else lines
    lines += [f"  - {_score_line(score)}" for score in entry.scores if score.passed is False]
    return lines


def _score_line(score: ScoreResult) -> str:
    turn = f" (turn {score.turn})" if score.turn is not None else ""
    reason = score.reason or score.error or "failed"
    if len(reason) > _MAX_REASON:
        reason = reason[: _MAX_REASON - 3] + "..."
    return f"{score.scorer}{turn}: {' '.join(reason.split())}"


def _stats_lines(report: Report) -> list[str]:
    lines = []
    if report.latency.p50_seconds is not None and report.latency.p95_seconds is not None:
        p50, p95 = _seconds(report.latency.p50_seconds), _seconds(report.latency.p95_seconds)
        lines.append(f"Latency p50/p95: {p50} / {p95}")
    usage = report.usage
    if usage.total_tokens:
        lines.append(f"Tokens (in/out): {usage.input_tokens:,} / {usage.output_tokens:,}")
    if report.cost.estimated_usd is not None:
        unpriced = f" (unpriced: {', '.join(report.cost.unpriced_models)})" if report.cost.unpriced_models else ""
        lines.append(f"Estimated cost: ${report.cost.estimated_usd:.4f}{unpriced}")
    if report.judge:
        lines.append(_judge_line(report.judge))
    if report.unmatched:
        lines.append(f"Unmatched traces (not scored): {len(report.unmatched)}")
    return lines


def _judge_line(judge: dict[str, Any]) -> str:
    def get(key: str) -> Any:
        return judge.get(key, 0)

    line = f"Judge: {get('requests')} requests ({get('retries')} retries, {get('errors')} errors), "
    line += f"cache {get('cache_hits')} hits / {get('cache_misses')} misses, "
    line += f"tokens {get('prompt_tokens'):,} / {get('completion_tokens'):,}"
    cost = judge.get("estimated_cost_usd")
    return line + (f", estimated cost ${cost:.4f}" if isinstance(cost, int | float) else "")


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"


def _gate_line(report: Report) -> str:
    verdict = "PASSED" if report.passed else "FAILED"
    return f"Gate {verdict}: {report.gate_reason}"
