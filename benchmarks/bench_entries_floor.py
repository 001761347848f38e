"""The floor of the next warm-scoring design (issue 17): entries decided and written from columns.

Run: `.venv/bin/python benchmarks/bench_entries_floor.py [--traces 10000] [--rounds 3]`

Today a warm re-scoring turns every row of the traces table into a `Trace`, a `SampleResult`,
parked JSON, store values, an entry and store rows (~0.34 ms a trace in Python). The design this
measures keeps the passing entries as columns end to end:

1. the spec's expectations become columns (case id, expected names, expected argument texts
   encoded as the traces table encodes arguments);
2. the traces table is read (only the columns an entry needs) and joined with them by case id;
3. the strict-trajectory verdict is computed for the whole batch with pyarrow.compute (names and
   argument texts equal list by list, no tool name repeated);
4. the report entries of the decided rows are rendered from the columns with a fixed template
   (the passing reason and details follow from the names alone);
5. the rows left undecided (here the ~10% planted failures) are decoded into `Trace` records by
   the real table decoder and scored by the real `Trajectory` reference;
6. the score store's rows are one Arrow table, written to Parquet.

Each phase is timed in one fresh process (CPU seconds, `time.process_time`), the process's wall
and peak RSS from outside, every round. Before timing, the rendered entries are checked against
a real `evaltrace score --workers 1 --json` report of the same run: every decided entry must
equal the report's entry for its case (parsed JSON, key for key), and the undecided cases must be
exactly the report's failing ones, so the floor is of work that gives the product's output.
Not measured here: validating the spec (the real loader's cost, `bench_spec.py`), the report
header and the terminal summary (a few milliseconds from the scores table).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CHILD_FLAG = "--child"
_DUMP = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
PHASES = ("imports", "spec", "read", "verdicts", "render", "reference", "store")


def _spec_columns(spec_path: Path) -> dict[str, Any]:
    """Phase 1: the cases' expected names and argument texts as columns, by case id."""
    from evaltrace.collector.traces.table import comparable_text as encode  # loaded by the imports phase

    cases = json.loads(spec_path.read_text(encoding="utf-8"))["cases"]
    ids, names, texts, arguments, rules, meta = [], [], [], [], [], []
    expects = {}
    for case in cases:
        expects[case["id"]] = case["expect"]
        calls = case["expect"]["tool_calls"]
        ids.append(case["id"])
        names.append([call["name"] for call in calls])
        arguments.append([call["arguments"] for call in calls])
        texts.append([encode(call["arguments"]) for call in calls])
        rules.append(encode(case["expect"]["trajectory"].get("arguments", {})))
        meta.append((case.get("input"), case.get("tier"), case.get("tags", [])))
    return {
        "ids": ids,
        "names": names,
        "texts": texts,
        "arguments": arguments,
        "rules": rules,
        "meta": meta,
        "expects": expects,
    }


def _read(table_path: Path) -> Any:
    """Phase 2: the traces table, read once (the undecided rows' records are decoded from it too)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(table_path)
    top = pc.is_null(table.column("parent_row"))
    # Nested agents' rows are attached to their parents by the decoder; entries are top-level rows.
    return table if pc.all(top).as_py() else table.filter(top)


def _verdicts(table: Any, spec: dict[str, Any]) -> tuple[list[Any], list[int]]:
    """Phase 3: per row, the matching when strict trajectory passes for sure (else `None`), and its case."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from evaltrace.evaluators.scoring.scorers import trajectory as form  # the form's own steps

    position = {case_id: i for i, case_id in enumerate(spec["ids"])}
    case_index = pa.array([position.get(c) for c in table.column("case_id").to_pylist()], pa.int64())
    calls = table.column("tool_calls").combine_chunks()
    expected = pa.array(spec["names"], pa.list_(pa.string())).take(case_index)
    expected_texts = pa.array(spec["texts"], pa.list_(pa.string())).take(case_index)
    # Rows whose call count is the expected one; their flattened lists line up item for item.
    aligned = pc.fill_null(pc.equal(pc.list_value_length(calls), pc.list_value_length(expected)), False)
    rows = pc.indices_nonzero(aligned)
    mine, wanted, wanted_texts = calls.take(rows), expected.take(rows), expected_texts.take(rows)
    items = pc.list_flatten(mine)
    equal = pc.and_(
        pc.equal(items.field("name"), pc.list_flatten(wanted)),
        pc.equal(items.field("arguments_json"), pc.list_flatten(wanted_texts)),
    )
    unequal = np.concatenate([[0], np.cumsum(~pc.fill_null(equal, False).to_numpy(zero_copy_only=False))])
    offsets = mine.offsets.to_numpy()
    clean = (unequal[offsets[1:]] - unequal[offsets[:-1]]) == 0
    # Where a tool name repeats, the matching is the reference's (Kuhn's), asked as the form asks it.
    names, texts = items.field("name").to_pylist(), items.field("arguments_json").to_pylist()
    cases = case_index.to_pylist()
    decided: list[Any] = [None] * len(table)
    for k, row in enumerate(rows.to_pylist()):
        start, end = offsets[k], offsets[k + 1]
        if not clean[k]:
            continue
        row_names = names[start:end]
        if len(set(row_names)) == end - start:
            decided[row] = [[i, i] for i in range(end - start)]
            continue
        case = cases[row]
        match = _rules(spec["rules"][case])
        expected_arguments = spec["arguments"][case]
        compared = form.compared_flags(match, row_names, expected_arguments)
        decided[row] = form._matching(form.RowPairs(match, row_names, expected_arguments, compared, texts[start:end]))
    return decided, cases


_RULES: dict[str, Any] = {}


def _rules(text: str) -> Any:
    """A case's argument-matching settings (one object per distinct setting)."""
    from evaltrace.evaluators.scoring.scorers.arguments import ArgumentMatch

    if text not in _RULES:
        _RULES[text] = ArgumentMatch.model_validate(json.loads(text))
    return _RULES[text]


def _iso(micros: int) -> str:
    from datetime import UTC, datetime, timedelta

    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    return moment.isoformat().replace("+00:00", "Z")


def _render(table: Any, spec: dict[str, Any], decided: list[Any], cases: list[int]) -> list[bytes]:
    """Phase 4: each decided row's report entry, from the columns and a template."""
    from evaltrace.collector.traces.records import Usage
    from evaltrace.evaluators.scoring.scorers.prices import DEFAULT_PRICES, call_cost, find_price

    trace_ids = table.column("trace_id").to_pylist()
    roots = table.column("root_span_id").to_pylist()
    conversations = table.column("conversation_id").to_pylist()
    outputs = table.column("output").to_pylist()
    errors = table.column("error").to_pylist()
    starts = table.column("start_time").cast("int64").to_pylist()
    ends = table.column("end_time").cast("int64").to_pylist()
    usage = table.column("usage").to_pylist()
    iterations = table.column("iterations").combine_chunks()
    import pyarrow.compute as pc

    flat = pc.list_flatten(iterations)
    models = flat.field("model").to_pylist()
    tokens = flat.field("usage").to_pylist()
    it_offsets = iterations.offsets.to_pylist()
    prices: dict[str, Any] = {}
    out = []
    for row, matched in enumerate(decided):
        if matched is None:
            continue
        case = cases[row]
        names = spec["names"][case]
        case_input, tier, tags = spec["meta"][case]
        cost: float | None = 0.0
        for k in range(it_offsets[row], it_offsets[row + 1]):
            model = models[k]
            price = prices[model] if model in prices else prices.setdefault(model, find_price(model, DEFAULT_PRICES))
            if price is None or cost is None:
                cost = None
                continue
            cost += call_cost(cast(Usage, _Usage(tokens[k])), price)
        if it_offsets[row] == it_offsets[row + 1]:
            cost = None
        pairs = _DUMP([[i, i] for i in range(len(names))])
        matching = _DUMP(matched)
        count = len(names)
        why = f"all {count} expected calls matched" if count else "no calls expected or made"
        score = (
            '{"scorer":"trajectory","passed":true,"value":1.0,"reason":'
            + _DUMP(f"Passed (strict, score 1.00): {why}.")
            + ',"error":null,"turn":null,"details":{"expected":'
            + _DUMP(names)
            + ',"actual":'
            + _DUMP(names)
            + ',"matched":'
            + matching
            + ',"in_order":'
            + pairs
            + "}}"
        )
        used = usage[row]
        start, end = starts[row], ends[row]
        sample = (
            f'{{"trace_id":"{trace_ids[row]}","trace_ids":["{trace_ids[row]}"],"root_span_ids":{_DUMP([roots[row]])},'
            f'"conversation_id":{_DUMP(conversations[row])},"status":"passed","passed":true,"scores":[{score}],'
            f'"input":{_DUMP(case_input)},"output":{_DUMP(outputs[row])},"error":{_DUMP(errors[row])},'
            f'"start_time":{_DUMP(None if start is None else _iso(start))},'
            f'"duration_seconds":{_DUMP(None if start is None or end is None else (end - start) / 1e6)},'
            f'"usage":{{"input_tokens":{used["input_tokens"] or 0},"output_tokens":{used["output_tokens"] or 0}}},'
            f'"cost_usd":{_DUMP(cost)}}}'
        )
        out.append(
            (
                f'{{"case_id":{_DUMP(spec["ids"][case])},"trace_id":"{trace_ids[row]}","passed":true,'
                f'"status":"passed","pass_rate":1.0,"rule":"mean","reason":null,"scores":[{score}],'
                f'"input":{_DUMP(case_input)},"output":{_DUMP(outputs[row])},"tier":{_DUMP(tier)},'
                f'"tags":{_DUMP(tags)},"samples":[{sample}]}}'
            ).encode()
        )
    return out


class _Usage:
    """A usage struct of the table as `call_cost` reads it (a record per model call would cost more)."""

    __slots__ = ("input_tokens", "output_tokens", "cache_read_tokens")

    def __init__(self, fields: dict[str, int | None]) -> None:
        self.input_tokens = fields["input_tokens"]
        self.output_tokens = fields["output_tokens"]
        self.cache_read_tokens = fields["cache_read_tokens"]


def _reference(table: Any, spec: dict[str, Any], undecided_ids: set[str]) -> int:
    """Phase 5: the undecided rows decoded by the real decoder and scored by the real reference."""
    import pyarrow.compute as pc

    from evaltrace.collector.traces.table import from_table
    from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory

    rows = table.filter(pc.is_in(table.column("trace_id"), value_set=_string_array(undecided_ids)))
    failed = 0
    for trace in from_table(rows):
        expect = spec["expects"][trace.case_id]
        scorer = Trajectory(expected=expect["tool_calls"], mode="strict", arguments=expect["trajectory"]["arguments"])
        failed += not scorer.score(trace).passed
    return failed


def _string_array(values: set[str]) -> Any:
    import pyarrow as pa

    return pa.array(sorted(values), pa.string())


def _store(table: Any, spec: dict[str, Any], decided: list[Any], cases: list[int], folder: Path) -> None:
    """Phase 6: one scores row per entry (decided rows from columns), written as one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    count = len(decided)
    scores = pa.table(
        {
            "case_id": pa.array([spec["ids"][c] for c in cases], pa.string()),
            "trace_id": table.column("trace_id"),
            "scorer": pa.array(["trajectory"] * count, pa.string()),
            "passed": pa.array([m is not None for m in decided], pa.bool_()),
            "value": pa.array([1.0 if m is not None else 0.0 for m in decided], pa.float64()),
        }
    )
    pq.write_table(scores, folder / "scores.parquet")


def child(table_path: Path, spec_path: Path, out: Path) -> None:
    """One measured run: every phase, its CPU seconds printed as JSON."""
    clock: dict[str, float] = {}
    mark = time.process_time()
    # Imports are a phase of their own: everything the later phases import.

    import evaltrace.collector.traces.table
    import evaltrace.evaluators.scoring.scorers.prices
    import evaltrace.evaluators.scoring.scorers.trajectory  # noqa: F401

    def lap(name: str) -> None:
        nonlocal mark
        now = time.process_time()
        clock[name] = now - mark
        mark = now

    lap("imports")
    spec = _spec_columns(spec_path)
    lap("spec")
    table = _read(table_path)
    lap("read")
    decided, cases = _verdicts(table, spec)
    lap("verdicts")
    entries = _render(table, spec, decided, cases)
    lap("render")
    undecided = {t for t, m in zip(table.column("trace_id").to_pylist(), decided, strict=True) if m is None}
    failed = _reference(table, spec, undecided)
    lap("reference")
    _store(table, spec, decided, cases, out.parent)
    lap("store")
    out.write_bytes(b"[" + b",".join(entries) + b"]")
    print(json.dumps({"phases": clock, "decided": len(entries), "undecided": len(undecided), "failed": failed}))


def _prime(data: Path, cache: Path) -> tuple[Path, Path]:
    """A real one-worker scoring with its own traces cache: the report to check against, and the table."""
    report = data / "floor-report.json"
    env = dict(os.environ, EVALTRACE_CACHE_DIR=str(cache), EVALTRACE_STORE=str(data / "floor-store"))
    cmd = [sys.executable, "-m", "evaltrace.cli", "score", "runs", "--spec", "spec.json", "--json", str(report)]
    done = subprocess.run([*cmd, "--workers", "1"], cwd=data, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"evaltrace score failed: {done.stderr.strip()}")
    tables = sorted((cache / "traces").glob("*.parquet"), key=lambda p: p.stat().st_mtime)
    if not tables:
        raise SystemExit(f"no traces table in {cache}: the scoring did not fill the cache")
    return report, tables[-1]


def check(report: Path, rendered: Path) -> tuple[int, int]:
    """Every rendered entry equals the report's entry for its case; the rest are the report's failures."""
    real = {entry["case_id"]: entry for entry in json.loads(report.read_text(encoding="utf-8"))["entries"]}
    mine = json.loads(rendered.read_text(encoding="utf-8"))
    for entry in mine:
        if entry != real[entry["case_id"]]:
            raise SystemExit(f"rendered entry for {entry['case_id']} differs from the report's")
    decided = {entry["case_id"] for entry in mine}
    failing = {case_id for case_id, entry in real.items() if not entry["passed"]}
    if failing != set(real) - decided:
        raise SystemExit("the undecided cases are not exactly the report's failing ones")
    return len(decided), len(failing)


def _measure(table: Path, spec: Path, out: Path) -> dict[str, Any]:
    """One child run: its phases, wall time and peak RSS (its own, from `wait4`)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, __file__, CHILD_FLAG, str(table), str(spec), str(out)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit("the measured run failed")
    result: dict[str, Any] = json.loads(stdout)
    result["wall"] = wall
    result["peak_mb"] = usage.ru_maxrss / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = HERE / "out" / f"peer-{args.traces}-seed{args.seed}"
    if not (data / "spec.json").exists():
        raise SystemExit(f"{data}: no peer dataset; make it with benchmarks/bench_peer.py --traces {args.traces}")
    report, table = _prime(data, data / "floor-cache")
    out = data / "floor-out" / "entries.json"
    out.parent.mkdir(exist_ok=True)
    runs = [_measure(table, data / "spec.json", out) for _ in range(args.rounds)]
    decided, failing = check(report, out)
    print(f"checked: {decided} decided entries equal the report's; {failing} undecided = the report's failures")
    for phase in PHASES:
        values = [run["phases"][phase] for run in runs]
        print(f"{phase:10} {statistics.median(values):6.3f} s CPU  (min {min(values):.3f}, max {max(values):.3f})")
    total = [sum(run["phases"].values()) for run in runs]
    print(f"{'phases':10} {statistics.median(total):6.3f} s CPU")
    wall, peak = statistics.median(r["wall"] for r in runs), max(r["peak_mb"] for r in runs)
    print(f"{'process':10} {wall:6.3f} s wall, peak {peak:.0f} MB")


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == CHILD_FLAG:
        child(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
