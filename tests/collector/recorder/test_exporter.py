"""ParquetSpanExporter with the real SDK and real files: round trip, rolling, failures."""

from __future__ import annotations

import logging
import math
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.runfiles import batches, layout
from evaltrace.collector.runfiles.jsonvalue import loads_attributes
from evaltrace.collector.runfiles.layout import SCHEMA
from evaltrace.collector.runfiles.schema import INFLIGHT_PREFIX, LARGE_VALUE_BYTES

ALL_TYPES: dict[str, Any] = {
    "s": "plain",
    "unicode": "héllo 世界 🚀 \u0000 end",
    "empty_s": "",
    "i": 42,
    "neg": -(2**62),
    "f": 1.5,
    "f_int": 2.0,
    "nan": math.nan,
    "inf": math.inf,
    "ninf": -math.inf,
    "b_true": True,
    "b_false": False,
    "arr_s": ("a", "é", ""),
    "arr_i": (1, 2, 3),
    "arr_f": (0.5, math.nan, math.inf, -math.inf),
    "arr_b": (True, False),
    "arr_empty": (),
    "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
    "big": "x" * LARGE_VALUE_BYTES,
    "big_utf8": "é" * (LARGE_VALUE_BYTES // 2),  # 512 chars, 1024 bytes
    "almost_big": "y" * (LARGE_VALUE_BYTES - 1),
    "gen_ai.prompt.0.content": "flattened prompt",
    "big_array": tuple("z" * 2000 for _ in range(2)),  # non-strings always stay in JSON
}


def _provider(exporter: ParquetSpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _int_times(table: pa.Table) -> pa.Table:
    """Timestamps as int64 ns: Python datetimes cannot hold nanoseconds."""
    event = pa.struct([("time", pa.int64()), ("name", pa.string()), ("attributes", pa.string())])
    fields = []
    for f in table.schema:
        if pa.types.is_timestamp(f.type):
            f = f.with_type(pa.int64())
        elif f.name == "events":
            f = f.with_type(pa.list_(event))
        fields.append(f)
    return table.cast(pa.schema(fields))


def _rows(directory: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.parquet")):
        rows.extend(_int_times(pq.read_table(path)).to_pylist())
    return rows


def _merged(row: dict[str, Any]) -> dict[str, Any]:
    attributes = loads_attributes(row["attributes"])
    for key, value in row["large_attributes"] or []:
        assert key not in attributes, f"{key} stored twice"
        attributes[key] = value
    return attributes


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, list) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def test_every_attribute_event_and_link_round_trips(tmp_path: Path) -> None:
    exporter = ParquetSpanExporter(tmp_path, run_id="rt")
    tracer = _provider(exporter).get_tracer("scope.x", "1.2.3")
    with tracer.start_as_current_span("parent", kind=SpanKind.SERVER) as parent:
        link = Link(parent.get_span_context(), {"link.attr": 7, "arr": (1.0, math.nan)})
        with tracer.start_as_current_span("child", kind=SpanKind.CLIENT, links=[link], attributes=ALL_TYPES) as child:
            child.add_event("ev1", {"content": "hi", "n": math.inf, "arr": ("p", "q")}, timestamp=1_700_000_000_123)
            child.add_event("ev2")
            child.set_status(Status(StatusCode.ERROR, "boom"))
    exporter.force_flush()

    rows = {r["name"]: r for r in _rows(tmp_path)}
    child_row, parent_row = rows["child"], rows["parent"]
    merged = _merged(child_row)
    assert set(merged) == set(ALL_TYPES)
    for key, value in ALL_TYPES.items():
        assert _same(value, merged[key]), key
    large = dict(child_row["large_attributes"])
    assert set(large) == {"gen_ai.input.messages", "big", "big_utf8", "gen_ai.prompt.0.content"}
    assert child_row["kind"] == "CLIENT" and parent_row["kind"] == "SERVER"
    assert child_row["status_code"] == "ERROR" and child_row["status_message"] == "boom"
    assert child_row["parent_span_id"] == parent_row["span_id"] and parent_row["parent_span_id"] is None
    assert re.fullmatch(r"[0-9a-f]{32}", child_row["trace_id"]) and re.fullmatch(r"[0-9a-f]{16}", child_row["span_id"])
    assert child_row["scope_name"] == "scope.x" and child_row["scope_version"] == "1.2.3"
    ev1, ev2 = child_row["events"]
    assert ev1["name"] == "ev1" and ev2["name"] == "ev2" and loads_attributes(ev2["attributes"]) == {}
    ev_attrs = loads_attributes(ev1["attributes"])
    assert ev_attrs == {"content": "hi", "n": math.inf, "arr": ["p", "q"]}
    (lk,) = child_row["links"]
    assert (lk["trace_id"], lk["span_id"]) == (parent_row["trace_id"], parent_row["span_id"])
    link_attrs = loads_attributes(lk["attributes"])
    assert link_attrs["link.attr"] == 7 and math.isnan(link_attrs["arr"][1])
    assert child_row["run_id"] == "rt"
    assert loads_attributes(child_row["resource"])["service.name"] == child_row["service_name"]


def test_exact_timestamps_and_schema(tmp_path: Path) -> None:
    exporter = ParquetSpanExporter(tmp_path)
    tracer = _provider(exporter).get_tracer("t")
    span = tracer.start_span("timed", start_time=1_700_000_000_000_000_001)
    span.add_event("e", timestamp=1_700_000_000_000_000_002)
    span.end(end_time=1_700_000_000_000_000_999)
    exporter.force_flush()
    (path,) = tmp_path.glob("*.parquet")
    table = pq.read_table(path)
    assert table.schema.remove_metadata() == SCHEMA
    raw = table.column("start_time").cast("int64").to_pylist()[0]
    assert raw == 1_700_000_000_000_000_001
    assert table.column("end_time").cast("int64").to_pylist()[0] == 1_700_000_000_000_000_999
    assert table.column("duration_ns").to_pylist() == [998]
    event_time = table.column("events").combine_chunks().flatten().field("time").cast("int64").to_pylist()
    assert event_time == [1_700_000_000_000_000_002]


def test_promoted_columns_copy_first_present_key(tmp_path: Path) -> None:
    exporter = ParquetSpanExporter(tmp_path)
    tracer = _provider(exporter).get_tracer("t")
    attrs = {
        "gen_ai.system": "openai",
        "gen_ai.provider.name": "azure",
        "session.id": "conv-1",
        "llm.token_count.prompt": 12,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.tool.name": "get_weather",
        "evaltrace.case_id": "case-7",
    }
    with tracer.start_as_current_span("s", attributes=attrs):
        pass
    exporter.force_flush()
    (row,) = _rows(tmp_path)
    assert row["gen_ai_provider_name"] == "azure"  # gen_ai.provider.name outranks gen_ai.system
    assert row["gen_ai_conversation_id"] == "conv-1"
    assert row["gen_ai_usage_input_tokens"] == 12 and row["gen_ai_usage_output_tokens"] == 5
    assert row["gen_ai_tool_name"] == "get_weather" and row["case_id"] == "case-7"
    assert row["gen_ai_request_model"] is None
    assert _merged(row) == attrs  # promoted values stay in the JSON too


def test_file_name_metadata_and_row_order(tmp_path: Path) -> None:
    exporter = ParquetSpanExporter(tmp_path, run_id="my run/../x--y")
    tracer = _provider(exporter).get_tracer("t")
    for index in range(20):
        with tracer.start_as_current_span(f"root-{index}"):
            pass
    exporter.force_flush()
    (path,) = tmp_path.glob("*.parquet")
    assert re.fullmatch(r"my_run_\.\._x-y--\d{8}T\d{6}\.\d{6}Z--[\w.-]+-\d+-00001\.parquet", path.name), path.name
    meta = pq.read_metadata(path).metadata
    assert meta[b"evaltrace.schema_version"] == b"1"
    assert meta[b"evaltrace.run_id"] == b"my run/../x--y"
    assert {b"evaltrace.pid", b"evaltrace.host", b"evaltrace.writer_version", b"evaltrace.promoted_keys"} <= set(meta)
    assert meta[b"evaltrace.dropped_spans"] == b"0" and meta[b"evaltrace.unwritten_spans"] == b"0"
    # Rows stay in export order (random trace ids would scatter a sorted file's rows).
    assert pq.read_table(path).column("name").to_pylist() == [f"root-{index}" for index in range(20)]
    assert pq.ParquetFile(path).metadata.row_group(0).column(0).compression == "ZSTD"


def test_rolls_on_row_threshold_and_on_age(tmp_path: Path) -> None:
    exporter = ParquetSpanExporter(tmp_path / "rows", max_rows=3, flush_interval=3600)
    tracer = _provider(exporter).get_tracer("t")
    for _ in range(7):
        with tracer.start_as_current_span("s"):
            pass
    assert sorted(len(pq.read_table(p)) for p in (tmp_path / "rows").glob("*.parquet")) == [3, 3]

    aged = ParquetSpanExporter(tmp_path / "age", flush_interval=0.2)
    with _provider(aged).get_tracer("t").start_as_current_span("s"):
        pass
    deadline = time.monotonic() + 5
    while not list((tmp_path / "age").glob("*.parquet")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_rows(tmp_path / "age")) == 1  # written by the timer thread, no flush called
    aged.shutdown()


def test_shutdown_writes_is_idempotent_and_refuses_later_exports(tmp_path: Path) -> None:
    exporter = ParquetSpanExporter(tmp_path)
    provider = _provider(exporter)
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    exporter.shutdown()
    exporter.shutdown()
    assert len(_rows(tmp_path)) == 1
    assert exporter.export([]) is SpanExportResult.FAILURE
    assert not list(tmp_path.glob(f"{INFLIGHT_PREFIX}*"))


def test_unwritable_folder_logs_keeps_spans_and_retries(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a regular file: nothing can be created under it, even by root")
    target = blocker / "runs"
    exporter = ParquetSpanExporter(target)
    tracer = _provider(exporter).get_tracer("t")
    with caplog.at_level(logging.ERROR, logger="evaltrace"):
        with tracer.start_as_current_span("kept"):
            pass
        assert exporter.force_flush() is False
    assert any("could not write 1 spans" in r.getMessage() for r in caplog.records)
    # The folder becomes writable: the kept batch is written by the next roll.
    blocker.unlink()
    assert exporter.force_flush() is True
    assert [r["name"] for r in _rows(target)] == ["kept"]


def test_buffer_bounded_while_writes_fail_and_drops_counted(tmp_path: Path) -> None:
    from evaltrace.collector.recorder.exporter import ExporterSettings

    blocker = tmp_path / "file"
    blocker.write_text("x")
    settings = ExporterSettings(directory=blocker / "runs", max_rows=1000, max_buffered_rows=2)
    exporter = ParquetSpanExporter(settings=settings)
    tracer = _provider(exporter).get_tracer("t")
    for _ in range(5):
        with tracer.start_as_current_span("s"):
            pass
        exporter.force_flush()
    assert exporter.unwritten_spans == 3
    blocker.unlink()
    exporter.shutdown()
    (path,) = (blocker / "runs").glob("*.parquet")
    assert len(pq.read_table(path)) == 2
    assert pq.read_metadata(path).metadata[b"evaltrace.unwritten_spans"] == b"3"


def test_failing_write_or_encode_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("injected")

    exporter = ParquetSpanExporter(tmp_path, max_rows=1)
    tracer = _provider(exporter).get_tracer("t")
    monkeypatch.setattr(layout, "write_parquet", broken)
    with tracer.start_as_current_span("s"):  # max_rows=1: the write happens inside export()
        pass
    assert exporter.force_flush() is False
    monkeypatch.setattr(batches, "encode_spans", broken)
    with tracer.start_as_current_span("s2"):
        pass
    assert exporter.unwritten_spans == 1
    monkeypatch.undo()
    exporter.shutdown()
    assert [r["name"] for r in _rows(tmp_path)] == ["s"]
    assert not list(tmp_path.glob(f"{INFLIGHT_PREFIX}*"))


def test_env_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALTRACE_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("EVALTRACE_RUN_ID", "from-env")
    monkeypatch.setenv("EVALTRACE_FLUSH_INTERVAL", "2.5")
    monkeypatch.setenv("EVALTRACE_MAX_ROWS", "7")
    exporter = ParquetSpanExporter()
    assert exporter.directory == tmp_path / "env" and exporter.run_id == "from-env"
    assert exporter.settings.flush_interval == 2.5 and exporter.settings.max_rows == 7
    assert ParquetSpanExporter(tmp_path, run_id="kw").run_id == "kw"
    monkeypatch.delenv("EVALTRACE_RUN_ID")
    a, b = ParquetSpanExporter(), ParquetSpanExporter()
    assert a.run_id != b.run_id and re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", a.run_id)
    assert not (tmp_path / "env").exists()  # created lazily, at the first write


def test_duckdb_and_polars_read_the_files(tmp_path: Path) -> None:
    import duckdb
    import polars as pl

    for batch in range(2):  # two files
        exporter = ParquetSpanExporter(tmp_path)
        tracer = _provider(exporter).get_tracer("t")
        for i in range(3):
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 10 * i + batch}
            with tracer.start_as_current_span("chat", attributes=attrs):
                pass
        with tracer.start_as_current_span("tool", attributes={"gen_ai.operation.name": "execute_tool"}):
            pass
        exporter.shutdown()
    glob = str(tmp_path / "*.parquet")
    query = f"SELECT count(*), sum(gen_ai_usage_input_tokens) FROM '{glob}' WHERE gen_ai_operation_name='chat'"
    assert duckdb.sql(query).fetchall() == [(6, 63)]
    frame = pl.scan_parquet(glob).filter(pl.col("gen_ai_operation_name") == "chat").collect()
    assert frame.height == 6 and frame["gen_ai_usage_input_tokens"].sum() == 63
    assert frame.schema["start_time"] == pl.Datetime("ns", "UTC")
    events = duckdb.sql(f"SELECT count(*) FROM '{glob}' WHERE len(events) = 0").fetchall()
    assert events == [(8,)]
