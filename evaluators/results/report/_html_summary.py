"""The HTML report's top: the gate, the numbers (counts, latency, tokens, cost) and the per-scorer table."""

from __future__ import annotations

from evaltrace.collector.terminal import plural
from evaltrace.evaluators.results.report._html_page import text
from evaltrace.evaluators.results.report.model import Report


def summary_html(report: Report) -> str:
    """The page's title, the gate's banner, the numbers table and the scorers table."""
    verdict = "pass" if report.passed else "fail"
    banner = (
        f'<h1>evaltrace report</h1><div class="gate {verdict}" id="gate">Gate {"PASSED" if report.passed else "FAILED"}'
        f"<small>{text(report.gate_reason)}</small></div>\n"
    )
    return banner + _baseline(report) + _numbers(report) + _scorers(report)


def _baseline(report: Report) -> str:
    """`--baseline`'s verdict, as a second banner: never green while a case regressed."""
    baseline = report.baseline
    if baseline is None:
        return ""
    css, label = (
        ("fail", "FAILED")
        if baseline.regressed
        else ("warn", "WARNING")
        if baseline.regressed_cases
        else ("pass", "OK")
    )
    return (
        f'<div class="gate {css}" id="baseline">Against the baseline {text(baseline.ref, 200)}: {label}'
        f"<small>{text(baseline.verdict, 500)}</small></div>\n"
    )


def _numbers(report: Report) -> str:
    counts = report.counts
    rate = "n/a" if report.pass_rate is None else f"{report.pass_rate:.1%}"
    rows = [
        ("pass rate", f"{rate} (confidence {report.confidence:.1%})"),
        ("entries", f"{counts.entries}: {counts.passed} passed, {counts.failed} failed, {counts.missing} missing, "
         f"{counts.not_applicable} not applicable"),
        ("traces", f"{counts.traces} read, {counts.unmatched} unmatched (not scored)"),
    ]  # fmt: skip
    rows += _stats_rows(report)
    source = report.inputs.spec if report.inputs.spec else "reference-free defaults (no spec)"
    rows += [
        ("scored with", text(source, 500)),
        ("span files", text(" ".join(report.inputs.paths), 1000)),
        ("created", text(report.created_at.isoformat(timespec="seconds"))),
        ("evaltrace", text(report.evaltrace_version)),
    ]
    body = "".join(f"<tr><th>{name}</th><td>{value}</td></tr>" for name, value in rows)
    return f'<section id="summary"><h2>Summary</h2><table>{body}</table></section>\n'


def _stats_rows(report: Report) -> list[tuple[str, str]]:
    rows = []
    latency = report.latency
    if latency.p50_seconds is not None and latency.p95_seconds is not None:
        rows.append(("latency p50 / p95", f"{_seconds(latency.p50_seconds)} / {_seconds(latency.p95_seconds)}"))
    usage = report.usage
    rows.append(("tokens (in / out)", f"{usage.input_tokens:,} / {usage.output_tokens:,}"))
    cost = report.cost
    rows.append(("estimated cost", "not priced" if cost.estimated_usd is None else f"${cost.estimated_usd:.4f}"))
    if cost.unpriced_models:
        rows.append(("models without a price", text(", ".join(cost.unpriced_models), 500)))
    lost = report.inputs.dropped_spans + report.inputs.unwritten_spans
    if lost:
        rows.append(("recording", f"lost {plural(lost, 'span')}: their traces were scored incomplete"))
    return rows


def _scorers(report: Report) -> str:
    if not report.scorer_counts:
        return ""
    head = "<tr><th>scorer</th><th>passed</th><th>failed</th><th>did not apply</th><th>errors</th></tr>"
    rows = "".join(
        f'<tr><td>{text(c.scorer, 200)}</td><td class="num">{c.passed}</td><td class="num">{c.failed - c.errors}</td>'
        f'<td class="num">{c.not_applied}</td><td class="num">{c.errors}</td></tr>'
        for c in report.scorer_counts
    )
    return f'<section id="scorers"><h2>Scorers</h2><table>{head}{rows}</table></section>\n'


def _seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
