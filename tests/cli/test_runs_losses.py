"""Spans a recording lost are counted in the files and shown by `evaltrace runs`.

A run that silently lost spans would be scored as if its traces were complete: the counts the
writers keep (queue drops, failed writes) must reach the user.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cli_process import evaltrace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from evaltrace.collector import resolve_paths
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.recording import EvaltraceSpanProcessor
from evaltrace.collector.runfiles import batches
from evaltrace.collector.runfiles.reader import summarize_runs


def _metadata(path: Path) -> dict[str, str]:
    raw = pq.read_metadata(path).metadata or {}
    return {k.decode(): v.decode() for k, v in raw.items()}


def test_a_full_queue_is_counted_in_the_file_and_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real SDK batch processor with a tiny queue, its worker held inside the first export:
    # every span ended meanwhile beyond the queue's 4 places is dropped by the SDK.
    exporting = threading.Event()
    release = threading.Event()
    real_encode = batches.encode_spans

    def held_encode(*args: Any, **kwargs: Any) -> Any:
        exporting.set()
        release.wait(10)
        return real_encode(*args, **kwargs)

    monkeypatch.setattr(batches, "encode_spans", held_encode)
    exporter = ParquetSpanExporter(tmp_path, run_id="lossy")
    provider = TracerProvider()
    provider.add_span_processor(EvaltraceSpanProcessor(exporter, max_queue_size=4, max_export_batch_size=1))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("first"):
        pass
    assert exporting.wait(10)
    for i in range(30):
        with tracer.start_as_current_span(f"s{i}"):
            pass
    release.set()
    provider.shutdown()

    (path,) = tmp_path.glob("*.parquet")
    written = pq.read_metadata(path).num_rows
    dropped = int(_metadata(path)["evaltrace.dropped_spans"])
    assert dropped > 0
    assert written + dropped == 31  # every span ended is either in the file or counted
    summary = summarize_runs(resolve_paths([tmp_path]))
    assert (summary.dropped_spans, summary.unwritten_spans) == (dropped, 0)


def test_an_sdk_without_the_drop_hook_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Queue drops are counted through the SDK batch processor's internal metrics; an SDK without
    # them must not let "no drops" pass for a count.
    real_init = BatchSpanProcessor.__init__

    def init_without_hook(self: BatchSpanProcessor, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        del self._batch_processor._metrics  # type: ignore[attr-defined]

    monkeypatch.setattr(BatchSpanProcessor, "__init__", init_without_hook)
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        processor = EvaltraceSpanProcessor(ParquetSpanExporter(tmp_path))
    monkeypatch.undo()
    processor._batch_processor._metrics = _NoMetrics()  # type: ignore[attr-defined]
    processor.shutdown()
    assert "offers no hook to count spans it drops on a full queue" in caplog.text


class _NoMetrics:
    """Stands in for the removed metrics so the processor can shut down."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _record(folder: Path, run_id: str, drops: list[int]) -> ParquetSpanExporter:
    """One writer, one file per entry of `drops`, each after counting that many more queue drops."""
    exporter = ParquetSpanExporter(folder, run_id=run_id)
    provider = TracerProvider()
    provider.add_span_processor(EvaltraceSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    # Each span is a whole agent run with its input and answer, so scoring it passes and the only
    # warning left is the one about lost spans.
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}])
    question = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "go"}]}])
    run = {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": question, "gen_ai.output.messages": answer}
    for n in drops:
        exporter.note_dropped(n)
        with tracer.start_as_current_span("invoke_agent s", attributes=run):
            pass
        provider.force_flush()
    provider.shutdown()
    return exporter


def test_each_writer_counts_once_however_many_files_it_wrote(tmp_path: Path) -> None:
    # Counts are cumulative per writer: files of one writer say 2 then 5 (not 2 + 5 = 7 lost).
    first = _record(tmp_path, "shared", [2, 3])
    second = _record(tmp_path, "shared", [4])  # same run id and host: only the writer id tells them apart
    files = sorted(tmp_path.glob("*.parquet"))
    assert len(files) == 3
    assert {_metadata(f)["evaltrace.writer_id"] for f in files} == {first.writer_id, second.writer_id}
    assert summarize_runs(resolve_paths([tmp_path])).dropped_spans == 5 + 4


def test_runs_shows_lost_spans_only_when_there_are_some(tmp_path: Path) -> None:
    _record(tmp_path / "clean", "ok", [0])
    _record(tmp_path / "lossy", "lossy", [7])
    clean = evaltrace("runs", tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    assert "lost spans" not in clean.stdout
    lossy = evaltrace("runs", tmp_path / "lossy")
    assert lossy.returncode == 0, lossy.stderr
    assert "lost spans:  7 dropped (the export queue was full), 0 not written" in lossy.stdout
    as_json = evaltrace("runs", tmp_path / "lossy", "--json")
    assert '"dropped_spans": 7' in as_json.stdout


@pytest.mark.parametrize("workers", ["1", "2"])
def test_score_warns_that_the_traces_it_scored_may_be_incomplete(tmp_path: Path, workers: str) -> None:
    _record(tmp_path / "lossy", "lossy", [3, 2])
    done = evaltrace("score", tmp_path / "lossy", "--workers", workers, "--json", tmp_path / "report.json")
    assert done.returncode == 0, done.stderr
    assert "Warning: the recording lost 5 spans (5 dropped by a full export queue, 0 not written)" in done.stdout
    inputs = json.loads((tmp_path / "report.json").read_text())["inputs"]
    assert (inputs["dropped_spans"], inputs["unwritten_spans"]) == (5, 0)
    _record(tmp_path / "clean", "ok", [0])
    clean = evaltrace("score", tmp_path / "clean", "--workers", workers)
    assert clean.returncode == 0, clean.stderr
    assert "Warning" not in clean.stdout
