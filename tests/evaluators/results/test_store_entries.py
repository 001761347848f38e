"""The score store's fast paths: rows from parked samples, and Arrow arrays built without `pa.array`.

The engine parks each sample's values beside its JSON and the store makes its rows from those;
these tests hold that path to the one from typed entries (the JSON report read back), and the
store's own Arrow arrays to what `pa.array` makes of the same values.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from report_runs import PLUGIN
from test_score_store import prepare, score_into

from evaltrace.evaluators.engine import scoring
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.model import EntryResult, SampleResult, ScoreResult
from evaltrace.evaluators.results.report.sample_row import SampleRow
from evaltrace.evaluators.results.report.writer import EntryFields, Parked, ReportEntry, entry_head, park
from evaltrace.evaluators.results.store.identities import ScorerIdentity
from evaltrace.evaluators.results.store.rows import RunContext, ScorerIndex, ScoreRows
from evaltrace.evaluators.results.store.schema import SCORES_SCHEMA
from evaltrace.evaluators.results.store.sides import pack_sides, sample_side, unpack_side
from evaltrace.evaluators.results.store.writer import open_store
from evaltrace.evaluators.scoring.scorers.registry import load_plugins
from evaltrace.evaluators.scoring.spec.loader import load_spec

VOLATILE = ("run_id", "run_started_at")


@pytest.fixture
def plugin_scorers(isolated_registry: None) -> Iterator[None]:
    load_plugins([str(PLUGIN)])
    yield


def stored_rows(store: Path, run_id: str) -> pa.Table:
    return pq.read_table(store / "scores" / f"{run_id}.parquet").drop_columns(list(VOLATILE))


@pytest.mark.parametrize("case", ["samples", "samples-defaults", "report-runs", "repeats", "multi-turn"])
def test_rows_from_parked_samples_equal_rows_from_the_typed_entries(
    case: str, tmp_path: Path, plugin_scorers: None
) -> None:
    runs, spec_file = prepare(case, tmp_path)
    report, run_id = score_into(tmp_path / "fast", runs, spec_file, tmp_path / "report.json")
    # The same entries given whole (read back from the JSON report): the store parses nothing else.
    writer = open_store(tmp_path / "typed", load_spec(spec_file) if spec_file is not None else None)
    for entry in report.entries:
        writer.add(ReportEntry.of(entry))
    writer.finish(report)
    fast, typed = stored_rows(tmp_path / "fast", run_id), stored_rows(tmp_path / "typed", writer.run_id)
    assert fast.num_rows == typed.num_rows > 0
    assert fast.equals(typed)


class _Sides:
    """A sink keeping each entry's JSON and whether its samples came with score-store values."""

    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.packed: list[bool] = []

    def add(self, entry: ReportEntry) -> None:
        self.entries.append(entry.json_bytes())
        # A case without samples has no sides either way; one decided whole gave its rows to the store (`stored`).
        self.packed.append(bool(entry.sides()) or entry.stored)


@pytest.mark.parametrize("case", ["samples", "repeats"])
def test_without_a_store_the_samples_are_not_packed_and_the_entries_are_the_same(case: str, tmp_path: Path) -> None:
    runs, spec_file = prepare(case, tmp_path)
    spec = load_spec(spec_file) if spec_file is not None else None
    sinks = {}
    for store_values in (True, False):
        sink = sinks[store_values] = _Sides()
        options = ScoreOptions(paths=(str(runs),), store_values=store_values, workers=1)
        scoring.score([runs], spec, options, sink)
    assert sinks[True].entries == sinks[False].entries and sinks[True].entries
    assert any(sinks[True].packed) and not any(sinks[False].packed)


def conversation_sample() -> SampleResult:
    scores = [
        ScoreResult(scorer="output", passed=True, value=1.0, reason="caf\u00e9 \u202e", turn=1, details={"n": [1, 2]}),
        ScoreResult(scorer="turns", passed=False, reason="no trace for turn 3", turn=3),
        ScoreResult(scorer="boom", passed=False, reason="scorer failed", error="ValueError", turn=2),
    ]
    return SampleResult(
        trace_id="t1",
        trace_ids=["t1", "t2"],
        root_span_ids=["r1", None],
        conversation_id="c",
        status="failed",
        passed=False,
        scores=scores,
        start_time=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=7),
        duration_seconds=2.5,
        cost_usd=None,
    )


IDENTITIES = [ScorerIdentity("output", 1, "0123456789ab"), None, ScorerIdentity("boom", 3, "ba9876543210")]


def test_a_packed_side_is_the_samples_values_in_row_order() -> None:
    sample = SampleRow.of(conversation_sample())
    assert unpack_side(pack_sides([sample], [IDENTITIES])[0]) == sample_side(sample, IDENTITIES)
    side = sample_side(sample, IDENTITIES)
    assert side.values == ("c", 1_767_225_600_000_007, 2.5, 0, 0, None) and side.trace_id == "t1"
    # Each result: its turn's trace (none for a turn past the conversation), its scorer's identity.
    assert [row[:5] for row in side.results] == [
        ("t1", 1, "output", 1, "0123456789ab"),
        (None, 3, "turns", None, None),
        ("t2", 2, "boom", 3, "ba9876543210"),
    ]
    assert [row[-1] for row in side.results] == ['{"n": [1, 2]}', None, None]
    assert [row[-2] for row in side.results] == [None, None, "ValueError"]
    no_time = sample._replace(start_time=None, scores=[])
    assert (
        unpack_side(pack_sides([no_time], [[]])[0])
        == sample_side(no_time, [])
        == (("c", None, 2.5, 0, 0, None), "t1", ())
    )
    with pytest.raises(ValueError):
        sample_side(sample, IDENTITIES[:2])  # one identity per result


def test_a_decided_entry_reads_its_records_once_and_gives_the_json_and_the_sides() -> None:
    sample = conversation_sample()
    reads: list[int] = []

    def records() -> Parked:
        reads.append(1)
        return Parked.of(
            [park(sample.model_dump_json().encode(), pack_sides([SampleRow.of(sample)], [IDENTITIES])[0])] * 2
        )

    head = EntryResult(case_id="c", trace_id="t1", passed=False, status="failed", pass_rate=0.0, rule="mean")
    entry = ReportEntry.decided(entry_head(head.model_dump(exclude={"samples"})), EntryFields.of(vars(head)), records)
    whole = head.model_copy(update={"samples": [sample, sample]})
    assert EntryResult.model_validate_json(entry.json_bytes()) == whole
    assert entry.result() == whole and entry.result() is entry.result()
    assert entry.fields() == EntryFields.of(vars(head))
    assert [unpack_side(side) for side in entry.sides() or []] == [sample_side(SampleRow.of(sample), IDENTITIES)] * 2
    assert len(reads) == 1
    assert ReportEntry.of(head).sides() is None and ReportEntry.of(head).fields() is None


def test_the_store_writes_its_arrays_without_importing_pandas(tmp_path: Path) -> None:
    runs, spec_file = prepare("samples", tmp_path)
    score_into(tmp_path / "first", runs, spec_file, tmp_path / "report.json")
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from evaltrace.evaluators.results.report.model import load_report
        from evaltrace.evaluators.results.report.writer import ReportEntry
        from evaltrace.evaluators.scoring.spec.loader import load_spec
        from evaltrace.evaluators.results.store.writer import open_store

        report = load_report({str(tmp_path / "report.json")!r})
        writer = open_store(Path({str(tmp_path / "second")!r}), load_spec({str(spec_file)!r}))
        for entry in report.entries:
            writer.add(ReportEntry.of(entry))
        writer.finish(report)
        print(writer.run_id, "pandas" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    run_id, pandas = done.stdout.split()
    assert pandas == "False"
    assert stored_rows(tmp_path / "second", run_id).num_rows > 0


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=8), batch_rows=st.integers(1, 5))
def test_rows_are_the_same_whatever_batches_they_are_cut_into(shape: list[list[int]], batch_rows: int) -> None:
    """An entry's and a sample's values are kept once and repeated onto their rows (`ScoreRows`), across batches."""
    sample = SampleRow.of(conversation_sample())
    started = datetime(2026, 1, 1, tzinfo=UTC)
    tables = []
    for size in (batch_rows, 10_000):
        rows = ScoreRows(RunContext("run", started), ScorerIndex(None), batch_rows=size)
        batches = []
        for entry_index, samples in enumerate(shape):  # per entry, per sample: how many results it has
            sides = [
                sample_side(sample._replace(trace_id=f"t{n}", scores=sample.scores[:n]), IDENTITIES[:n])
                for n in samples
            ]
            fields = EntryFields(f"case {entry_index}", None, ("a",), "mean", "passed", True, 1.0)
            batches += rows.add_sides(entry_index, fields, sides)
        last = rows.flush()
        batches += [] if last is None else [last]
        assert all(len(batch) == size for batch in batches[:-1])
        tables.append(pa.Table.from_batches(batches, schema=SCORES_SCHEMA) if batches else None)
    if not shape:
        assert tables == [None, None]
        return
    cut, whole = tables
    assert cut is not None and whole is not None and cut.equals(whole)
    rows_of = [
        [(e, None)] if not ns else [(e, s) for s, n in enumerate(ns) for _ in range(max(n, 1))]
        for e, ns in enumerate(shape)
    ]
    indexes = zip(cut["entry_index"].to_pylist(), cut["sample_index"].to_pylist(), strict=True)
    assert list(indexes) == [row for rows in rows_of for row in rows]
