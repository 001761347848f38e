"""The one sync (`score`) and one async (`ascore`) scoring entry, on span files and on `Trace` records."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from evaltrace.collector import read_traces, resolve_paths
from evaltrace.collector.errors import InputError
from evaltrace.evaluators import EntryResult, ScoreOptions, ascore, score
from evaltrace.evaluators.results.report.writer import EntryList

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "runs"


def _ids(entries: list[EntryResult]) -> list[str | None]:
    return [entry.trace_id for entry in entries]


def test_files_and_records_give_the_same_entries_sync_and_async() -> None:
    options = ScoreOptions(cache=False, workers=1)
    from_files = score(str(SAMPLES), None, options)  # one path, no sink: entries kept in the report
    traces = list(read_traces(resolve_paths([SAMPLES])))
    from_records = score(traces, None, options)
    in_loop = asyncio.run(ascore(traces, None, options))
    files_in_loop = asyncio.run(ascore([SAMPLES], None, options))
    assert len(from_files.report.entries) == len(traces) > 0
    expected = _ids(from_files.report.entries)
    for run in (from_records, in_loop, files_in_loop):
        assert _ids(run.report.entries) == expected
        assert run.report.passed == from_files.report.passed


def test_a_sink_takes_the_entries_instead_of_the_report() -> None:
    sink = EntryList()
    run = score([SAMPLES], None, ScoreOptions(cache=False, workers=1), sink)
    assert run.report.entries == [] and len(sink.entries) == run.report.counts.entries > 0


def test_records_are_scored_in_this_process_only() -> None:
    traces = list(read_traces(resolve_paths([SAMPLES])))
    with pytest.raises(InputError, match=r"engine 'ray' scores span files"):
        score(traces, None, engine="ray")
    with pytest.raises(InputError, match=r"Unknown engine 'spark'\. Valid choices: local, ray"):
        score([SAMPLES], None, engine="spark")
