r"""The HTML report's fixed parts: escaping, the style sheet, the script and its CSP hash, the SVG charts.

Nothing here reads recorded content except through `text`, which makes it inert: terminal and
bidi controls become visible escapes (`\x1b`, `\u202e`), then `html.escape(quote=True)`. The
script is a constant (no data is ever put inside it: it reads the DOM), so its SHA-256 is
computed once and is the only script the page's Content-Security-Policy allows.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
from collections.abc import Sequence

from evaltrace.collector.terminal import printable


def text(value: object, limit: int | None = None) -> str:
    """`value` as inert HTML text or attribute content, cut to `limit` characters first."""
    raw = str(value)
    if limit is not None and len(raw) > limit:
        raw = raw[: limit - 1] + "…"
    return html.escape(printable(raw, layout=True), quote=True)


STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:17px;margin:24px 0 8px}
.gate{padding:12px 16px;border-radius:6px;font-weight:600;color:#fff}
.gate.pass{background:#1a7f37}.gate.fail{background:#c62828}.gate.warn{background:#9a6700}
.gate small{display:block;font-weight:400;opacity:.9}
table{border-collapse:collapse;background:#fff}
td,th{border:1px solid #d8dde3;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#eef1f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.chart{background:#fff;border:1px solid #d8dde3;border-radius:6px;padding:8px}
.chart h3{font-size:13px;margin:0 0 4px}
.filters{display:flex;gap:16px;align-items:center;padding:8px 0;flex-wrap:wrap}
.entry{background:#fff;border:1px solid #d8dde3;border-left:6px solid #9aa5b1;margin:4px 0;border-radius:4px}
.entry[data-status=passed]{border-left-color:#1a7f37}
.entry[data-status=failed],.entry[data-status=missing]{border-left-color:#c62828}
.entry>summary,.entry.compact{padding:6px 10px;cursor:pointer}
.entry.compact{cursor:default}
.entry .body{padding:4px 12px 12px}
.status{display:inline-block;min-width:92px;font-weight:600;text-transform:uppercase;font-size:12px}
.chip{display:inline-block;padding:0 6px;margin:0 2px;border-radius:9px;font-size:12px;background:#eef1f4}
.chip.failed{background:#fde0e0}.chip.passed{background:#dff3e4}
.reason,.pre{white-space:pre-wrap;word-break:break-word}
.pre{font-family:ui-monospace,monospace;font-size:12px;background:#f6f7f9;padding:4px 6px;border-radius:4px}
ul.tree{list-style:none;padding-left:18px;margin:4px 0;border-left:1px dotted #9aa5b1}
ul.tree>li{margin:3px 0}.kind{font-weight:600;margin-right:6px}
.err{color:#b71c1c}.note{color:#57606a}
"""

SCRIPT = """
(function () {
  "use strict";
  var list = document.getElementById("entry-list");
  var failedOnly = document.getElementById("f-failed");
  var scorer = document.getElementById("f-scorer");
  var tier = document.getElementById("f-tier");
  var shown = document.getElementById("shown");
  function has(attr, value) { return (" " + (attr || "") + " ").indexOf(" " + value + " ") >= 0; }
  function keep(row) {
    var bad = row.getAttribute("data-failed") === "1";
    if (failedOnly.checked && !bad) { return false; }
    if (tier.value !== "" && row.getAttribute("data-tier") !== tier.value) { return false; }
    if (scorer.value === "") { return true; }
    var attr = failedOnly.checked ? "data-fails" : "data-scorers";
    return has(row.getAttribute(attr), scorer.value);
  }
  function apply() {
    var rows = list.querySelectorAll(".entry"), count = 0;
    for (var i = 0; i < rows.length; i++) {
      rows[i].hidden = !keep(rows[i]);
      if (!rows[i].hidden) { count++; }
    }
    shown.textContent = String(count);
  }
  function fill(entry) {
    var slots = entry.querySelectorAll("[data-slot]");
    for (var i = 0; i < slots.length; i++) {
      var slot = slots[i];
      if (slot.getAttribute("data-done") === "1") { continue; }
      var tree = document.getElementById("trace-" + slot.getAttribute("data-slot"));
      if (tree) { slot.replaceChildren(tree.content.cloneNode(true)); }
      slot.setAttribute("data-done", "1");
    }
  }
  list.addEventListener("toggle", function (event) {
    if (event.target.open) { fill(event.target); }
  }, true);
  [failedOnly, scorer, tier].forEach(function (control) { control.addEventListener("change", apply); });
  apply();
})();
"""

SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
"""The only script the page runs: its hash is in the Content-Security-Policy."""

CSP = f"default-src 'none'; style-src 'unsafe-inline'; script-src '{SCRIPT_HASH}'; base-uri 'none'; form-action 'none'"
"""No fetch of any kind (no network, no file), inline styles, and the one hashed script."""


def page_head(title: str) -> str:
    """The document up to `<main>`: charset, the Content-Security-Policy, the title and the style sheet."""
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{text(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n"
    )


def page_tail() -> str:
    """The script and the end of the document."""
    return f"</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n"


_BAR_WIDTH = 220
_ROW = 20


def bar_chart(title: str, rows: Sequence[tuple[str, int, int]]) -> str:
    """Horizontal bars of pass rates: `(label, passed, counted)` per row, as an inline SVG figure."""
    if not rows:
        return ""
    height = _ROW * len(rows) + 8
    parts = [f'<svg role="img" width="460" height="{height}" aria-label="{text(title)}">']
    for index, (label, passed, counted) in enumerate(rows):
        y = 4 + index * _ROW
        rate = passed / counted if counted else 0.0
        width = round(rate * _BAR_WIDTH)
        figure = f"{rate:.0%} ({passed}/{counted})" if counted else "n/a"
        parts.append(
            f'<text x="130" y="{y + 13}" text-anchor="end" font-size="12">{text(label, 22)}</text>'
            f'<rect x="136" y="{y + 2}" width="{_BAR_WIDTH}" height="14" fill="#fde0e0"></rect>'
            f'<rect x="136" y="{y + 2}" width="{width}" height="14" fill="#1a7f37"></rect>'
            f'<text x="{136 + _BAR_WIDTH + 6}" y="{y + 13}" font-size="12">{figure}</text>'
        )
    parts.append("</svg>")
    return _figure(title, "".join(parts))


_BINS = 12
_HIST_W = 300
_HIST_H = 90


def histogram(title: str, values: Sequence[float], unit: str) -> str:
    """The distribution of `values` as an inline SVG histogram of `_BINS` bins (empty: no chart)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    counts = _bin_counts(finite, low, high)
    peak = max(counts)
    step = _HIST_W / _BINS
    parts = [f'<svg role="img" width="{_HIST_W + 20}" height="{_HIST_H + 34}" aria-label="{text(title)}">']
    for index, count in enumerate(counts):
        bar = round(count / peak * _HIST_H)
        x = 10 + index * step
        parts.append(
            f'<rect x="{x:.1f}" y="{10 + _HIST_H - bar}" width="{step - 2:.1f}" height="{bar}" fill="#4a6fa5">'
            f"<title>{count}</title></rect>"
        )
    parts.append(
        f'<text x="10" y="{_HIST_H + 26}" font-size="11">{_number(low, unit)}</text>'
        f'<text x="{_HIST_W + 10}" y="{_HIST_H + 26}" font-size="11" text-anchor="end">{_number(high, unit)}</text>'
        "</svg>"
    )
    return _figure(f"{title} ({len(finite)} samples; tallest bar {peak})", "".join(parts))


def _bin_counts(values: Sequence[float], low: float, high: float) -> list[int]:
    counts = [0] * _BINS
    span = high - low
    for value in values:
        index = 0 if span <= 0 else min(int((value - low) / span * _BINS), _BINS - 1)
        counts[index] += 1
    return counts


def _number(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    if unit == "$":
        return f"${value:.4f}"
    return f"{value:,.0f} {unit}"


def _figure(title: str, svg: str) -> str:
    return f'<div class="chart"><h3>{text(title)}</h3>{svg}</div>'
