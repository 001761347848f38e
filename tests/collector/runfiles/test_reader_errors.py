"""Bad input gives one-line `InputError`s naming the file; stale in-flight files are cleaned safely."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.collector import InputError, resolve_paths
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.runfiles.batches import encode_spans
from evaltrace.collector.runfiles.layout import write_parquet
from evaltrace.collector.runfiles.reader import (
    clean_stale_inflight,
    find_stale_inflight,
    iter_traces,
    read_spans,
    summarize_runs,
)


@pytest.fixture()
def good_file(tmp_path: Path) -> Path:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("root", attributes={"k": "v" * 3000}):
        for i in range(20):
            with provider.get_tracer("t").start_as_current_span(f"s{i}", attributes={"i": i}):
                pass
    exporter = ParquetSpanExporter(tmp_path / "good", run_id="r", flush_interval=3600)
    exporter.export(memory.get_finished_spans())
    exporter.shutdown()
    (path,) = (tmp_path / "good").glob("*.parquet")
    return path


def _table(good_file: Path) -> pa.Table:
    return pq.read_table(good_file)


def _write(path: Path, table: pa.Table, metadata: dict[bytes, bytes] | None) -> Path:
    pq.write_table(table.replace_schema_metadata(metadata), path)
    return path


def expect_error(paths: list[str | Path], *fragments: str) -> str:
    with pytest.raises(InputError) as info:
        list(iter_traces(resolve_paths(paths)))
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_empty_glob_names_the_pattern(tmp_path: Path) -> None:
    expect_error([f"{tmp_path}/*.parquet"], f"no files match '{tmp_path}/*.parquet'")


def test_missing_path_is_named(tmp_path: Path) -> None:
    expect_error([tmp_path / "nope.parquet"], "nope.parquet", "no such file")


def test_a_pipe_is_not_taken_for_a_missing_path(tmp_path: Path) -> None:
    # `evaltrace score <(cat run.parquet)` names a pipe that exists but cannot be read from its end.
    fifo = tmp_path / "spans.parquet"
    os.mkfifo(fifo)
    expect_error([fifo], "spans.parquet", "not a regular file or folder")


def test_folder_without_parquet_files_mentions_inflight(tmp_path: Path) -> None:
    (tmp_path / ".inflight-h-1-aa.parquet.tmp").write_bytes(b"x")
    expect_error([tmp_path], str(tmp_path), "no *.parquet files", "1 in-flight")


def test_no_path_at_all() -> None:
    with pytest.raises(InputError, match="no PATH given"):
        resolve_paths([])


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: b"", id="empty"),
        pytest.param(lambda data: data[:-200], id="truncated-tail"),
        pytest.param(lambda data: data[: len(data) // 2], id="truncated-half"),
        pytest.param(lambda data: os.urandom(4096), id="random-bytes"),
        pytest.param(lambda data: b"PAR1" + b"\0" * 200 + b"PAR1", id="fake-magic"),
    ],
)
def test_unreadable_files_are_one_line_errors(
    good_file: Path, tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(damage(good_file.read_bytes()))
    expect_error([bad], f"{bad}: not a readable Parquet file")


def test_corrupt_data_pages_are_an_error_not_a_traceback(good_file: Path, tmp_path: Path) -> None:
    data = bytearray(good_file.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    for i in range(4, len(data) - footer):  # every data byte, leaving the footer readable
        data[i] ^= 0x5A
    bad = tmp_path / "pages.parquet"
    bad.write_bytes(bytes(data))
    expect_error([bad], f"{bad}:")


def test_foreign_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"x": [1, 2], "y": ["a", "b"]}), path)
    expect_error([path], f"{path}: not an evaltrace span file", "Was it written by evaltrace?")


def test_newer_schema_version_asks_to_upgrade(good_file: Path, tmp_path: Path) -> None:
    path = _write(tmp_path / "v2.parquet", _table(good_file), {b"evaltrace.schema_version": b"2"})
    expect_error([path], f"{path}:", "v2", "Upgrade evaltrace")


def test_missing_column(good_file: Path, tmp_path: Path) -> None:
    table = _table(good_file).drop_columns(["span_id"])
    path = _write(tmp_path / "a.parquet", table, {b"evaltrace.schema_version": b"1"})
    message = expect_error([path], "Was it written by evaltrace?")
    assert message == f"{path}: missing column 'span_id' (schema v1). Was it written by evaltrace?"


def test_wrong_column_type(good_file: Path, tmp_path: Path) -> None:
    table = _table(good_file)
    index = table.schema.get_field_index("duration_ns")
    table = table.set_column(index, "duration_ns", table["duration_ns"].cast(pa.float64()))
    path = _write(tmp_path / "t.parquet", table, {b"evaltrace.schema_version": b"1"})
    expect_error([path], f"{path}: column 'duration_ns' has type double, expected int64")


@pytest.mark.parametrize("column", ["trace_id", "span_id", "start_time"])
def test_an_empty_required_value_is_named_not_dropped(good_file: Path, tmp_path: Path, column: str) -> None:
    # Another writer's file may declare a required column nullable: a span without a trace id
    # was once skipped by the grouping without a word.
    table = _table(good_file)
    index = table.schema.get_field_index(column)
    values = table[column].to_pylist()
    values[7] = None
    field = table.schema.field(column).with_nullable(True)
    table = table.set_column(index, field, pa.array(values, field.type))
    path = _write(tmp_path / "null.parquet", table, {b"evaltrace.schema_version": b"1"})
    message = expect_error([path], f"{path}: row 8 has no {column} (a required column)")
    assert "\n" not in message
    with pytest.raises(InputError, match="row 8 has no"):
        summarize_runs(resolve_paths([path]))


def test_malformed_attribute_json_names_file_and_span(good_file: Path, tmp_path: Path) -> None:
    table = _table(good_file)
    bad_values = ['{"broken": '] + table["attributes"].to_pylist()[1:]
    table = table.set_column(table.schema.get_field_index("attributes"), table.schema.field("attributes"), [bad_values])
    path = _write(tmp_path / "json.parquet", table, {b"evaltrace.schema_version": b"1"})
    span_id = table["span_id"][0].as_py()
    expect_error([path], f"{path}: span {span_id} (row 0): malformed attribute JSON")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "attribute JSON nested too deeply to read"),
        ('{"a": NaN}', "malformed attribute JSON (NaN is not valid JSON)"),
        ('{"a": -Infinity}', "malformed attribute JSON (-Infinity is not valid JSON)"),
        ('{"a": ' + "7" * 5000 + "}", "malformed attribute JSON (Exceeds the limit (4300 digits)"),
    ],
    ids=["deep", "nan", "infinity", "huge-int"],
)
def test_hostile_attribute_json_is_an_input_error(good_file: Path, tmp_path: Path, text: str, fragment: str) -> None:
    table = _table(good_file)
    values = [text] + table["attributes"].to_pylist()[1:]
    table = table.set_column(table.schema.get_field_index("attributes"), table.schema.field("attributes"), [values])
    path = _write(tmp_path / "hostile.parquet", table, {b"evaltrace.schema_version": b"1"})
    message = expect_error([path], f"{path}: span {table['span_id'][0].as_py()} (row 0): ", fragment)
    assert len(message) < 400  # the value is not echoed whole


def test_text_that_is_not_utf8_is_an_input_error(good_file: Path, tmp_path: Path) -> None:
    table = _table(good_file)
    raw = pa.array([b"bad \xff name"] + [n.encode() for n in table["name"].to_pylist()[1:]], type=pa.binary())
    names = pa.Array.from_buffers(pa.string(), len(raw), raw.buffers())
    table = table.set_column(table.schema.get_field_index("name"), "name", names)
    path = _write(tmp_path / "utf8.parquet", table, {b"evaltrace.schema_version": b"1"})
    expect_error([path], f"{path}: a text column holds bytes that are not UTF-8 (invalid start byte")


def test_errors_come_before_any_trace_is_yielded(good_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "zz.parquet"
    bad.write_bytes(b"")
    traces = iter_traces(resolve_paths([good_file, bad]))
    with pytest.raises(InputError, match="zz.parquet"):
        next(traces)


def test_summary_reports_the_same_errors(tmp_path: Path) -> None:
    bad = tmp_path / "x.parquet"
    bad.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="x.parquet: not a readable Parquet file"):
        summarize_runs(resolve_paths([bad]))
    with pytest.raises(InputError, match="no files match"):
        list(read_spans(resolve_paths([str(tmp_path / "*.nothing")])))


def _inflight(folder: Path, host: str, pid: int) -> Path:
    path = folder / f".inflight-{host}-{pid}-{os.urandom(4).hex()}.parquet.tmp"
    path.write_bytes(b"partial")
    return path


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_clean_removes_dead_writers_files_and_keeps_live_ones(tmp_path: Path) -> None:
    host = socket.gethostname()
    live = _inflight(tmp_path, host, os.getpid())
    dead = _inflight(tmp_path, host, _dead_pid())
    old = time.time() - 10 * 3600
    os.utime(live, (old, old))  # age never overrides a live pid on this host

    assert find_stale_inflight(tmp_path) == [dead]
    assert clean_stale_inflight(tmp_path) == [dead]
    assert live.exists() and not dead.exists()


def test_other_hosts_files_are_removed_only_when_old(tmp_path: Path) -> None:
    fresh = _inflight(tmp_path, "other-host.example", 1)
    stale = _inflight(tmp_path, "other-host.example", 2)
    odd = tmp_path / ".inflight-unparsable.parquet.tmp"
    odd.write_bytes(b"")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    os.utime(odd, (old, old))

    assert clean_stale_inflight(tmp_path) == sorted([stale, odd], key=lambda p: p.name)
    assert fresh.exists()
    assert clean_stale_inflight(tmp_path, max_age_s=0) == [fresh]


def test_finished_files_and_real_exporter_temp_names_are_understood(good_file: Path) -> None:
    """The exporter's own temporary name (sanitised host) is recognised as this host's."""
    folder = good_file.parent
    exporter_host = next(
        p.name.split("--")[2].rsplit("-", 2)[0] for p in folder.glob("*.parquet")
    )  # `<run>--<ts>--<host>-<pid>-<seq>.parquet`
    live = _inflight(folder, exporter_host, os.getpid())
    dead = _inflight(folder, exporter_host, _dead_pid())
    assert clean_stale_inflight(folder) == [dead]
    assert live.exists() and good_file.exists()


def test_write_parquet_file_without_version_metadata_is_foreign(tmp_path: Path) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("t").start_as_current_span("root"):
        pass
    path = tmp_path / "nometa.parquet"
    write_parquet([encode_spans(memory.get_finished_spans(), "r")], str(path), {})
    expect_error([path], "not an evaltrace span file")


def test_malformed_event_json_names_the_span_holding_it(good_file: Path, tmp_path: Path) -> None:
    table = _table(good_file)
    rows = table.num_rows
    events: list[list[dict[str, object]]] = [[] for _ in range(rows)]
    events[0] = [{"time": 1, "name": "ok", "attributes": "{}"}]
    events[3] = [{"time": 2, "name": "fine", "attributes": '{"a": 1}'}, {"time": 3, "name": "bad", "attributes": "[1]"}]
    field = table.schema.field("events")
    table = table.set_column(table.schema.get_field_index("events"), field, [pa.array(events, type=field.type)])
    path = _write(tmp_path / "ev.parquet", table, {b"evaltrace.schema_version": b"1"})
    span_id = table["span_id"][3].as_py()
    expect_error([path], f"{path}: span {span_id} (row 3): malformed attribute JSON")
