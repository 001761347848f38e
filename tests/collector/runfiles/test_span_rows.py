"""Traces rebuilt from span rows already read (as Ray's shuffle delivers them) equal the file reader's.

The Ray engine reads span files into Arrow rows keyed by shard (`ray_data.read_file`), shuffles
them and rebuilds each group's traces with `rebuild.convert_span_rows`. Here the shuffle is a
random permutation of the rows, split by shard key, on real recorded files; the traces must be
those `read_traces` gives for the same shard, in the same order. Duplicated spans (a file
written twice) and traces split over files are part of the data. No Ray is needed.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from evaltrace.collector import resolve_paths
from evaltrace.collector.errors import InputError
from evaltrace.collector.runfiles.reader import Shard
from evaltrace.collector.runfiles.shard import shard_keys
from evaltrace.collector.traces.rebuild import convert_span_rows, read_traces
from evaltrace.evaluators.engine.ray_data import ERROR, KEY, read_file, rows_by_file

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "runs"


@pytest.fixture()
def split_run(tmp_path: Path) -> Path:
    """The sample run rewritten so every trace's model calls are in one file and the rest in another,
    plus a later copy of the first file with its attributes emptied: the first copy must win."""
    (recorded,) = sorted(SAMPLES.glob("*.parquet"))
    table = pq.read_table(recorded)
    chats = pc.starts_with(table.column("name"), "chat")
    runs = tmp_path / "runs"
    runs.mkdir()
    pq.write_table(table.filter(chats), runs / "a.parquet")
    pq.write_table(table.filter(pc.invert(chats)), runs / "b.parquet")
    first = pq.read_table(runs / "a.parquet")
    emptied = pa.array(["{}"] * first.num_rows, first.schema.field("attributes").type)
    pq.write_table(
        first.set_column(first.schema.get_field_index("attributes"), "attributes", emptied), runs / "c.parquet"
    )
    return runs


def _shuffled_groups(runs: Path | str, count: int, seed: int) -> dict[int, pa.Table]:
    locations = resolve_paths([runs], uris=True).locations
    items = pa.table({"file": list(range(len(locations))), "location": [str(loc) for loc in locations]})
    rows = pa.concat_tables(read_file(items, count))
    order = list(range(rows.num_rows))
    random.Random(seed).shuffle(order)
    rows = rows.take(pa.array(order))
    return {key: rows.filter(pc.equal(rows.column(KEY), key)) for key in range(count)}


@pytest.mark.parametrize("count", [1, 3])
def test_rows_rebuild_the_traces_the_files_give(split_run: Path, count: int) -> None:
    locations = resolve_paths([split_run], uris=True).locations
    groups = _shuffled_groups(split_run, count, seed=count)
    for key, rows in groups.items():
        rebuilt = list(convert_span_rows(rows_by_file(rows, locations), histories=True))
        expected = list(read_traces(locations, Shard(key, count) if count > 1 else None))
        assert rebuilt == expected
    assert sum(len(list(convert_span_rows(rows_by_file(g, locations)))) for g in groups.values()) == 6


def test_shard_keys_agree_with_the_shard_filter() -> None:
    ids = pa.array([f"{value:032x}" for value in range(0, 5000, 13)] + ["not-hex", "x"])
    for count in (1, 2, 7):
        keys = shard_keys(ids, count).to_pylist()
        for index in range(count):
            assert [key == index for key in keys] == Shard(index, count).mask(ids).to_pylist()


def test_a_file_uri_names_the_same_rows(split_run: Path) -> None:
    by_path = _shuffled_groups(split_run, 2, seed=1)
    by_uri = _shuffled_groups(split_run.as_uri(), 2, seed=1)
    assert [str(loc) for loc in resolve_paths([split_run.as_uri()], uris=True).locations] == [
        f"{split_run.as_uri()}/{name}" for name in ("a.parquet", "b.parquet", "c.parquet")
    ]
    for key in (0, 1):
        assert by_uri[key].drop_columns([ERROR]).equals(by_path[key].drop_columns([ERROR]))


def test_bad_uris_and_bad_files_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"^nosuch://x: cannot be listed"):
        resolve_paths(["nosuch://x"], uris=True)
    with pytest.raises(InputError, match="no such file or folder"):
        resolve_paths([(tmp_path / "missing.parquet").as_uri()], uris=True)
    foreign = tmp_path / "foreign.parquet"
    pq.write_table(pa.table({"x": [1]}), foreign)
    items = pa.table({"file": [0], "location": [foreign.as_uri()]})
    (row,) = read_file(items, 2)
    assert row.column(ERROR).to_pylist() == [
        f"{foreign.as_uri()}: not an evaltrace span file (no "
        "evaltrace.schema_version metadata). Was it written by evaltrace?"
    ]
