"""`--markdown`'s writer on real recorded runs: the PR summary's content, hostile content inert, the step summary."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from report_runs import HOSTILE, PLUGIN, RUNS, record_runs, write_spec

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoredRun, ScoreOptions
from evaltrace.evaluators.results.report.formats import ReportTarget, open_formats
from evaltrace.evaluators.results.report.markdown_writer import MarkdownWriter, markdown_text
from evaltrace.evaluators.results.report.writer import ReportFormat
from evaltrace.evaluators.scoring.scorers.registry import load_plugins
from evaltrace.evaluators.scoring.spec.loader import load_spec

# CommonMark with GitHub's tables: how GitHub lays out a job summary or a PR comment.
RENDERER = MarkdownIt("commonmark").enable("table")


class Cells(HTMLParser):
    """The rendered HTML's elements and its table rows as cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def rendered(markdown: str) -> Cells:
    cells = Cells()
    cells.feed(RENDERER.render(markdown))
    return cells


PARIS = """\
cases:
  - id: paris
    input: "What's the weather in Paris?"
    expect: {output: {contains: ['18']}}
"""


def score(tmp_path: Path, writer: ReportFormat) -> ScoredRun:
    """Score `tmp_path/runs` with `tmp_path/evals.yaml` into `writer`."""
    try:
        run = scoring.score([tmp_path / "runs"], load_spec(tmp_path / "evals.yaml"), ScoreOptions(), writer)
        writer.finish(run.report)
    finally:
        writer.abort()
    return run


@pytest.fixture
def summary(tmp_path: Path, isolated_registry: None) -> Iterator[tuple[str, dict[str, object]]]:
    """The report-test run's Markdown summary, and its JSON report written in the same pass."""
    load_plugins([str(PLUGIN)])
    record_runs(tmp_path / "runs")
    write_spec(tmp_path)
    writer = open_formats(
        [("markdown", ReportTarget(str(tmp_path / "summary.md"))), ("json", ReportTarget(str(tmp_path / "r.json")))]
    )
    assert writer is not None
    score(tmp_path, writer)
    yield (tmp_path / "summary.md").read_text(encoding="utf-8"), json.loads((tmp_path / "r.json").read_text())


def test_summary_shows_gate_counts_scorers_failures_and_stats(summary: tuple[str, dict[str, object]]) -> None:
    text, report = summary
    lines = text.splitlines()
    assert lines[0] == "## evaltrace: ❌ gate failed"
    assert f"**Gate FAILED**: {report['gate_reason']}".replace("<", "&lt;") in lines
    cells = rendered(text)
    tables = cells.rows
    assert ["27.8%", "50.0%", "6", "1", "4", "1", "0"] in tables
    # Per scorer: passed / failed / did not apply / errors (the errored scorer's result is an error, not a failure).
    assert ["scorer", "passed", "failed", "did not apply", "errors"] in tables
    assert ["output", "3", "2", "0", "0"] in tables
    assert ["t_report_boom", "0", "0", "0", "1"] in tables
    assert ["t_report_echo", "0", "1", "0", "0"] in tables
    failed = {row[0].split("\n")[0]: row for row in tables if len(row) == 3 and row[0] != "entry"}
    assert list(failed) == ["hostile", "rome", "broken-scorer", "nothing-applies", "never-recorded"]
    assert failed["rome"][1] == "failed (pass rate 67%)"
    assert failed["rome"][2] == "output failed: passed in 2 of 3 samples; first failure: missing '21'."
    assert failed["never-recorded"][1:] == ["missing", "no trace matched this case (by evaltrace.case_id or by input)"]
    assert failed["broken-scorer"][2] == "t_report_boom error: scorer failed: RuntimeError: scorer blew up <b>&</b>"
    entries = {e["case_id"]: e for e in report["entries"]}  # type: ignore[attr-defined]
    assert failed["hostile"][0] == f"hostile\ntrace {entries['hostile']['trace_id']}"
    assert "- Latency p50 / p95: " in text and "- Tokens (in / out): 1,500 / 150" in lines
    assert f"- Estimated cost: ${report['cost']['estimated_usd']:.4f}" in lines  # type: ignore[index]


def test_hostile_recorded_content_stays_text_in_one_table_cell(summary: tuple[str, dict[str, object]]) -> None:
    text, _ = summary
    cells = rendered(text)
    # No element came from the recorded text: only the summary's own headings, tables, bold, lists and <br>.
    assert set(cells.tags) <= {
        "h2",
        "h3",
        "p",
        "strong",
        "code",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
        "br",
        "ul",
        "li",
    }
    hostile = next(row for row in cells.rows if row[0].startswith("hostile"))
    assert len(hostile) == 3  # pipes and newlines in the answer did not split or end the row
    echo = next(line for line in hostile[2].split("\n") if line.startswith("t_report_echo"))
    shown = " ".join(HOSTILE.split()).replace("\x1b", "\\x1b").replace("\x00", "\\x00").replace("\u202e", "\\u202e")
    assert echo.replace("\u200b", "") == f"t_report_echo failed: the answer was: {shown}"  # links broken invisibly
    for bad in ("\x1b", "\x00", "\u202e", "<script>", "<b>html"):
        assert bad not in text


def test_markdown_text_escapes_what_markdown_and_html_read() -> None:
    text = "a|b `c` *d* _e_ [f](g) <i>h</i> & ~~s~~ \\ \nnext\x1b"
    escaped = markdown_text(text)
    assert "\n" not in escaped and "\x1b" not in escaped
    cells = rendered(f"| x |\n|---|\n| {escaped} |\n")
    assert cells.rows[1] == ["a|b `c` *d* _e_ [f](g) <i>h</i> & ~~s~~ \\ next\\x1b"]
    assert set(cells.tags) == {"table", "thead", "tbody", "tr", "th", "td"}
    assert markdown_text("x" * 500, 20) == "x" * 17 + "..."


def test_markdown_text_gives_github_no_math_to_render() -> None:
    # GitHub renders $...$ and $$...$$ as LaTeX: recorded prices or shell variables would turn into math.
    text = "costs $5 and $6, $$x^2$$ and $`y`$ ${HOME}"
    escaped = markdown_text(text)
    assert "$" not in escaped
    cells = rendered(f"| x |\n|---|\n| {escaped} |\n")
    assert cells.rows[1] == [text]  # the reader sees the same characters, as text


def test_markdown_text_gives_github_nothing_to_link_or_mention() -> None:
    # A recorded answer may name people, issues and sites: the report must not ping @org/team,
    # reference #12 or offer a link the reader did not write (GitHub links these by itself).
    text = "ask @octo-org/admins or @alice, see #12, https://evil.example/x, www.evil.example, a@b.example"
    escaped = markdown_text(text)
    linking = MarkdownIt("commonmark", {"linkify": True}).enable(["table", "linkify"])
    html = linking.render(f"| x |\n|---|\n| {escaped} |\n")
    cells = Cells()
    cells.feed(html)
    shown = cells.rows[1][0]
    assert "a" not in cells.tags and "href" not in html
    assert shown.replace("\u200b", "") == text  # the reader sees the same characters
    assert not re.search(r"[@#][\w/-]|https?:/|www\.", shown)  # nothing GitHub reads as a mention, reference or link


def test_failed_entries_are_bounded_and_the_rest_counted(tmp_path: Path) -> None:
    runs = [{"user": f"question {i}", "answer": "no"} for i in range(7)]
    record_runs(tmp_path / "runs", runs)
    cases = "".join(
        f"  - id: q{i}\n    input: question {i}\n    expect: {{output: {{contains: [sure]}}}}\n" for i in range(7)
    )
    write_spec(tmp_path, "cases:\n" + cases)
    score(tmp_path, MarkdownWriter(str(tmp_path / "s.md"), limit=3))
    text = (tmp_path / "s.md").read_text(encoding="utf-8")
    rows = [row[0].split("\n")[0] for row in rendered(text).rows if len(row) == 3 and row[0] != "entry"]
    assert rows == ["q0", "q1", "q2"]
    assert "… and 4 more failed entries (see the JSON report)." in text.splitlines()


def test_step_summary_is_appended_never_truncated(tmp_path: Path) -> None:
    record_runs(tmp_path / "runs", RUNS[:1])
    write_spec(tmp_path, PARIS)
    step = tmp_path / "step_summary.md"
    step.write_text("# Earlier step\n", encoding="utf-8")
    score(tmp_path, MarkdownWriter(str(tmp_path / "s.md"), step_summary=str(step)))
    own = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert own.startswith("## evaltrace: ✅ gate passed\n")
    assert step.read_text(encoding="utf-8") == "# Earlier step\n" + own
    score(tmp_path, MarkdownWriter(str(tmp_path / "s.md"), step_summary=str(step)))
    again = (tmp_path / "s.md").read_text(encoding="utf-8")
    assert step.read_text(encoding="utf-8") == "# Earlier step\n" + own + again


def test_unwritable_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"s\.md: cannot write the Markdown summary"):
        MarkdownWriter(str(tmp_path / "missing" / "s.md"))
    record_runs(tmp_path / "runs", RUNS[:1])
    write_spec(tmp_path, PARIS)
    writer = MarkdownWriter(str(tmp_path / "s.md"), step_summary=str(tmp_path / "missing" / "step.md"))
    with pytest.raises(InputError, match=r"^GITHUB_STEP_SUMMARY \(.*step\.md\): cannot append the Markdown summary"):
        score(tmp_path, writer)
