"""`--html`'s writer on real recorded runs, in process: the page's bounds (drill-downs, compact rows), the
trace trees read again from the span files, and what the page says when they cannot be read.

The page in a browser (filters, drill-down, hostile text, no console error) is tests/cli/test_html_report.py's.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from report_runs import PLUGIN, record_runs, write_spec

from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report import html_writer
from evaltrace.evaluators.results.report.formats import ReportTarget, open_formats
from evaltrace.evaluators.results.report.html_writer import HtmlWriter
from evaltrace.evaluators.scoring.scorers.registry import load_plugins
from evaltrace.evaluators.scoring.spec.loader import load_spec


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    load_plugins([str(PLUGIN)])
    record_runs(tmp_path / "runs")
    write_spec(tmp_path)
    return tmp_path


def score_to_html(folder: Path, *, remove_runs: bool = False) -> str:
    writer = HtmlWriter(str(folder / "report.html"))
    paths = (str(folder / "runs"),)  # as the CLI does: the report names them, and the trees are read from them
    run = scoring.score(paths, load_spec(folder / "evals.yaml"), ScoreOptions(paths=paths), writer)
    if remove_runs:  # the span files are gone by the time the page is assembled
        shutil.rmtree(folder / "runs")
    writer.finish(run.report)
    return (folder / "report.html").read_text(encoding="utf-8")


def test_every_shown_entry_gets_its_trace_tree(recorded: Path) -> None:
    page = score_to_html(recorded)
    assert page.count('<details class="entry"') == 6 and 'class="entry compact"' not in page
    slots = re.findall(r'data-slot="(\d+)"', page)
    templates = re.findall(r'<template id="trace-(\d+)">', page)
    # 7 traces (rome has 3 samples), one slot each; the missing case has none; every tree was found.
    assert len(slots) == 7 and sorted(templates) == sorted(set(slots))
    assert 'id="trees-note"' not in page
    paris = page[page.index('<template id="trace-0">') : page.index("</template>")]
    assert "get_weather" in paris and "18C sunny" in paris and "&quot;city&quot;: &quot;Paris&quot;" in paris


def test_entries_past_the_limits_are_compact_rows(recorded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(html_writer, "MAX_DETAILED_FAILED", 2)
    monkeypatch.setattr(html_writer, "MAX_DETAILED_OTHER", 0)
    page = score_to_html(recorded)
    # Entries in report order: paris (passed), hostile, rome, broken-scorer, nothing-applies, never-recorded.
    detailed = re.findall(r'<details class="entry"[^>]*>.*?<b class="case">([^<]+)</b>', page)
    compact = re.findall(r'<div class="entry compact"[^>]*>.*?<b class="case">([^<]+)</b>', page)
    assert detailed == ["hostile", "rome"]
    assert compact == ["paris", "broken-scorer", "nothing-applies", "never-recorded"]
    assert "4 entries past the first 2 failed and 0 other entries are compact rows" in page
    assert len(re.findall(r'<template id="trace-\d+">', page)) == 4  # hostile's trace and rome's three


def test_unreadable_span_files_leave_a_note_not_a_failure(recorded: Path) -> None:
    page = score_to_html(recorded, remove_runs=True)
    assert "<template" not in page and page.rstrip().endswith("</html>")
    note = re.search(r'<p class="note" id="trees-note">([^<]*)</p>', page)
    assert note is not None and note.group(1).startswith("Trace trees: 0 drawn; the span files could not be read again")


def test_a_report_naming_no_span_files_says_why_there_is_no_tree(recorded: Path) -> None:
    writer = HtmlWriter(str(recorded / "report.html"))
    run = scoring.score([str(recorded / "runs")], load_spec(recorded / "evals.yaml"), ScoreOptions(), writer)
    writer.finish(run.report)
    page = (recorded / "report.html").read_text(encoding="utf-8")
    assert "<template" not in page and "the report names no span files" in page


def test_the_registry_opens_the_html_writer_and_abort_leaves_nothing(recorded: Path) -> None:
    writer = open_formats([("html", ReportTarget(str(recorded / "page.html"), cache=False))])
    assert isinstance(writer, HtmlWriter)
    writer.abort()
    assert not list(recorded.glob("*page.html*"))
