"""The traces table and its cache: exact round trips, and a cache that is reused, rebuilt and never wrong.

Round trips run over generated `Trace` records (hypothesis: nested agents, calls shared between a
trace and its iterations, every `Any` shape) and over real recordings: the shipped sample run and the
golden scenarios recorded through the real SDK and exporter (`genai_scenarios.py`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from genai_scenarios import old_events_no_agent, parallel_nested, sequential, unfinished_parent
from genai_spans import Recorder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from readme_blocks import sql_block

from evaltrace.collector import cachedir, resolve_paths
from evaltrace.collector.runfiles.reader import SPAN_COLUMNS, span_groups_of_rows
from evaltrace.collector.runfiles.runfiles import iter_batches
from evaltrace.collector.runfiles.shard import Shard
from evaltrace.collector.traces import cache
from evaltrace.collector.traces.rebuild import read_traces
from evaltrace.collector.traces.records import Iteration, Message, MessagePart, ToolCall, ToolSchema, Trace, Usage
from evaltrace.collector.traces.table import SCHEMA, TABLE_VERSION, from_table, iter_table_traces, to_table
from evaltrace.evaluators.engine import scoring

SAMPLE_RUNS = Path(__file__).resolve().parents[3] / "samples" / "runs"
SCENARIOS: dict[str, Callable[[Recorder], None]] = {
    "sequential": sequential,
    "parallel_nested": parallel_nested,
    "old_events_no_agent": old_events_no_agent,
    "unfinished_parent": unfinished_parent,
}

# --- generated records ---------------------------------------------------------------------------

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_maybe_text = st.none() | _text
_int64 = st.integers(-(2**63), 2**63 - 1)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_times = st.none() | st.datetimes(datetime(1971, 1, 1), datetime(2200, 1, 1), timezones=st.just(UTC))
_usage = st.builds(Usage, **{name: st.none() | _int64 for name in Usage.model_fields})
_part = st.builds(
    MessagePart,
    type=st.sampled_from(["text", "tool_call", "tool_result", "other"]),
    text=_maybe_text,
    call_id=_maybe_text,
    name=_maybe_text,
    arguments=_json,
    result=_json,
)
_messages = st.none() | st.lists(st.builds(Message, role=_text, parts=st.lists(_part, max_size=2), name=_maybe_text))
_schema = st.builds(
    ToolSchema,
    name=_text,
    description=_maybe_text,
    parameters=st.none() | st.dictionaries(_text, _json, max_size=3),
)


def _calls(depth: int) -> st.SearchStrategy[ToolCall]:
    return st.builds(
        ToolCall,
        call_id=_maybe_text,
        name=_text,
        arguments=_json,
        result=_json,
        error=_maybe_text,
        iteration=st.none() | _int64,
        span_id=_maybe_text,
        start_time=_times,
        end_time=_times,
        arguments_truncated=st.booleans(),
        child=st.none() if depth == 0 else st.none() | _traces(depth - 1),
        handoff=st.booleans(),
    )


def _iteration(calls: st.SearchStrategy[ToolCall]) -> st.SearchStrategy[Iteration]:
    return st.builds(
        Iteration,
        index=_int64,
        span_id=_maybe_text,
        model=_maybe_text,
        provider=_maybe_text,
        input_messages=_messages,
        output_messages=_messages,
        tool_calls=st.lists(calls, max_size=2),
        finish_reasons=st.lists(_text, max_size=2),
        usage=_usage,
        start_time=_times,
        end_time=_times,
        error=_maybe_text,
    )


@st.composite
def _trace(draw: st.DrawFn, depth: int) -> Trace:
    calls = _calls(depth)
    trace = draw(
        st.builds(
            Trace,
            trace_id=_text,
            root_span_id=_maybe_text,
            name=_maybe_text,
            agent_name=_maybe_text,
            input=_maybe_text,
            output=_maybe_text,
            error=_maybe_text,
            status=st.sampled_from(["success", "error", "timeout", "unknown"]),
            tool_calls=st.lists(calls, max_size=3),
            iterations=st.lists(_iteration(calls), max_size=2),
            tool_schemas=st.lists(_schema, max_size=2),
            usage=_usage,
            models=st.lists(_text, max_size=2),
            start_time=_times,
            end_time=_times,
            conversation_id=_maybe_text,
            case_id=_maybe_text,
            run_id=_maybe_text,
            service_name=_maybe_text,
            convention=_maybe_text,
            span_count=_int64,
            attributes=st.dictionaries(_text, _json, max_size=3),
            handoffs=st.lists(_text, max_size=2),
            warnings=st.lists(_text, max_size=2),
        )
    )
    if trace.iterations and draw(st.booleans()):
        # As the converter does: an iteration lists the very call objects the trace lists.
        trace.iterations[0].tool_calls = trace.tool_calls[:2]
    return trace


def _traces(depth: int) -> st.SearchStrategy[Trace]:
    return _trace(depth)


# Nested agents two deep make large examples: hypothesis sometimes finds too many of them too big.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(_traces(2), max_size=4), st.integers(1, 4))
def test_generated_traces_round_trip_exactly(traces: list[Trace], rows_per_batch: int) -> None:
    table = to_table(traces)
    assert table.schema.equals(SCHEMA, check_metadata=True)
    assert from_table(table) == traces
    # Small batches: a trace's nested agents' rows land in later batches than the trace itself.
    back = list(iter_table_traces(table.to_batches(max_chunksize=rows_per_batch)))
    assert back == traces
    assert [t.model_dump(mode="json") for t in back] == [t.model_dump(mode="json") for t in traces]


def test_nested_agent_rows_reference_their_parent() -> None:
    inner = Trace(trace_id="t", root_span_id="inner", output="42")
    outer = Trace(trace_id="t", root_span_id="outer", tool_calls=[ToolCall(name="ask", child=inner)])
    outer.iterations = [Iteration(index=0, tool_calls=[outer.tool_calls[0]])]
    table = to_table([outer, Trace(trace_id="u")]).to_pydict()
    assert table["row"] == [0, 1, 2]
    assert table["parent_row"] == [None, 0, None]
    assert table["top_row"] == [0, 0, 2]
    assert table["tool_calls"][0][0]["child_row"] == 1
    assert table["iterations"][0][0]["tool_call_positions"] == [0]  # the same call, stored once
    assert table["iterations"][0][0]["other_tool_calls"] == []
    back = from_table(to_table([outer]))
    assert back == [outer]
    assert back[0].tool_calls[0] is back[0].iterations[0].tool_calls[0]


def test_an_iteration_keeps_calls_its_trace_does_not_list_in_order() -> None:
    # As the converter leaves the call that gave the run's answer: in its iteration, not in the trace.
    listed = [ToolCall(name="search", arguments={"q": 1}), ToolCall(name="fetch")]
    answer = ToolCall(name="final_answer", arguments={"answer": "42"}, child=Trace(trace_id="t", output="x"))
    iterations = [
        Iteration(index=0, tool_calls=[listed[1], answer, listed[0]]),
        Iteration(index=1, tool_calls=[ToolCall(name="fetch")]),  # equal to a listed call, not the same
    ]
    trace = Trace(trace_id="t", tool_calls=listed, iterations=iterations)
    table = to_table([trace]).to_pydict()
    assert [it["tool_call_positions"] for it in table["iterations"][0]] == [[1, 2, 0], [2]]
    assert [[c["name"] for c in it["other_tool_calls"]] for it in table["iterations"][0]] == [
        ["final_answer"],
        ["fetch"],
    ]
    (back,) = from_table(to_table([trace]))
    assert back == trace
    first, second = back.iterations
    assert first.tool_calls[0] is back.tool_calls[1] and first.tool_calls[2] is back.tool_calls[0]
    assert first.tool_calls[1].child == answer.child
    assert second.tool_calls[0] is not back.tool_calls[1]


def test_values_the_table_cannot_hold_raise() -> None:
    with pytest.raises(TypeError):
        to_table([Trace(trace_id="t", tool_calls=[ToolCall(name="x", arguments={1, 2})])])
    with pytest.raises((OverflowError, pa.ArrowException)):
        to_table([Trace(trace_id="t", span_count=2**64)])


# --- real recordings -----------------------------------------------------------------------------


def test_the_sample_run_round_trips() -> None:
    for histories in (True, False):
        traces = list(read_traces(resolve_paths([SAMPLE_RUNS]), histories=histories))
        assert traces
        assert from_table(to_table(traces)) == traces


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_recorded_scenarios_round_trip(scenario: str, tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    SCENARIOS[scenario](recorder)
    recorder.close()
    traces = list(read_traces(resolve_paths([tmp_path])))
    assert traces
    back = from_table(to_table(traces))
    assert back == traces
    assert [t.to_contract_json() for t in back] == [t.to_contract_json() for t in traces]


def test_the_parquet_file_keeps_the_version() -> None:
    table = to_table(read_traces(resolve_paths([SAMPLE_RUNS])))
    assert table.schema.metadata[b"evaltrace.traces_table_version"] == TABLE_VERSION.encode()


# --- the cache ------------------------------------------------------------------------------------


@pytest.fixture
def runs(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "runs"
    recorder = Recorder(folder)
    parallel_nested(recorder)
    recorder.close()
    shutil.copy(next(SAMPLE_RUNS.glob("*.parquet")), folder)
    return resolve_paths([folder])


class ConverterSpy:
    """Counts the rebuilds the cache asks for (the converter's entry point it calls)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = cache.read_traces

        def spy(*args: Any, **kwargs: Any) -> Iterator[Trace]:
            self.calls += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(cache, "read_traces", spy)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> ConverterSpy:
    return ConverterSpy(monkeypatch)


def _tables(root: Path) -> list[Path]:
    return sorted((root / "traces").glob("*.parquet"))


def test_the_second_read_uses_the_table(runs: list[Path], tmp_path: Path, spy: ConverterSpy) -> None:
    root = tmp_path / "cache"
    expected = list(read_traces(runs))
    assert list(cache.cached_traces(runs, root=root)) == expected
    assert spy.calls == 1
    assert len(_tables(root)) == 1
    assert list(cache.cached_traces(runs, root=root)) == expected
    assert spy.calls == 1  # read from the table, not rebuilt
    assert not [p for p in (root / "traces").iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_warm_read_does_not_import_the_converter(runs: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "cache"
    expected = [t.trace_id for t in cache.cached_traces(runs, root=root)]  # builds the table
    files = [str(r) for r in runs]
    script = (
        "import sys; from pathlib import Path; from evaltrace.collector.traces import cache\n"
        f"traces = cache.cached_traces([Path(p) for p in {files!r}], root=Path({str(root)!r}))\n"
        "print([t.trace_id for t in traces])\n"
        "print(sorted(m for m in sys.modules if m.startswith('evaltrace.collector.traces.')))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    ids, modules = result.stdout.splitlines()
    assert ids == repr(expected)
    assert "rebuild" not in modules and "_assemble" not in modules and "_table_decode" in modules


def test_building_the_table_does_not_import_pandas(runs: list[Path], tmp_path: Path) -> None:
    """A first scoring builds the table in each worker: packing its columns must not load pandas (~0.5-0.9 s)."""
    files = [str(r) for r in runs]
    script = (
        "import sys; from pathlib import Path; from evaltrace.collector.traces import cache\n"
        f"traces = cache.cached_traces([Path(p) for p in {files!r}], root=Path({str(tmp_path / 'cache')!r}))\n"
        f"print(len(list(traces)), len(list(Path({str(tmp_path / 'cache' / 'traces')!r}).glob('*.parquet'))))\n"
        "print('pandas' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    counts, pandas = result.stdout.splitlines()
    assert counts == f"{len(list(read_traces(runs)))} 1"  # built and written, every trace read
    assert pandas == "False"


def test_histories_and_shards_have_tables_of_their_own(runs: list[Path], tmp_path: Path, spy: ConverterSpy) -> None:
    root = tmp_path / "cache"
    without = list(cache.cached_traces(runs, histories=False, root=root))
    assert all(it.input_messages is None for t in without for it in t.iterations)
    assert list(cache.cached_traces(runs, histories=True, root=root)) == list(read_traces(runs))
    shards = [list(cache.cached_traces(runs, shard=Shard(i, 2), root=root)) for i in range(2)]
    assert sorted(t.trace_id for s in shards for t in s) == sorted(t.trace_id for t in read_traces(runs))
    assert len(_tables(root)) == 4
    calls = spy.calls
    assert [list(cache.cached_traces(runs, shard=Shard(i, 2), root=root)) for i in range(2)] == shards
    assert spy.calls == calls


def test_a_touched_file_rebuilds(runs: list[Path], tmp_path: Path, spy: ConverterSpy) -> None:
    root = tmp_path / "cache"
    list(cache.cached_traces(runs, root=root))
    stat = runs[0].stat()
    os.utime(runs[0], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert list(cache.cached_traces(runs, root=root)) == list(read_traces(runs))
    assert spy.calls == 2
    assert len(_tables(root)) == 2


def test_a_new_converter_version_rebuilds(
    runs: list[Path], tmp_path: Path, spy: ConverterSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cache"
    list(cache.cached_traces(runs, root=root))
    monkeypatch.setattr(cache, "CONVERTER_VERSION", "next")
    list(cache.cached_traces(runs, root=root))
    assert spy.calls == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2]),  # truncated
        lambda path: path.write_bytes(b"not parquet at all"),
        lambda path: path.write_bytes(b""),
        lambda path: _flip_a_data_byte(path),
    ],
    ids=["truncated", "garbage", "empty", "flipped-byte"],
)
def test_a_damaged_table_is_rebuilt_never_wrong(
    damage: Callable[[Path], None], runs: list[Path], tmp_path: Path, spy: ConverterSpy
) -> None:
    root = tmp_path / "cache"
    expected = list(read_traces(runs))
    list(cache.cached_traces(runs, root=root))
    (table,) = _tables(root)
    damage(table)
    assert list(cache.cached_traces(runs, root=root)) == expected
    assert spy.calls == 2
    assert list(cache.cached_traces(runs, root=root)) == expected  # rewritten sound
    assert spy.calls == 2


def _flip_a_data_byte(path: Path) -> None:
    # Bytes in the middle of the largest column chunk's page data, which the page checksums cover
    # (one byte at a fixed share of the file may land in a page header and change nothing read).
    import pyarrow.parquet as pq

    group = pq.ParquetFile(path).metadata.row_group(0)
    chunk = max((group.column(i) for i in range(group.num_columns)), key=lambda c: c.total_compressed_size)
    data = bytearray(path.read_bytes())
    end = chunk.data_page_offset + chunk.total_compressed_size
    for position in range(end - chunk.total_compressed_size // 3, end):
        data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_table_failing_midway_resumes_from_a_rebuild(
    runs: list[Path], tmp_path: Path, spy: ConverterSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cache"
    expected = list(read_traces(runs))
    list(cache.cached_traces(runs, root=root))
    real = cache.iter_table_traces

    def failing(batches: Any) -> Iterator[Trace]:
        traces = real(batches)
        yield next(traces)
        raise OSError("the disk went away")

    monkeypatch.setattr(cache, "iter_table_traces", failing)
    assert list(cache.cached_traces(runs, root=root)) == expected  # the first from the table, the rest rebuilt


def test_a_table_built_from_spans_read_elsewhere_is_the_files_cached_table(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Ray Data group's spans, read as rows elsewhere, build the table a re-scoring of the files reads.
    monkeypatch.setattr(cache, "ROWS_PER_GROUP", 2)
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(root := tmp_path / "cache"))
    rows = [(path, list(iter_batches(path, SPAN_COLUMNS))) for path in runs]
    unwritten = list(
        cache.built_batches(runs, histories=True, shard=None, spans=span_groups_of_rows(rows), cache=False)
    )
    assert _tables(root) == []
    batches = list(cache.built_batches(runs, histories=True, shard=None, spans=span_groups_of_rows(rows)))
    assert len(batches) > 2 and pa.Table.from_batches(batches).equals(pa.Table.from_batches(unwritten))
    assert list(iter_table_traces(iter(batches))) == list(read_traces(runs))
    (table,) = _tables(root)
    assert pa.Table.from_batches(batches).equals(pq.read_table(table).replace_schema_metadata(SCHEMA.metadata))
    again = cache.table_batches(runs, histories=True, shard=None)
    assert again is not None and pa.Table.from_batches(list(again)).equals(pa.Table.from_batches(batches))


def test_a_first_read_whose_table_fails_yields_every_trace(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = cache.read_traces
    expected = list(real(runs))

    def odd(*args: Any, **kwargs: Any) -> Iterator[Trace]:  # the third trace does not fit the table
        for index, trace in enumerate(real(*args, **kwargs)):
            yield trace.model_copy(update={"span_count": 2**70}) if index == 2 else trace

    monkeypatch.setattr(cache, "ROWS_PER_GROUP", 2)
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    got = list(cache.cache_rebuilt(runs, odd(runs)))
    assert [t.trace_id for t in got] == [t.trace_id for t in expected] and got[2].span_count == 2**70
    assert list((tmp_path / "cache" / "traces").iterdir()) == []


def test_a_table_for_other_files_is_not_used(runs: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "cache"
    list(cache.cached_traces(runs, root=root))
    (table,) = _tables(root)
    other = cache.cache_key(runs[:1], histories=True, shard=None)
    assert other is not None
    table.rename(table.with_name(f"{other}.parquet"))
    assert list(cache.cached_traces(runs[:1], root=root)) == list(read_traces(runs[:1]))


def test_two_scorings_building_at_once_both_get_the_traces(runs: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "cache"
    expected = list(read_traces(runs))
    first, second = cache.cached_traces(runs, root=root), cache.cached_traces(runs, root=root)
    got: tuple[list[Trace], list[Trace]] = ([], [])
    for a, b in zip(first, second, strict=True):  # interleaved: both build, both rename
        got[0].append(a)
        got[1].append(b)
    assert got == (expected, expected)
    assert len(_tables(root)) == 1
    assert list(cache.cached_traces(runs, root=root)) == expected


def test_an_abandoned_read_leaves_no_temporary_file(runs: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "cache"
    traces = cache.cached_traces(runs, root=root)
    next(traces)
    traces.close()
    assert list((root / "traces").iterdir()) == []


def test_an_unwritable_cache_scores_without_it(runs: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "cache"
    root.write_text("a file where the folder should be")
    assert list(cache.cached_traces(runs, root=root)) == list(read_traces(runs))


def test_a_trace_the_table_cannot_hold_goes_uncached(
    runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "cache"
    real = cache.read_traces

    def odd(*args: Any, **kwargs: Any) -> Iterator[Trace]:
        for trace in real(*args, **kwargs):
            yield trace.model_copy(update={"span_count": 2**70})

    monkeypatch.setattr(cache, "read_traces", odd)
    monkeypatch.setattr(cache, "ROWS_PER_GROUP", 1)
    assert [t.span_count for t in cache.cached_traces(runs, root=root)] == [2**70] * len(list(real(runs)))
    assert list((root / "traces").iterdir()) == []


def test_clear_cache_says_what_it_removed(runs: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "cache"
    list(cache.cached_traces(runs, root=root))
    list(cache.cached_traces(runs, histories=False, root=root))
    size = sum(p.stat().st_size for p in _tables(root))
    assert cachedir.clear(root)["traces"] == cachedir.Removed(entries=2, bytes=size)
    assert cachedir.clear(root)["traces"] == cachedir.Removed(entries=0, bytes=0)
    assert set(cachedir.clear(tmp_path / "never").values()) == {cachedir.Removed(entries=0, bytes=0)}


def test_the_table_on_disk_is_the_documented_schema(runs: list[Path], tmp_path: Path) -> None:
    root = tmp_path / "cache"
    list(cache.cached_traces(runs, root=root))
    (table,) = _tables(root)
    schema = pq.read_schema(table)
    assert schema.remove_metadata().equals(SCHEMA.remove_metadata())
    assert schema.metadata[b"evaltrace.traces_table_version"] == TABLE_VERSION.encode()
    assert schema.metadata[b"evaltrace.cache_key"] == table.stem.encode()


def test_duckdb_queries_the_traces_cache(runs: list[Path], tmp_path: Path) -> None:
    import duckdb  # the test extra installs it: a missing duckdb fails here, it is not skipped

    root = tmp_path / "cache"
    expected = list(read_traces(runs))
    list(cache.cached_traces(runs, root=root))
    # The README's query, as written there (with the cache folder substituted).
    query = sql_block("evaltrace/traces/*.parquet").replace("~/.cache/evaltrace", str(root))
    rows = duckdb.sql(query).fetchall()
    assert [(r[0], r[2], r[3], r[4], r[5], r[6]) for r in rows] == [
        (t.trace_id, t.status, t.input, t.output, t.usage.input_tokens, [c.name for c in t.tool_calls])
        for t in expected
    ]


# --- scoring through the cache --------------------------------------------------------------------


def test_rescoring_an_unchanged_run_does_not_rebuild(
    runs: list[Path], tmp_path: Path, spy: ConverterSpy, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaltrace.evaluators.engine.scoring import ScoreOptions
    from evaltrace.evaluators.results.report.writer import EntryList

    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))

    def report() -> dict[str, Any]:
        sink = EntryList()
        run = scoring.score([runs[0].parent], None, ScoreOptions(workers=1), sink)
        full = run.report.model_copy(update={"entries": sink.entries}).model_dump(mode="json")
        full.pop("created_at")
        return full

    first = report()
    assert spy.calls == 1
    assert report() == first
    assert spy.calls == 1  # the second scoring read the traces table
    uncached = ScoreOptions(cache=False, workers=1)
    sink = EntryList()
    scoring.score([runs[0].parent], None, uncached, sink)
    assert spy.calls == 2
    assert [e.model_dump(mode="json") for e in sink.entries] == first["entries"]


def test_a_json_text_that_is_not_one_value_is_refused() -> None:
    table = to_table([Trace(trace_id="t", tool_calls=[ToolCall(name="x", arguments={"a": 1})])])
    calls = table.column("tool_calls").combine_chunks()
    values = calls.values
    forged = pa.StructArray.from_arrays(
        [pa.array(["1,2"]) if name == "arguments_json" else values.field(name) for name in values.type.names],
        fields=list(values.type),
    )
    bad = table.set_column(
        table.schema.get_field_index("tool_calls"),
        table.schema.field("tool_calls"),
        pa.ListArray.from_arrays(calls.offsets, forged),
    )
    with pytest.raises(ValueError, match="arguments_json"):
        from_table(bad)


@pytest.mark.parametrize("position", [-1, 1, None])
def test_an_iteration_call_position_out_of_range_is_refused(position: int | None) -> None:
    call = ToolCall(name="x")
    table = to_table([Trace(trace_id="t", tool_calls=[call], iterations=[Iteration(index=0, tool_calls=[call])])])
    iterations = table.column("iterations").combine_chunks()
    values = iterations.values
    forged = pa.StructArray.from_arrays(
        [
            pa.array([[position]], pa.list_(pa.int64())) if name == "tool_call_positions" else values.field(name)
            for name in values.type.names
        ],
        fields=list(values.type),
    )
    bad = table.set_column(
        table.schema.get_field_index("iterations"),
        table.schema.field("iterations"),
        pa.ListArray.from_arrays(iterations.offsets, forged),
    )
    with pytest.raises((ValueError, IndexError)):  # the cache then rebuilds the traces
        from_table(bad)
