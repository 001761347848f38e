"""`evaltrace compact`: a folder's small span files merged into few, with every span kept.

Files come from the real exporter (rolled small on purpose), the command runs as a real
subprocess, and what the traces say is compared before and after.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_process import evaltrace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from evaltrace.collector import resolve_paths
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.runfiles import layout
from evaltrace.collector.runfiles.compact import compact_folder
from evaltrace.collector.runfiles.reader import summarize_runs


def _record(folder: Path, run_id: str, traces: int, *, files_of: int, dropped: int = 0) -> None:
    """`traces` agent turns (3 spans each), a file every `files_of` spans, `dropped` queue drops counted."""
    exporter = ParquetSpanExporter(folder, run_id=run_id, max_rows=files_of)
    exporter.note_dropped(dropped)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for i in range(traces):
        with tracer.start_as_current_span("invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}):
            with tracer.start_as_current_span("chat", attributes={"gen_ai.usage.input_tokens": i}) as chat:
                chat.add_event("gen_ai.choice", {"index": 0, "message": f"answer {i}"})
            with tracer.start_as_current_span("execute_tool", attributes={"gen_ai.tool.name": "lookup"}) as tool:
                if i % 5 == 0:
                    tool.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()


def _traces(folder: Path) -> list[dict[str, Any]]:
    done = evaltrace("traces", folder, "--json")
    assert done.returncode == 0, done.stderr
    return sorted((json.loads(line) for line in done.stdout.splitlines()), key=lambda t: t["trace_id"])


def _summary(folder: Path) -> dict[str, Any]:
    summary = summarize_runs(resolve_paths([folder])).model_dump(mode="json", exclude={"files", "trace_list"})
    return summary


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.parquet"))


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    _record(folder, "alpha", 20, files_of=4, dropped=3)  # 15 files of 4 spans
    _record(folder, "beta", 10, files_of=6, dropped=2)  # 5 files of 6 spans
    _record(folder, "big", 4, files_of=12)  # one file already at --max-rows below
    return folder


def test_compact_merges_each_run_and_keeps_every_span(runs: Path) -> None:
    before_traces, before_summary, before_files = _traces(runs), _summary(runs), _files(runs)
    assert len(before_files) == 15 + 5 + 1

    done = evaltrace("compact", runs, "--max-rows", "12")
    assert done.returncode == 0, done.stderr
    assert f"{runs}: 21 files -> 9;" in done.stdout

    after = _files(runs)
    # alpha: 60 spans in files of 4 -> 5 files of 12; beta: 30 spans in files of 6 -> 3 of 12, 6;
    # big: its one full file is left as it was.
    assert [name.split("--")[0] for name in after].count("alpha") == 5
    assert [name.split("--")[0] for name in after].count("beta") == 3
    assert [name for name in after if name.startswith("big")] == [n for n in before_files if n.startswith("big")]
    assert all(pq.read_metadata(runs / name).num_rows <= 12 for name in after)
    assert _traces(runs) == before_traces
    assert _summary(runs) == before_summary  # spans, traces, services, run ids, lost spans (3 + 2)
    assert not list(runs.glob(".inflight-*"))


def test_dry_run_changes_nothing(runs: Path) -> None:
    before = _files(runs)
    done = evaltrace("compact", runs, "--max-rows", "12", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would merge 3 files (12 spans) into" in done.stdout
    assert f"{runs}: 21 files would become 9 (dry run)" in done.stdout
    assert _files(runs) == before


def test_a_second_compaction_finds_nothing_to_do(runs: Path) -> None:
    assert evaltrace("compact", runs).returncode == 0
    files = _files(runs)
    again = evaltrace("compact", runs, "--json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["merged"] == [] and result["files_before"] == len(files) == 3  # one file per run id
    assert _files(runs) == files


def test_duplicate_spans_are_kept_once(runs: Path) -> None:
    first = runs / _files(runs)[0]
    shutil.copy(first, runs / f"alpha--copy--{first.name.split('--', 2)[2]}")
    before = _traces(runs)
    assert evaltrace("compact", runs).returncode == 0
    assert _traces(runs) == before
    assert summarize_runs(resolve_paths([runs])).duplicate_spans == 0


def test_an_unreadable_file_stops_it_before_anything_changes(runs: Path) -> None:
    (runs / "alpha--broken.parquet").write_bytes(b"PAR1 not really")
    before = _files(runs)
    done = evaltrace("compact", runs)
    assert done.returncode == 2
    assert done.stderr.startswith("Error: ") and "alpha--broken.parquet" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert _files(runs) == before


def test_one_compaction_per_folder_at_a_time(runs: Path) -> None:
    fd = os.open(runs, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        done = evaltrace("compact", runs)
    finally:
        os.close(fd)
    assert done.returncode == 2
    assert "another evaltrace compact is running on this folder" in done.stderr


def test_a_failed_write_removes_nothing(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _files(runs)

    def disk_full(*args: Any, **kwargs: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(layout, "write_parquet", disk_full)
    with pytest.raises(Exception, match="could not write a merged file .*No space left on device.*nothing was removed"):
        compact_folder(runs)
    assert _files(runs) == before
    assert not list(runs.glob(".inflight-*"))


def test_killed_between_rename_and_removal_loses_and_doubles_nothing(
    runs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Stopped right after the merged file appears: sources and merged file both exist, and
    # readers still see each span once.
    before = _traces(runs)
    real_unlink = Path.unlink

    def killed(self: Path, missing_ok: bool = False) -> None:
        if self.suffix == ".parquet":
            raise KeyboardInterrupt
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", killed)
    with pytest.raises(KeyboardInterrupt):
        compact_folder(runs, max_rows=12)
    monkeypatch.undo()
    assert any("--compacted-" in name for name in _files(runs))
    assert _traces(runs) == before


def test_runs_suggests_compaction_for_many_small_files(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    _record(folder, "chatty", 20, files_of=1)  # 60 files of one span
    before = evaltrace("runs", folder)
    assert before.returncode == 0, before.stderr
    assert "small files: 60 files of 1 span on average ('evaltrace compact PATH' merges them" in before.stdout
    assert evaltrace("compact", folder).returncode == 0
    after = evaltrace("runs", folder)
    assert "small files" not in after.stdout and "files:       1" in after.stdout
