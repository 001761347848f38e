"""`evaltrace history` on real scoring runs: the shipped samples scored three times through the CLI.

The second scoring uses a spec variant that makes the `output` scorer fail two cases (its
configuration changes there, and back in the third). Every expected rate, sparkline and change
mark is computed here from the three JSON reports alone, not from the store. The README's DuckDB
query over the store is run here as written.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from datetime import datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import duckdb
import pytest
from _chromium import chromium_executable, headless_page
from cli_process import evaltrace
from readme_blocks import sql_block

REPO = Path(__file__).resolve().parents[2]
SAMPLE_RUNS = REPO / "samples" / "runs"
SAMPLE_SPEC = REPO / "samples" / "evals.yaml"
BLOCKS = "▁▂▃▄▅▆▇█"

# The README's query (History): each scorer's pass rate in every scoring run, oldest run first.
README_QUERY = sql_block("/store/scores/**/*.parquet")
"""The README's pass-rate-per-scorer query over the score store, run as written there."""


@dataclass(frozen=True)
class Scored:
    """The store, the specs scored with, and each scoring's run id and JSON report (oldest first)."""

    folder: Path
    store: Path
    variant: Path
    run_ids: list[str]
    reports: list[dict[str, Any]]


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Scored:
    folder = tmp_path_factory.mktemp("history")
    store = folder / ".evaltrace" / "store"
    text = SAMPLE_SPEC.read_text(encoding="utf-8")
    planted = text.replace('contains: ["18"]\n', 'contains: ["19"]\n').replace('["18", "24"]', '["18", "25"]')
    assert planted.count('"19"') == 1 and planted.count('"25"') == 1
    variant = folder / "variant.yaml"
    variant.write_text(planted, encoding="utf-8")
    run_ids, reports = [], []
    for n, spec in enumerate([SAMPLE_SPEC, variant, SAMPLE_SPEC]):
        report = folder / f"r{n}.json"
        result = evaltrace("score", SAMPLE_RUNS, "--spec", spec, "--store", store, "--json", report, cwd=folder)
        assert result.returncode == (1 if spec == variant else 0), result.stderr
        run_ids.append(result.stderr.split("scores stored: ")[1].split()[0])
        reports.append(json.loads(report.read_text(encoding="utf-8")))
    return Scored(folder, store, variant, run_ids, reports)


def rate(count: dict[str, int]) -> float | None:
    applied = count["passed"] + count["failed"]
    return count["passed"] / applied if applied else None


def expected_rates(reports: list[dict[str, Any]], scorer: str) -> list[float | None]:
    found = [{c["scorer"]: c for c in report["scorer_counts"]}.get(scorer) for report in reports]
    return [None if count is None else rate(count) for count in found]


def expected_changes(reports: list[dict[str, Any]], scorer: str) -> list[bool]:
    """Whether the scorer's (version, config hash) set differs from the previous report's that ran it."""
    marks, previous = [], None
    for report in reports:
        configs = {(s["version"], s["config_hash"]) for s in report["scorers"] if s["name"] == scorer}
        marks.append(bool(configs) and previous is not None and configs != previous)
        previous = configs or previous
    return marks


def expected_sparkline(rates: list[float | None], changes: list[bool]) -> str:
    # Half-up rounding onto eight levels, 0% is the lowest block and 100% the highest.
    chars = ("·" if r is None else BLOCKS[int(r * 7 + 0.5)] for r in rates)
    return "".join(("|" if mark else "") + char for char, mark in zip(chars, changes, strict=True))


def scored_history(scored: Scored) -> dict[str, Any]:
    """`evaltrace history --json -` of the scored store."""
    done = evaltrace("history", "--store", scored.store, "--json", "-")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The table's rows by label: the sparkline and figures, split on runs of two spaces."""
    lines = stdout.split("\n\n")[1].splitlines()
    assert lines[0].split() == ["scorer", "pass", "rate", "by", "run", "latest", "change", "min", "max"]
    rows = {}
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split("  ") if cell.strip()]
        rows[cells[0]] = cells[1:]
    return rows


def test_the_table_shows_each_scorer_s_rates_as_a_sparkline_with_the_change_marked(scored: Scored) -> None:
    result = evaltrace("history", "--store", scored.store, cwd=scored.folder)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    rows = table_rows(result.stdout)
    scorers = [c["scorer"] for c in scored.reports[0]["scorer_counts"]]
    assert list(rows) == ["gate (entries)", *scorers]
    for scorer in scorers:
        rates = expected_rates(scored.reports, scorer)
        sparkline = expected_sparkline(rates, expected_changes(scored.reports, scorer))
        known = [r for r in rates if r is not None]
        delta = round(((rates[2] or 0) - (rates[1] or 0)) * 100, 1)
        change = "±0.0 pts" if delta == 0 else f"{delta:+.1f} pts"
        assert rows[scorer] == [sparkline, f"{rates[2]:.1%}", change, f"{min(known):.1%}", f"{max(known):.1%}"]
    # The planted change: output fell to 4/6 in the variant's run, and its configuration changed twice.
    assert expected_rates(scored.reports, "output") == [1.0, 4 / 6, 1.0]
    assert rows["output"][:3] == ["█|▆|█", "100.0%", "+33.3 pts"]
    assert rows["tool_call_validity"][0] == "███"  # the same configuration in all three
    gates = [report["pass_rate"] for report in scored.reports]
    gate_figures = [f"{gates[2]:.1%}", "+33.3 pts", f"{min(gates):.1%}", f"{max(gates):.1%}"]
    assert rows["gate (entries)"] == [expected_sparkline(gates, [False, True, True]), *gate_figures]
    assert "output at run 2, output at run 3" in result.stdout
    assert "the spec's content changed at run 2, run 3" in result.stdout
    listed = result.stdout.split("Runs, oldest first:\n")[1].splitlines()
    assert [line.split()[1] for line in listed] == scored.run_ids
    # The sparklines' time axis: the first and the last run's start.
    starts = [datetime.fromisoformat(r["started_at"]) for r in scored_history(scored)["runs"]]
    span = f"Runs from {starts[0]:%Y-%m-%d %H:%M} to {starts[-1]:%Y-%m-%d %H:%M} UTC, one character each."
    assert span in result.stdout.splitlines(), result.stdout
    assert "gate FAILED 66.7% (4/6)" in listed[1] and str(scored.variant) in listed[1]


def test_json_with_its_value_left_out_prints_to_stdout(scored: Scored) -> None:
    # CONTRACT: `evaltrace history [--store DIR] [--json]`; `--json -` and `--json FILE` still work.
    dash = evaltrace("history", "--store", scored.store, "--json", "-", cwd=scored.folder)
    at_end = evaltrace("history", "--store", scored.store, "--json", cwd=scored.folder)
    before_option = evaltrace("history", "--json", "--store", scored.store, cwd=scored.folder)
    assert at_end.returncode == before_option.returncode == 0, at_end.stderr + before_option.stderr
    assert json.loads(at_end.stdout) == json.loads(before_option.stdout) == json.loads(dash.stdout)
    assert "pass rate by run" in at_end.stderr and "pass rate by run" not in at_end.stdout


def test_json_series_equal_the_reports_scorer_counts(scored: Scored) -> None:
    result = evaltrace("history", "--store", scored.store, "--json", "-", cwd=scored.folder)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert "pass rate by run" in result.stderr  # the table moves to stderr
    assert [run["run_id"] for run in data["runs"]] == scored.run_ids
    assert [run["gate_pass_rate"] for run in data["runs"]] == [r["pass_rate"] for r in scored.reports]
    assert [run["gate_passed"] for run in data["runs"]] == [r["passed"] for r in scored.reports]
    for series in data["scorers"]:
        name = series["scorer"]
        for point, report in zip(series["points"], scored.reports, strict=True):
            count = next(c for c in report["scorer_counts"] if c["scorer"] == name)
            fields = ("passed", "failed", "errors", "not_applied")
            assert {key: point[key] for key in fields} == {key: count[key] for key in fields}
            assert point["pass_rate"] == rate(count)
        assert [p["changed"] for p in series["points"]] == expected_changes(scored.reports, name)
    assert {s["scorer"] for s in data["scorers"]} == {c["scorer"] for c in scored.reports[0]["scorer_counts"]}


def test_the_readme_query_reads_the_same_series(scored: Scored, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(scored.folder)
    rows = duckdb.sql(README_QUERY).fetchall()
    expected = [
        (run_id, c["scorer"], c["passed"], c["failed"], c["errors"], c["not_applied"], rate(c))
        for run_id, report in zip(scored.run_ids, scored.reports, strict=True)
        for c in sorted(report["scorer_counts"], key=lambda c: c["scorer"])
    ]
    assert [row[1:] for row in rows] == expected


def test_last_scorer_and_spec_select_runs_and_rows(scored: Scored) -> None:
    last = evaltrace("history", "--store", scored.store, "--last", "2", "--scorer", "output", "--scorer", "usage")
    assert last.returncode == 0, last.stderr
    rows = table_rows(last.stdout)
    assert list(rows) == ["gate (entries)", "output", "usage"]
    assert rows["output"][0] == "|▆|█"  # the change into the window's first run is still marked
    assert "2 scoring runs (of 3 in" in last.stdout

    by_path = evaltrace("history", "--store", scored.store, "--spec", scored.variant, "--json", "-")
    assert [run["run_id"] for run in json.loads(by_path.stdout)["runs"]] == scored.run_ids[1:2]
    copy = scored.folder / "copy of evals.yaml"
    shutil.copyfile(SAMPLE_SPEC, copy)  # the same bytes elsewhere: its runs by content hash
    by_hash = evaltrace("history", "--store", scored.store, "--spec", copy, "--json", "-")
    assert [run["run_id"] for run in json.loads(by_hash.stdout)["runs"]] == scored.run_ids[0::2]
    assert "of spec " in by_hash.stderr


def test_html_is_one_self_contained_page_with_a_chart_per_row(scored: Scored) -> None:
    page = scored.folder / "history.html"
    result = evaltrace("history", "--store", scored.store, "--html", page)
    assert result.returncode == 0, result.stderr
    text = page.read_text(encoding="utf-8")
    parsed = parse(text)
    assert "http" not in text.lower() and not parsed.external
    assert parsed.tags.count("svg") == 1 + len(scored.reports[0]["scorer_counts"])
    assert parsed.headings[:3] == ["evaltrace history", "gate (entries)", "tool_call_validity"]
    assert parsed.tags.count("tr") == 1 + 3  # the runs table
    # The x axis is dated: under each chart, every run's start date and time (UTC), oldest first.
    runs = scored_history(scored)["runs"]
    started = [datetime.fromisoformat(run["started_at"]) for run in runs]
    ticks = re.findall(r'<text class="axis tick"[^>]*>(\d{4}-\d{2}-\d{2})<tspan[^>]*>(\d{2}:\d{2})</tspan>', text)
    assert ticks == [(f"{s:%Y-%m-%d}", f"{s:%H:%M}") for s in started] * parsed.tags.count("svg"), ticks
    assert text.count("run started (UTC)</text>") == parsed.tags.count("svg")


class Page(HTMLParser):
    """Tags, headings and anything that would load or run something."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.headings: list[str] = []
        self.external: list[str] = []
        self._heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._heading = tag in ("h1", "h2")
        if tag in ("script", "link", "img", "iframe", "object", "embed"):
            self.external.append(tag)
        self.external += [f"{tag} {name}" for name, _ in attrs if name in ("src", "href") or name.startswith("on")]

    def handle_data(self, data: str) -> None:
        if self._heading:
            self.headings.append(data)
            self._heading = False


def parse(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


HOSTILE_NAME = "<script>alert(1)</script>&amp;\x1b[31m\u202e"
HOSTILE_PLUGIN = f"""\
from typing import Any, ClassVar

from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.registry import register


@register
class Hostile(Scorer):
    name: ClassVar[str] = {HOSTILE_NAME!r}

    def score(self, trace: Any, case: Any | None = None) -> Score:
        return self.result(True, reason="ok")
"""


def test_hostile_scorer_names_and_spec_paths_stay_inert(tmp_path: Path) -> None:
    (tmp_path / "hostile_plugin.py").write_text(HOSTILE_PLUGIN, encoding="utf-8")
    spec = tmp_path / "<img src=x onerror=alert(2)>&'\".yaml"
    cases = 'cases:\n  - {id: paris, input: "What\'s the weather in Paris?", expect: {output: {contains: ["18"]}}}\n'
    spec.write_text(f"scorers: [{json.dumps(HOSTILE_NAME)}]\n{cases}", encoding="utf-8")
    store = tmp_path / "store"
    plugin = ("--plugin", "hostile_plugin.py")
    scoring = evaltrace("score", SAMPLE_RUNS, "--spec", spec.name, *plugin, "--store", store, cwd=tmp_path)
    assert scoring.returncode == 0, scoring.stderr
    result = evaltrace("history", "--store", store, "--html", "h.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert "<script>alert(1)</script>&amp;\\x1b[31m\\u202e  █" in result.stdout  # shown escaped, columns aligned
    text = (tmp_path / "h.html").read_text(encoding="utf-8")
    parsed = parse(text)
    assert parsed.tags.count("svg") == 3 and not parsed.external
    assert "<script>alert(1)</script>&amp;\\x1b[31m\\u202e" in parsed.headings  # as text, not markup
    assert "&lt;img src=x onerror=alert(2)&gt;&amp;&#x27;&quot;.yaml" in text and "\x1b" not in text
    with headless_page(chromium_executable()) as page:  # as a reader's browser shows it
        page.open(tmp_path / "h.html")
        assert page.problems() == []  # no alert dialog, console error, CSP violation or exception
        assert page.evaluate("[document.scripts.length, document.images.length]") == [0, 0]
        headings = page.evaluate("[...document.querySelectorAll('h2')].map(h => h.textContent)")
        assert "<script>alert(1)</script>&amp;\\x1b[31m\\u202e" in headings
        assert page.evaluate("document.querySelectorAll('svg').length") == 3
        widths = page.evaluate("[...document.querySelectorAll('svg')].map(s => s.getBoundingClientRect().width)")
        assert all(width > 0 for width in widths)  # each chart is laid out, not collapsed


def test_bad_input_is_one_error_line_and_exit_2(scored: Scored, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    specs = ", ".join(sorted([str(SAMPLE_SPEC), str(scored.variant)]))
    cases = [
        (["--store", tmp_path / "nowhere"], f"Error: {tmp_path / 'nowhere'}: no score store here: the folder does not"),
        (["--store", tmp_path / "empty"], f"Error: {tmp_path / 'empty'}: the score store holds no scoring run yet"),
        (
            ["--store", scored.store, "--scorer", "nope"],
            "Error: --scorer nope: no such scorer in the stored runs "
            "(scorers: answer_quality, output, tool_call_validity, trajectory, usage)",
        ),
        (
            ["--store", scored.store, "--spec", tmp_path / "other.yaml"],
            f"Error: --spec {tmp_path / 'other.yaml'}: "
            f"no stored scoring run used this spec (specs in the store: {specs})",
        ),
        (["--store", scored.store, "--html", "-"], "Error: --html -: the html report is written to a file only"),
        (["--store", scored.store, "--html", tmp_path], f"Error: --html {tmp_path}: names a folder"),
        (["--store", scored.store, "--last", "0"], "Error: Invalid value for '--last'"),
    ]
    for args, error in cases:
        result = evaltrace("history", *args, cwd=tmp_path)
        assert (result.returncode, result.stdout) == (2, ""), (args, result.stderr)
        assert result.stderr.startswith(error) and result.stderr.count("\n") == 1, (args, result.stderr)


def test_help_names_what_each_option_takes() -> None:
    result = evaltrace("history", "--help", env={"COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    rows = {line.split()[1]: line.split()[2] for line in result.stdout.splitlines() if line.startswith("│ --")}
    expected = {
        "--store": "DIR",
        "--last": "N",
        "--scorer": "NAME",
        "--spec": "PATH",
        "--json": "[FILE]",  # the value may be left out: stdout
        "--html": "FILE",
    }
    assert rows == {**expected, "--help": "Show"}
    assert "Exit codes: 0 shown; 2 bad input" in " ".join(result.stdout.split())
