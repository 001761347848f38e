"""Which columnar engine for the rule scorers: pyarrow.compute, DuckDB or Polars, measured (issue 17).

Run: `.venv/bin/python benchmarks/bench_columnar.py [--traces 10000] [--repeats 5] [--cli PAIRS]`

On the peer benchmark's traces table (`benchmarks/out/peer-N-seed7`, its strict trajectory per case;
the table is built once into `benchmarks/out/columnar-cache/`), each engine answers the question the
columnar `trajectory` asks of every row: are the row's tool-call names the case's expected names?
Measured per engine, in this one process: the import (a fresh interpreter's, in a subprocess), and
the median of `--repeats` runs over the whole table, from the Arrow batches to one boolean per row.
Every engine's answers must be the same. Then the columnar path itself (`BatchCalls` plus the
`trajectory` form, scores built for the passing rows) against the reference scorer on the same traces.
With `--cli PAIRS`: the whole warm `evaltrace score --workers 1`, columnar path on and off
(`columnar_entries.applies` answering `False`), interleaved, CPU of each child process, and the two
JSON reports compared.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent


def _table(folder: Path) -> tuple[pa.Table, Path]:
    os.environ["EVALTRACE_CACHE_DIR"] = str(HERE / "out" / "columnar-cache")
    from evaltrace.collector import resolve_paths
    from evaltrace.collector.traces.cache import cache_key, traces_folder, traces_of

    files = resolve_paths([folder / "runs"])
    for _ in traces_of(files, histories=False):  # builds the table the first time, reads it after
        pass
    path = traces_folder() / f"{cache_key(files, histories=False, shard=None)}.parquet"
    return pq.read_table(path, columns=["trace_id", "parent_row", "case_id", "tool_calls"]), path


def _expected(folder: Path) -> dict[str, list[str]]:
    spec = json.loads((folder / "spec.json").read_text(encoding="utf-8"))
    return {case["id"]: [c["name"] for c in case["expect"]["tool_calls"]] for case in spec["cases"]}


def with_pyarrow(table: pa.Table, expected: dict[str, list[str]]) -> list[bool]:
    """Names flattened by Arrow (one `to_pylist` per column), compared per row in Python."""
    found: list[bool] = []
    for batch in table.to_batches(max_chunksize=1024):
        calls = batch.column("tool_calls")
        names = pc.struct_field(calls.values, "name").to_pylist()
        offsets = calls.offsets.to_pylist()
        cases = batch.column("case_id").to_pylist()
        found += [names[offsets[i] : offsets[i + 1]] == expected.get(cases[i]) for i in range(batch.num_rows)]
    return found


def with_duckdb(table: pa.Table, expected: dict[str, list[str]]) -> list[bool]:
    """One SQL query: the names list per row, joined with the expected lists by case id."""
    import duckdb

    wanted = pa.table({"case_id": list(expected), "names": list(expected.values())})
    con = duckdb.connect()
    con.register("t", table.append_column("pos", pa.array(range(table.num_rows), pa.int64())))
    con.register("e", wanted)
    query = (
        "SELECT coalesce(list_transform(t.tool_calls, lambda c: c.name) = e.names, false) FROM t "
        "LEFT JOIN e ON t.case_id = e.case_id ORDER BY t.pos"
    )
    return [bool(row[0]) for row in con.execute(query).fetchall()]


def with_polars(table: pa.Table, expected: dict[str, list[str]]) -> list[bool]:
    """A Polars join and list comparison."""
    import polars as pl

    frame = pl.from_arrow(table.select(["case_id", "tool_calls"]))
    assert isinstance(frame, pl.DataFrame)
    wanted = pl.DataFrame({"case_id": list(expected), "names": list(expected.values())})
    names = frame.with_columns(pl.col("tool_calls").list.eval(pl.element().struct.field("name")).alias("got"))
    joined = names.join(wanted, on="case_id", how="left", maintain_order="left")
    return joined.select((pl.col("got") == pl.col("names")).fill_null(False)).to_series().to_list()


ENGINES: dict[str, tuple[str, Callable[[pa.Table, dict[str, list[str]]], list[bool]]]] = {
    "pyarrow.compute": ("pyarrow.compute", with_pyarrow),
    "duckdb": ("duckdb", with_duckdb),
    "polars": ("polars", with_polars),
}


def _import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def _median(job: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.process_time()
        result = job()
        times.append(time.process_time() - start)
    return statistics.median(times), result


def _scorers(table_path: Path, folder: Path, repeats: int) -> None:
    """The columnar path against the reference `trajectory` on the decoded traces (CPU s, median)."""
    from evaltrace.collector.traces.table import iter_table_traces
    from evaltrace.evaluators.scoring.columns import FORMS, BatchCalls, RowCalls
    from evaltrace.evaluators.scoring.scorers.base import run_scorer
    from evaltrace.evaluators.scoring.spec.loader import load_spec

    spec = load_spec(folder / "spec.json")
    batches = pq.ParquetFile(table_path).read().to_batches(max_chunksize=1024)
    traces = list(iter_table_traces(batches))
    jobs = [(trace, spec.case_scorers[trace.case_id or ""][0][0]) for trace in traces]
    reference_s, reference = _median(lambda: [run_scorer(s, t) for t, s in jobs], repeats)

    def columnar_path() -> list[Any]:
        rows = {tid: RowCalls(calls, index) for calls in map(BatchCalls, batches) for tid, index in calls.rows()}
        found = [(s, t, rows.get(t.trace_id)) for t, s in jobs]  # a trace id two rows share: the reference
        return [(r is not None and FORMS[type(s)](s, r)) or run_scorer(s, t) for s, t, r in found]

    columnar_s, found = _median(columnar_path, repeats)
    assert found == reference, "the columnar path's scores differ from the reference's"
    print(f"trajectory, {len(jobs)} traces: reference {reference_s:.3f} s, columnar path {columnar_s:.3f} s CPU")


_CLI = """
import sys
if sys.argv[1] == "off":
    from evaltrace.evaluators.engine import columnar_entries
    columnar_entries.applies = lambda *args: False  # every trace decoded and scored by its reference
from evaltrace.cli.main import run
sys.argv = ["evaltrace", "score", *sys.argv[2:]]
run()
"""


def _cli_ab(folder: Path, pairs: int) -> None:
    """`evaltrace score --workers 1` warm, columnar forms on and cleared, interleaved; reports compared."""
    work = HERE / "out" / "columnar-cli"
    env = {**os.environ, "EVALTRACE_CACHE_DIR": str(work / "cache"), "EVALTRACE_STORE": str(work / "store")}
    times: dict[str, list[float]] = {"on": [], "off": []}
    for index in range(pairs * 2 + 1):
        mode = "on" if index % 2 == 0 else "off"
        args = [str(folder / "runs"), "--spec", str(folder / "spec.json"), "--json", str(work / f"{mode}.json")]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        cmd = [sys.executable, "-c", _CLI, mode, *args, "--workers", "1"]
        subprocess.run(cmd, env=env, capture_output=True, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if index:  # the first run fills the traces cache
            times[mode].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    reports = [json.loads((work / f"{mode}.json").read_text(encoding="utf-8")) for mode in ("on", "off")]
    for report in reports:
        report.pop("created_at")
    same = "identical" if reports[0] == reports[1] else "DIFFERENT"
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"evaltrace score warm, --workers 1: columnar on {on:.2f} s, off {off:.2f} s CPU (median); reports {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=10000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cli", type=int, default=0, metavar="PAIRS", help="also A/B the warm command, PAIRS times")
    args = parser.parse_args()
    folder = HERE / "out" / f"peer-{args.traces}-seed7"
    if not (folder / "spec.json").exists():
        sys.exit(f"{folder} is missing: run benchmarks/bench_peer.py --traces {args.traces} first")
    table, path = _table(folder)
    table = table.filter(pc.is_null(table.column("parent_row")))
    expected = _expected(folder)
    print(f"{table.num_rows} rows, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    answers = {}
    for name, (module, job) in ENGINES.items():
        seconds, answers[name] = _median(functools.partial(job, table, expected), args.repeats)
        print(f"{name:16} import {_import_seconds(module):.3f} s   whole table {seconds:.3f} s CPU (median)")
    assert all(found == answers["pyarrow.compute"] for found in answers.values()), "the engines disagree"
    print(f"all engines agree: {sum(answers['pyarrow.compute'])} of {table.num_rows} rows pass")
    _scorers(path, folder, args.repeats)
    if args.cli:
        _cli_ab(folder, args.cli)


if __name__ == "__main__":
    main()
