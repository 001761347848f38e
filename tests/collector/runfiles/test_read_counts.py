"""The dropped-count columns of span files read back as recorded, 0 where null, without pandas.

Spans are made with the real SDK and written by the real exporter; a copy of the file with the
count columns rewritten (nulls and numbers, as another writer may leave them) is read back.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from genai_scenarios import sequential
from genai_spans import Recorder

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans

_COUNTS = ("dropped_attributes_count", "dropped_events_count", "dropped_links_count")


def _recorded(folder: Path) -> Path:
    rec = Recorder(folder)
    sequential(rec)
    rec.close()
    (path,) = folder.glob("*.parquet")
    return path


def test_null_counts_read_as_zero_and_numbers_as_written(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    table = pq.read_table(path)
    rows = table.num_rows
    for offset, name in enumerate(_COUNTS):
        values = [None if row % 2 else row + offset for row in range(rows)]
        table = table.set_column(
            table.schema.get_field_index(name), name, pa.array(values, table.schema.field(name).type)
        )
    pq.write_table(table, path)
    by_id = {span.span_id: span for span in read_spans(resolve_paths([path]))}
    for row, span_id in enumerate(table.column("span_id").to_pylist()):
        span = by_id[span_id]
        got = (span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count)
        assert got == ((0, 0, 0) if row % 2 else (row, row + 1, row + 2))


def test_reading_spans_does_not_import_pandas(tmp_path: Path) -> None:
    path = _recorded(tmp_path)
    code = (
        "import sys\n"
        "from evaltrace.collector import read_traces, resolve_paths\n"
        f"assert list(read_traces(resolve_paths([{str(path)!r}])))\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"


def test_reading_shards_does_not_import_pandas(tmp_path: Path) -> None:
    """Each worker of a sharded run reads its shard: choosing the shard's rows must not load pandas (~0.5 s)."""
    path = _recorded(tmp_path)
    code = (
        "import sys\n"
        "from evaltrace.collector import resolve_paths\n"
        "from evaltrace.collector.runfiles.reader import iter_traces\n"
        "from evaltrace.collector.runfiles.shard import Shard\n"
        f"files = resolve_paths([{str(path)!r}])\n"
        "sharded = sum(len(list(iter_traces(files, Shard(index, 3)))) for index in range(3))\n"
        "print(sharded, len(list(iter_traces(files))))\n"
        "print('pandas' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    counts, pandas = done.stdout.splitlines()
    sharded, whole = counts.split()
    assert sharded == whole != "0"
    assert pandas == "False"
