"""`evaltrace runs` times: exact to the microsecond like the converter's, and kept to the nanosecond."""

from __future__ import annotations

import fnmatch
import glob
import json
from pathlib import Path

from cli_process import evaltrace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.cli._options import _literal_glob
from evaltrace.collector import resolve_paths
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.runfiles.reader import summarize_runs
from evaltrace.collector.traces.rebuild import read_traces

# 2026-01-01T00:00:00.123456999Z: as a float of seconds this rounds up to .123457.
START = 1_767_225_600_123_456_999
END = START + 2_000_000_001


def _record(directory: Path) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(directory, run_id="r")))
    tracer = provider.get_tracer("t")
    root = tracer.start_span("invoke_agent a", attributes={"gen_ai.operation.name": "invoke_agent"}, start_time=START)
    root.end(end_time=END)
    provider.shutdown()


def test_summary_times_are_exact(tmp_path: Path) -> None:
    _record(tmp_path)
    summary = summarize_runs(resolve_paths([tmp_path]))
    (trace,) = summary.trace_list
    assert (trace.start_time_ns, trace.end_time_ns) == (START, END)
    assert (summary.start_time_ns, summary.end_time_ns) == (START, END)
    assert trace.start_time.microsecond == 123_456 and trace.end_time.microsecond == 123_457
    # The same instants the converter gives for the trace (both truncate to the microsecond).
    (converted,) = read_traces(resolve_paths([tmp_path]))
    assert (trace.start_time, trace.end_time) == (converted.start_time, converted.end_time)
    done = evaltrace("runs", tmp_path, "--json", "--traces")
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert (printed["start_time_ns"], printed["trace_list"][0]["end_time_ns"]) == (START, END)
    assert printed["start_time"].endswith("00:00:00.123456Z")


def test_case_id_glob_matches_only_that_id() -> None:
    ids = ["a*b", "a?b", "a[b]", "[x", "plain", "axb", "ab", "a[b"]
    for case_id in ids:
        pattern = _literal_glob(case_id)
        assert [i for i in ids if fnmatch.fnmatchcase(i, pattern)] == [case_id]
        assert pattern == glob.escape(case_id)  # the same as glob.escape where paths have no drive
