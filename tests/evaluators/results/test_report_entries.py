"""Report writers receive typed entries; the JSON fast path and the typed view say the same thing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from test_report import make_report

from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.results.report.model import EntryResult, SampleResult, ScoreResult, load_report
from evaltrace.evaluators.results.report.writer import (
    EntryFields,
    EntryList,
    Parked,
    ReportEntry,
    ReportFormat,
    entry_head,
    park,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def sample(n: int, passed: bool) -> SampleResult:
    return SampleResult(
        trace_id=f"t{n}",
        status="passed" if passed else "failed",
        passed=passed,
        scores=[ScoreResult(scorer="output", passed=passed, reason=None if passed else f"sample {n} said no")],
        start_time=T0 + timedelta(seconds=n),
        output="caf\u00e9 \u202e",  # non-ASCII and a bidi control: copied as stored, parsed back the same
    )


def case_entry() -> EntryResult:
    return EntryResult(case_id="c1", trace_id="t0", passed=False, status="failed", pass_rate=0.5, rule="mean")


class StoredSamples:
    """Samples as the engine parks them (`park`), counting the reads."""

    def __init__(self, samples: list[SampleResult]) -> None:
        self.records = [park(s.model_dump_json().encode(), b"") for s in samples]
        self.reads = 0

    def __call__(self) -> Parked:
        self.reads += 1
        return Parked.of(self.records)


def decided(entry: EntryResult, stored: StoredSamples) -> ReportEntry:
    """`entry` (its samples left out) as a scoring worker hands it over, with `stored`'s samples."""
    return ReportEntry.decided(entry_head(entry.model_dump(exclude={"samples"})), EntryFields.of(vars(entry)), stored)


def test_an_entry_with_stored_samples_is_the_same_typed_or_as_json() -> None:
    samples = [sample(0, True), sample(1, False)]
    stored = StoredSamples(samples)
    entry = decided(case_entry(), stored)
    whole = case_entry().model_copy(update={"samples": samples})
    assert entry.result() == whole
    assert EntryResult.model_validate_json(entry.json_bytes()) == whole
    assert json.loads(entry.json_bytes())["samples"][1]["scores"][0]["reason"] == "sample 1 said no"
    assert entry.fields() == EntryFields.of(vars(case_entry()))
    assert stored.reads == 1  # read on first use, then kept for the entry's other writers


def test_an_entry_without_samples_keeps_an_empty_list() -> None:
    entry = decided(case_entry(), StoredSamples([]))
    assert entry.json_bytes().endswith(b'"samples":[]}')
    assert entry.result() == case_entry()


def test_an_entry_given_as_json_is_parsed_only_for_the_typed_view() -> None:
    payload = case_entry().model_dump_json().encode()
    entry = ReportEntry.from_json(payload)
    assert entry.json_bytes() == payload
    assert entry.result() == case_entry()
    assert ReportEntry.of(case_entry()).result() is not None
    assert ReportEntry.of(case_entry()).json_bytes() == payload


def test_every_writer_gets_the_same_entries(tmp_path: Path) -> None:
    stored = StoredSamples([sample(0, True), sample(1, False)])
    entries = [decided(case_entry(), stored), ReportEntry.of(case_entry())]
    in_memory = EntryList()
    target = tmp_path / "report.json"
    with ReportWriter(str(target)) as json_writer:
        writers: list[ReportFormat | EntryList] = [in_memory, json_writer]
        for entry in entries:
            for writer in writers:
                writer.add(entry)
        json_writer.finish(make_report([], passed=False))
    assert load_report(target).entries == in_memory.entries
    assert [len(e.samples) for e in in_memory.entries] == [2, 0]
