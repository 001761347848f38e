"""Round trip, dedupe, grouping and streaming of `evaltrace.collector.runfiles.reader` over real files."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from evaltrace.collector import resolve_paths
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.runfiles import _decode, reader, runfiles
from evaltrace.collector.runfiles._decode import SpanBatch
from evaltrace.collector.runfiles.reader import Shard, find_trace_ids, iter_traces, read_spans
from evaltrace.collector.runfiles.shard import RowFilter
from evaltrace.collector.runfiles.spans import Span, span_from_readable
from evaltrace.collector.traces.rebuild import read_traces

RUN = "run-1"


def make_provider(service: str = "agent") -> tuple[TracerProvider, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service, "deployment.env": "test"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def write_files(folder: Path, *groups: list[ReadableSpan], run_id: str = RUN) -> list[Path]:
    """Write each group of SDK spans as one file through the real exporter; return new files in order."""
    before = set(folder.glob("*.parquet"))
    exporter = ParquetSpanExporter(folder, run_id=run_id, flush_interval=3600)
    try:
        for group in groups:
            exporter.export(group)
            assert exporter.force_flush()
    finally:
        exporter.shutdown()
    return sorted(set(folder.glob("*.parquet")) - before)


def canon(value: Any) -> Any:
    """A comparable form that keeps types apart (1 vs 1.0 vs True) and makes NaN equal to NaN."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canon(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canon(v) for v in value]
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


ALL_TYPES: dict[str, Any] = {
    "s": "text",
    "i": 7,
    "neg": -(2**62),
    "f": 1.5,
    "f_one": 1.0,
    "i_one": 1,
    "b_true": True,
    "b_false": False,
    "zero_f": 0.0,
    "nan": math.nan,
    "inf": math.inf,
    "ninf": -math.inf,
    "unicode": "héllo ✓ 日本 🙂",
    "s_arr": ["a", "", "ü"],
    "i_arr": [1, 2, 3],
    "f_arr": [1.0, 2.5, math.nan, -math.inf],
    "b_arr": [True, False],
    "empty_arr": [],
    "long": "x" * 5000,
    "long_unicode": "é" * 600,  # 1200 bytes in UTF-8: over the 1 KiB threshold
    "input.value": "short but a known payload key",
    "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]',
    "gen_ai.prompt.0.content": "flattened payload prefix",
    "$float": "NaN",  # a key equal to the non-finite marker must survive too
    "quoted": 'has "$float" inside',
}


def record_rich_trace(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("rich.scope", "2.1.0")
    with tracer.start_as_current_span("other root") as other:
        other_ctx = other.get_span_context()
    with tracer.start_as_current_span("agent", kind=SpanKind.SERVER, attributes=ALL_TYPES) as root:
        root.add_event(
            "gen_ai.user.message", {"content": "hi", "n": 1, "x": math.nan}, timestamp=1_700_000_000_123_456_789
        )
        root.add_event("empty event")
        with tracer.start_as_current_span(
            "chat model", kind=SpanKind.CLIENT, links=[Link(other_ctx, {"link.kind": "follows", "w": 0.5})]
        ) as child:
            child.set_attribute("gen_ai.usage.input_tokens", 12)
            child.set_status(Status(StatusCode.ERROR, "boom ✗"))
            child.record_exception(ValueError("bad value"))
        with tracer.start_as_current_span("tool", kind=SpanKind.INTERNAL) as tool:
            tool.set_status(Status(StatusCode.OK))


def test_round_trip_keeps_every_field_exactly(tmp_path: Path) -> None:
    provider, memory = make_provider()
    record_rich_trace(provider)
    finished = memory.get_finished_spans()
    write_files(tmp_path, list(finished))

    expected = {s.context.span_id: span_from_readable(s, RUN) for s in finished}
    got = list(read_spans(resolve_paths([tmp_path])))

    assert len(got) == len(expected) == 4
    for span in got:
        want = expected[int(span.span_id, 16)]
        assert canon(span) == canon(want), span.name
    by_name = {s.name: s for s in got}
    agent = by_name["agent"]
    assert agent.attributes["long"] == "x" * 5000
    assert type(agent.attributes["f_one"]) is float and type(agent.attributes["i_one"]) is int
    assert math.isnan(agent.attributes["nan"]) and agent.attributes["ninf"] == -math.inf
    assert agent.events[0].time_ns == 1_700_000_000_123_456_789
    assert by_name["chat model"].status_code == "ERROR" and by_name["chat model"].kind == "CLIENT"
    assert by_name["chat model"].links[0].span_id == by_name["other root"].span_id
    assert by_name["chat model"].parent_span_id == agent.span_id
    assert agent.resource["service.name"] == "agent" and agent.service_name == "agent"


def test_large_payloads_are_really_stored_apart(tmp_path: Path) -> None:
    """Guards the merge: the file must hold them in `large_attributes`, the reader merges them back."""
    provider, memory = make_provider()
    record_rich_trace(provider)
    (path,) = write_files(tmp_path, list(memory.get_finished_spans()))
    batches = runfiles.read_columns(path, ["name", "attributes"])
    rows = [row for cols in batches for row in zip(cols["name"], cols["attributes"], strict=True)]
    agent_json = next(text for name, text in rows if name == "agent")
    assert '"long"' not in agent_json and '"input.value"' not in agent_json and '"i_arr"' in agent_json
    (agent,) = [s for s in read_spans(resolve_paths([path])) if s.name == "agent"]
    assert agent.attributes["input.value"] == ALL_TYPES["input.value"]


def test_duplicate_span_in_two_files_is_read_once(tmp_path: Path) -> None:
    provider, memory = make_provider()
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("root"):
        for i in range(3):
            with tracer.start_as_current_span(f"step {i}"):
                pass
    spans = list(memory.get_finished_spans())
    files = write_files(tmp_path, spans, spans[:2])  # e.g. a forked child flushing its parent's buffer

    assert len(files) == 2
    traces = list(iter_traces(resolve_paths([tmp_path])))
    assert len(traces) == 1
    assert sorted(s.name for s in traces[0]) == ["root", "step 0", "step 1", "step 2"]
    assert len({s.span_id for s in traces[0]}) == 4


def test_trace_split_over_three_files_in_shuffled_order_is_grouped(tmp_path: Path) -> None:
    provider, memory = make_provider()
    tracer = provider.get_tracer("t")
    for t in range(4):
        with tracer.start_as_current_span(f"root {t}"):
            for i in range(5):
                with tracer.start_as_current_span(f"t{t} step {i}"):
                    pass
    spans = list(memory.get_finished_spans())
    random.Random(7).shuffle(spans)
    write_files(tmp_path, spans[:8], spans[8:16], spans[16:])

    traces = list(iter_traces(resolve_paths([tmp_path])))

    assert len(traces) == 4
    for group in traces:
        assert len(group) == 6
        assert len({s.trace_id for s in group}) == 1
        starts = [s.start_time_ns for s in group]
        assert starts == sorted(starts)
        assert group[0].parent_span_id is None  # the root starts first
    assert sum(len(g) for g in traces) == len(spans)


def test_path_forms_are_resolved_deduplicated_and_sorted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    provider, memory = make_provider()
    with provider.get_tracer("t").start_as_current_span("a"):
        pass
    nested = tmp_path / "runs" / "day"
    nested.mkdir(parents=True)
    files = write_files(nested, list(memory.get_finished_spans()), list(memory.get_finished_spans()))
    (nested / ".inflight-host-1-ab.parquet.tmp").write_bytes(b"partial")
    monkeypatch.chdir(tmp_path)

    resolved = resolve_paths(["runs/day", "runs/day/*.parquet", "runs/**/*.parquet", str(files[0])])

    assert [p.name for p in resolved] == sorted(f.name for f in files)
    assert resolve_paths(["runs/**/*.parquet"])[0] == Path("runs/day") / files[0].name


def _numbered_trace_files(folder: Path, count: int) -> list[Path]:
    provider, memory = make_provider()
    tracer = provider.get_tracer("t")
    groups = []
    for f in range(count):
        memory.clear()
        with tracer.start_as_current_span(f"root {f}"):
            with tracer.start_as_current_span(f"child {f}"):
                pass
        groups.append(list(memory.get_finished_spans()))
    return write_files(folder, *groups)


def test_traces_are_yielded_before_later_files_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _numbered_trace_files(tmp_path, 6)
    log: list[str] = []
    real = _decode.read_span_batches

    def spy(path: Path, only: RowFilter | None = None) -> Iterator[SpanBatch]:
        log.append(f"read {files.index(path)}")
        yield from real(path, only)

    monkeypatch.setattr(reader._decode, "read_span_batches", spy)
    for group in iter_traces(resolve_paths([tmp_path])):
        log.append(f"yield {group[0].name.split()[-1]}")

    assert log == [entry for f in range(6) for entry in (f"read {f}", f"yield {f}")]


def test_a_trace_waits_for_its_last_file_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    provider, memory = make_provider()
    tracer = provider.get_tracer("t")
    for name in ("A", "B", "C"):
        with tracer.start_as_current_span(name):
            with tracer.start_as_current_span(f"{name} first"):
                pass
            with tracer.start_as_current_span(f"{name} second"):
                pass
    by_name = {s.name: s for s in memory.get_finished_spans()}
    trace_b, trace_c = (by_name[n] for n in ("B first", "B second", "B")), (by_name[n] for n in ("C", "C first"))
    files = write_files(
        tmp_path,
        [by_name["A first"], *trace_b],
        [*trace_c, by_name["C second"]],
        [by_name["A"], by_name["A second"]],
    )
    reads: list[int] = []
    real = _decode.read_span_batches

    def spy(path: Path, only: RowFilter | None = None) -> Iterator[SpanBatch]:
        reads.append(files.index(path))
        yield from real(path, only)

    monkeypatch.setattr(reader._decode, "read_span_batches", spy)
    seen = {_root_name(g): (len(g), list(reads)) for g in iter_traces(files)}

    assert seen == {"B": (3, [0]), "C": (3, [0, 1]), "A": (3, [0, 1, 2])}


def test_within_a_file_each_trace_is_yielded_once_read_in_first_appearance_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, memory = make_provider()
    tracer = provider.get_tracer("t")
    for name in ("A", "B", "C"):
        with tracer.start_as_current_span(name):
            with tracer.start_as_current_span(f"{name} child"):
                pass
    by_name = {s.name: s for s in memory.get_finished_spans()}
    # Batches of two rows: [A child, B child] [A, C child] [C, B child again] [B]. A is complete after
    # the second batch; C after the third but B appeared first, so C waits for B; B's duplicate
    # row is counted and read, and B is yielded once, deduplicated.
    order = ["A child", "B child", "A", "C child", "C", "B child", "B"]
    files = write_files(tmp_path, [by_name[name] for name in order])
    monkeypatch.setattr(runfiles, "BATCH_ROWS", 2)
    batches = [0]
    real = _decode.read_span_batches

    def spy(path: Path, only: RowFilter | None = None) -> Iterator[SpanBatch]:
        for batch in real(path, only):
            batches[0] += 1
            yield batch

    monkeypatch.setattr(reader._decode, "read_span_batches", spy)
    seen = [(_root_name(g), len(g), batches[0]) for g in iter_traces(files)]

    assert seen == [("A", 2, 2), ("B", 2, 4), ("C", 2, 4)]


def _root_name(group: list[Span]) -> str:
    return next(s.name for s in group if s.parent_span_id is None)


def _many_traces(folder: Path, count: int) -> list[Path]:
    """`count` two-span traces spread over two files (every trace in both)."""
    provider, memory = make_provider()
    tracer = provider.get_tracer("t")
    for index in range(count):
        with tracer.start_as_current_span(f"root {index}", attributes={"evaltrace.case_id": f"c{index}"}):
            with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat"}):
                pass
    spans = list(memory.get_finished_spans())
    children = [s for s in spans if s.parent is not None]
    roots = [s for s in spans if s.parent is None]
    return write_files(folder, children, roots)


def test_reading_named_traces_gives_exactly_those_traces_as_a_full_read_does(tmp_path: Path) -> None:
    _many_traces(tmp_path, 12)
    everything = {t.trace_id: t for t in read_traces(resolve_paths([tmp_path]))}
    wanted = sorted(everything)[3:5]

    picked = list(read_traces(resolve_paths([tmp_path]), trace_ids=wanted))

    assert sorted(t.trace_id for t in picked) == wanted
    assert all(t.model_dump() == everything[t.trace_id].model_dump() for t in picked)
    assert [len(g) for g in iter_traces(resolve_paths([tmp_path]), trace_ids=wanted)] == [2, 2]
    assert list(read_traces(resolve_paths([tmp_path]), trace_ids=["f" * 32])) == []
    assert [t.trace_id for t in read_traces(resolve_paths([tmp_path]), trace_ids=wanted[0])] == [
        wanted[0]
    ]  # one id as a str


def test_named_traces_and_a_shard_combine(tmp_path: Path) -> None:
    _many_traces(tmp_path, 12)
    ids = sorted(t.trace_id for t in read_traces(resolve_paths([tmp_path])))
    per_shard = [
        {t.trace_id for t in read_traces(resolve_paths([tmp_path]), Shard(i, 2), trace_ids=ids[:6])} for i in range(2)
    ]

    assert per_shard[0].isdisjoint(per_shard[1])
    assert per_shard[0] | per_shard[1] == set(ids[:6])


def test_find_trace_ids_by_prefix_reads_the_id_column_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _many_traces(tmp_path, 12)
    ids = sorted(t.trace_id for t in read_traces(resolve_paths([tmp_path])))
    columns_read: list[list[str]] = []
    real = runfiles.iter_batches

    def spy(path: Path, columns: list[str], only: RowFilter | None = None) -> Iterator[Any]:
        columns_read.append(list(columns))
        return real(path, columns, only)

    monkeypatch.setattr(runfiles, "iter_batches", spy)

    assert find_trace_ids(resolve_paths([tmp_path]), ids[7][:20]) == [ids[7]]
    assert find_trace_ids(resolve_paths([tmp_path]), "") == ids
    assert find_trace_ids(resolve_paths([tmp_path]), "not-hex") == []
    assert columns_read and all(columns == ["trace_id"] for columns in columns_read)
