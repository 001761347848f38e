"""Entries copied from the spill a case at a time: every writer gets what the per-trace path gives it.

The spill holds results by case and writes each case's as runs (`_spill._HELD`); a case is read back
in a few reads and its samples' JSON joined at once (`writer.Parked`). These tests cut the runs
small, so that a case's samples lie in several runs and in memory, and compare every output.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine_shards import record_spec_run

from evaltrace.evaluators.engine import _spill, scoring
from evaltrace.evaluators.engine._spill import Spill
from evaltrace.evaluators.engine.scoring import ScoreOptions
from evaltrace.evaluators.results.report.formats import FanOut, ReportTarget, open_formats
from evaltrace.evaluators.results.report.writer import park
from evaltrace.evaluators.results.store.writer import open_store
from evaltrace.evaluators.scoring.spec.loader import load_spec

T0 = datetime(2026, 1, 1, tzinfo=UTC)
_RECORDS = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.none() | st.integers(0, 3),
        st.text(max_size=3),  # the sample's JSON, its head's, its side's lengths vary
        st.integers(0, 4),
        st.binary(max_size=6),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(records=_RECORDS, held=st.sampled_from([0, 1, 40, 1 << 20]), message=st.integers(1, 7))
def test_a_case_read_back_in_runs_is_its_samples_in_order(
    records: list[tuple[str, int | None, str, int, bytes]], held: int, message: int
) -> None:
    expected: dict[str, list[tuple[datetime, str, int, bytes, bytes, bytes]]] = {}
    rows = []
    for arrival, (group, second, text, head, side) in enumerate(records):
        start = None if second is None else T0 + timedelta(seconds=second)
        sample, before = json.dumps({"n": arrival, "t": text}).encode(), b"H" * head
        rows.append((group, start, f"t{arrival % 3}", park(before + sample, side), len(before)))
        key = (start or datetime.max.replace(tzinfo=UTC), f"t{arrival % 3}", arrival)
        expected.setdefault(group, []).append((*key, before, sample, side))
    _spill._HELD, kept = held, _spill._HELD
    try:
        with Spill() as spill:
            for at in range(0, len(rows), message):  # as messages of `message` rows
                spill.add_rows(rows[at : at + message])
            for group in ("a", "b", "c", "never"):
                wanted = sorted(expected.get(group, []))
                parked = spill.parked(group)
                joined = b",".join(sample for *_, sample, _ in wanted)
                assert parked.json(b"[", b"]}") == b"[" + joined + b"]}"
                assert parked.sides() == [side for *_, side in wanted]
                assert list(parked.samples()) == [(len(h), h + s) for *_, h, s, _ in wanted]
                assert spill.count(group) == len(wanted)
    finally:
        _spill._HELD = kept


def _outputs(runs: Path, spec: Path, folder: Path, options: ScoreOptions) -> dict[str, Any]:
    """Every format's output of one scoring and its store rows (but what differs by design: times, run ids)."""
    folder.mkdir()
    loaded = load_spec(spec)
    names = {"json": "report.json", "junit": "junit.xml", "markdown": "report.md"}
    formats = open_formats([(name, ReportTarget(str(folder / file))) for name, file in names.items()])
    assert formats is not None
    store = open_store(folder / "store", loaded)
    sink = FanOut([formats, store])
    try:
        run = scoring.score([runs], loaded, options, sink)
        sink.finish(run.report)
    finally:
        sink.abort()  # nothing once finished
    report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
    del report["created_at"]
    report["unmatched"] = sorted(u["trace_id"] for u in report["unmatched"])  # by shard when sharded
    texts = {name: (folder / file).read_text(encoding="utf-8") for name, file in names.items() if name != "json"}
    times = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+(Z|\+00:00)?|time=\"[\d.]+\"")
    (scores,) = (folder / "store" / "scores").iterdir()
    parts = sorted(scores.iterdir()) if scores.is_dir() else [scores]
    rows = pa.concat_tables([pq.read_table(part) for part in parts]).drop_columns(["run_id", "run_started_at"])
    return {
        "report": report,
        **{name: times.sub("TIME", text) for name, text in texts.items()},
        "rows": rows.to_pylist(),
    }


def test_every_writer_gets_the_per_trace_entries_from_a_sharded_run_read_in_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, spec = record_spec_run(tmp_path / "recorded")
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_spill, "_HELD", 3000)  # the weather case's 40 samples: several runs, a few held
    per_trace = ScoreOptions(paths=(str(runs),), workers=1, columnar=False)
    expected = _outputs(runs, spec, tmp_path / "one", per_trace)
    for name in ("cold", "warm"):  # the tables written, then read (the samples from the forms)
        sharded = ScoreOptions(paths=(str(runs),), workers=2)
        assert _outputs(runs, spec, tmp_path / name, sharded) == expected
    weather = next(entry for entry in expected["report"]["entries"] if entry["case_id"] == "weather")
    assert len(weather["samples"]) == 40  # from both workers: the scenario the test means
    assert sum(row["case_id"] == "weather" for row in expected["rows"]) == 40 * 4  # four results a sample
    assert "weather" in expected["junit"] and "weather" in expected["markdown"]
