"""The review app's data: a run scored with relative paths still shows its traces when given them as PATH."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_process import evaltrace
from review_store import record_traces

from evaltrace.evaluators.results.review.data import Filters, ReviewData


def test_a_runs_trace_is_found_among_the_path_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    record_traces(work / "runs", 3)
    scored = evaltrace("score", "runs", "--store", "store", cwd=work)  # the run names its input as "runs"
    assert scored.returncode in (0, 1), scored.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # "runs" names nothing from here
    store = work / "store"
    source = ReviewData(store).sources()[0]["id"]
    assert source.startswith("run:")
    assert ReviewData(store).entry(source, 0)["samples"][0]["tree"] is None  # not found: the page says so
    data = ReviewData(store, (str(work / "runs"),))
    entry = data.entry(source, 0)
    assert "Question 00?" in entry["samples"][0]["tree"]
    assert [e["index"] for e in data.entries(source, Filters())] == [0, 1, 2]
    assert len(data.entries("paths", Filters())) == 3
