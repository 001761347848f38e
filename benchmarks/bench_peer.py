"""evaltrace against its closest peer, agentevals-cli 0.11.0, and the DuckDB floor, on the same traces (issue 17).

Run: `.venv/bin/python benchmarks/bench_peer.py [--traces 10000] [--rounds 3] [--seed 7]`
(`--profile` prints a cProfile of `evaltrace score` cold, one worker, instead of measuring.)

Set-up, cached and reused across runs:

- agentevals-cli==0.11.0 in a virtualenv of its own, `benchmarks/.peer-venv/env` (built once under
  a file lock, rebuilt only when its requirements change; pip reaches PyPI);
- the dataset under `benchmarks/out/peer-N-seedS/` (see `_peer_data.py`): N traces written once
  through one OTel SDK tracer provider to both the official OTLP JSON file exporter (agentevals'
  input) and evaltrace's Parquet exporter, with the same strict trajectory per case in both
  tools' formats, ~10% of cases planted to fail (a wrong order).

Measured, interleaved in each round (the order rotates every round; this VM's speed drifts within
minutes, so only runs close in time compare):

- `agentevals run spans.jsonl -e evalset.json -m tool_trajectory_avg_score --trajectory-match-type
  exact -o json`;
- `evaltrace score runs --spec spec.json --json report.json` cold (`--no-cache` when the option
  exists, otherwise the command as it is) and warm (the same command once the cache of rebuilt
  traces is filled; without a cache it is simply the second run). Its traces cache
  (`EVALTRACE_CACHE_DIR`) and score store (`EVALTRACE_STORE`, emptied before each run) are
  folders beside the dataset;
- the floor: one DuckDB query over the Parquet files that rebuilds each trace's ordered tool-call
  names from the promoted columns and compares them with each case's expected names (from
  spec.json): the whole process (interpreter, imports, spec, query) and the query alone.

Each is a fresh process: wall time, CPU time (user + system, children included), the largest
process's peak RSS (`wait4`'s `ru_maxrss`) and the peak of the whole process tree's summed RSS
(sampled every 20 ms from /proc, so multi-process runs are not flattered), and beside it the tree's
summed PSS (`smaps_rollup`): forked workers share their parent's pages, which summed RSS counts once
per process and PSS once in all, so PSS is what the tree takes from the machine. After every run the
failing cases are read back and must be exactly the planted ones, in every tool: the benchmark
stops with an error if any tool disagrees.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
PEER_ROOT = HERE / ".peer-venv"
PEER_REQUIREMENTS = ("agentevals-cli==0.11.0",)
AIMS = {"warm": 50.0, "cold": 10.0}
RSS_AIM_MB = 300.0
TOOLS = ("agentevals", "cold", "warm", "floor")


# --- the peer's venv --------------------------------------------------------------------------


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `path` (another run may be building the venv)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _clean_env() -> dict[str, str]:
    """This environment without the variables that would tie a child to our venv or an OTLP endpoint.

    `PYTHONDONTWRITEBYTECODE` goes too: an installed tool runs from bytecode caches (pip writes the
    peer's at install; evaltrace's editable install writes its own on the first run), and with the
    variable set every evaltrace run recompiled its own ~130 modules, ~0.2-0.3 s a run that no
    user pays, while the peer ran from the caches pip had written.
    """
    drop = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")
    return {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("OTEL_")}


def peer_python() -> Path:
    """The interpreter of the peer's venv, built first when missing or made for other requirements."""
    PEER_ROOT.mkdir(parents=True, exist_ok=True)
    ignore = PEER_ROOT / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# The peer benchmark venv (benchmarks/bench_peer.py); never committed.\n*\n")
    env_dir = PEER_ROOT / "env"
    python = env_dir / "bin" / "python"
    marker = env_dir / ".bench-requirements"
    wanted = json.dumps({"requirements": list(PEER_REQUIREMENTS)})
    with _locked(PEER_ROOT / ".lock"):
        if python.exists() and marker.exists() and marker.read_text() == wanted:
            return python
        print(f"building the peer venv {env_dir} ({', '.join(PEER_REQUIREMENTS)}) ...", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(env_dir)], check=True, env=_clean_env())
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PEER_REQUIREMENTS]
        subprocess.run(pip, check=True, env=_clean_env())
        marker.write_text(wanted)
    return python


# --- the dataset ------------------------------------------------------------------------------


def dataset(traces: int, seed: int) -> tuple[Path, dict[str, Any]]:
    """The cached dataset folder and its metadata for (traces, seed), generated if missing."""
    folder = OUT / f"peer-{traces}-seed{seed}"
    meta = folder / "dataset.json"
    if not meta.exists():
        # In a child process, so this process stays small (Linux carries peak RSS over fork + exec).
        cmd = [sys.executable, str(Path(__file__).resolve()), "--_generate", str(folder), str(traces), str(seed)]
        subprocess.run(cmd, check=True)
    return folder, json.loads(meta.read_text(encoding="utf-8"))


def _generate(folder: Path, traces: int, seed: int) -> None:
    import shutil

    sys.path.insert(0, str(HERE))
    import _peer_data  # a sibling script, not a package

    shutil.rmtree(folder, ignore_errors=True)
    print(f"generating {traces:,} traces (seed {seed}) in {folder} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    meta = _peer_data.generate(folder, traces, seed)
    print(f"  {meta['spans']:,} spans in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


# --- one measured process ---------------------------------------------------------------------


@dataclass
class Run:
    """One measured process."""

    tool: str
    wall: float
    cpu: float
    peak_mb: float  # the largest single process
    tree_mb: float  # the whole process tree, summed, sampled
    returncode: int
    query: float | None = None  # the floor's query alone
    cache_miss: bool = False  # a warm run that wrote the traces cache (the code changed since it was filled)
    tree_pss_mb: float = 0.0  # the tree's summed PSS at its peak, sampled (0: not measured, an older result)


def _tree_kb(pid: int) -> tuple[int, int]:
    """Summed VmRSS and PSS of `pid` and its descendants, in KB (0 for those already gone)."""
    rss, pss, stack = 0, 0, [pid]
    while stack:
        current = stack.pop()
        try:
            rss += _proc_kb(f"/proc/{current}/status", "VmRSS:")
            pss += _proc_kb(f"/proc/{current}/smaps_rollup", "Pss:")
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children", encoding="ascii") as children:
                    stack += [int(c) for c in children.read().split()]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return rss, pss


def _proc_kb(path: str, key: str) -> int:
    with open(path, encoding="ascii") as lines:
        return next((int(line.split()[1]) for line in lines if line.startswith(key)), 0)


def measure(tool: str, cmd: Sequence[str], env: dict[str, str], stdout: Path) -> Run:
    """Run `cmd` to completion; its wall and CPU time and peak memory (see the module docstring)."""
    peak_tree = peak_pss = 0
    done = threading.Event()
    with stdout.open("wb") as out:
        started = time.perf_counter()
        # In the output's folder: nothing a tool writes by default lands in the repository.
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.PIPE, env=env, cwd=stdout.parent)

        def sample() -> None:
            nonlocal peak_tree, peak_pss
            while not done.is_set():
                rss, pss = _tree_kb(proc.pid)
                peak_tree, peak_pss = max(peak_tree, rss), max(peak_pss, pss)
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        assert proc.stderr is not None
        errors = proc.stderr.read()  # drained while it runs, so a chatty child never blocks
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        done.set()
        sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        tail = errors.decode(errors="replace").strip().splitlines()[-15:]
        raise SystemExit(f"{tool} failed (exit {proc.returncode}): {' '.join(cmd)}\n" + "\n".join(tail))
    cpu = usage.ru_utime + usage.ru_stime
    return Run(tool, wall, cpu, usage.ru_maxrss / 1024, peak_tree / 1024, proc.returncode, tree_pss_mb=peak_pss / 1024)


# --- the three tools --------------------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """Everything a round needs: the dataset, the interpreters and whether `--no-cache` exists."""

    folder: Path
    meta: dict[str, Any]
    peer: Path
    no_cache: bool
    cache_dir: Path

    @property
    def planted(self) -> set[str]:
        return set(self.meta["planted"])


def agentevals_cmd(setup: Setup) -> list[str]:
    """agentevals-cli's run over the OTLP JSON file with the strict (EXACT) trajectory metric."""
    agentevals = setup.peer.parent / "agentevals"
    return [
        str(agentevals), "run", str(setup.folder / "otlp" / "spans.jsonl"),
        "--eval-set", str(setup.folder / "evalset.json"),
        "--metric", "tool_trajectory_avg_score", "--trajectory-match-type", "exact", "--output", "json",
    ]  # fmt: skip


def evaltrace_cmd(setup: Setup, *, cold: bool, report: Path, extra: Sequence[str] = ()) -> list[str]:
    """`evaltrace score` as a user types it (through the venv's interpreter)."""
    cmd = [
        sys.executable, *extra, "-m", "evaltrace.cli", "score", str(setup.folder / "runs"),
        "--spec", str(setup.folder / "spec.json"), "--json", str(report),
    ]  # fmt: skip
    if cold and setup.no_cache:
        cmd.append("--no-cache")
    return cmd


def evaltrace_env(setup: Setup) -> dict[str, str]:
    """evaltrace's environment: its traces cache and score store beside the dataset, not in the repository."""
    store = str(setup.folder / "work" / "store")
    return {**_clean_env(), "EVALTRACE_CACHE_DIR": str(setup.cache_dir), "EVALTRACE_STORE": store}


def empty_store(setup: Setup) -> None:
    """Remove the benchmark's score store, so every scoring adds its rows to the same (empty) store."""
    import shutil

    shutil.rmtree(setup.folder / "work" / "store", ignore_errors=True)


def agentevals_failures(path: Path, setup: Setup) -> set[str]:
    """Case ids agentevals failed; checks it scored every trace once against the right case."""
    report = json.loads(path.read_text(encoding="utf-8"))
    if report.get("errors"):
        raise SystemExit(f"agentevals reported errors: {report['errors'][:3]}")
    cases = setup.meta["trace_cases"]
    names = json.loads((setup.folder / "expected.json").read_text(encoding="utf-8"))
    failed, seen = set(), set()
    for trace in report["traces"]:
        case = cases[trace["trace_id"]]
        (metric,) = trace["metrics"]
        if metric.get("error"):
            raise SystemExit(f"agentevals: trace {trace['trace_id']} ({case}): {metric['error']}")
        (comparison,) = metric["details"]["comparisons"]
        if [call["name"] for call in comparison["expected"]] != names[case]:
            raise SystemExit(f"agentevals matched trace {trace['trace_id']} to another case than {case}")
        seen.add(case)
        if metric["eval_status"] != "PASSED":
            failed.add(case)
    if len(seen) != len(cases) or len(report["traces"]) != len(cases):
        raise SystemExit(f"agentevals scored {len(report['traces'])} traces, {len(seen)} cases of {len(cases)}")
    return failed


def evaltrace_failures(path: Path, setup: Setup) -> set[str]:
    """Case ids evaltrace failed; checks every case got its one trace."""
    report = json.loads(path.read_text(encoding="utf-8"))
    entries = report["entries"]
    missing = [e["case_id"] for e in entries if not e.get("trace_id")]
    if len(entries) != setup.meta["traces"] or missing or report.get("unmatched"):
        raise SystemExit(f"evaltrace: {len(entries)} entries, {len(missing)} without a trace, unmatched traces")
    return {e["case_id"] for e in entries if not e["passed"]}


FLOOR_QUERY = """
WITH spans AS (
    SELECT trace_id, span_id, case_id, gen_ai_operation_name AS op, gen_ai_tool_name AS tool, start_time
    FROM read_parquet($files)
),
trace_case AS (
    SELECT trace_id, any_value(case_id) AS case_id FROM spans WHERE case_id IS NOT NULL GROUP BY trace_id
),
calls AS (
    SELECT trace_id, list(tool ORDER BY start_time, span_id) AS names
    FROM spans WHERE op = 'execute_tool' GROUP BY trace_id
)
SELECT e.case_id
FROM expected AS e
LEFT JOIN trace_case AS t ON t.case_id = e.case_id
LEFT JOIN calls AS c ON c.trace_id = t.trace_id
WHERE t.trace_id IS NULL OR coalesce(c.names, []::VARCHAR[]) IS DISTINCT FROM e.names
"""


def _floor(runs: Path, spec: Path, out: Path) -> None:
    """The floor, in its own process: the failing case ids and the query's time, as JSON in `out`."""
    import glob

    import duckdb
    import pyarrow as pa

    cases = json.loads(spec.read_text(encoding="utf-8"))["cases"]
    expected = pa.table({
        "case_id": [c["id"] for c in cases],
        "names": [[call["name"] for call in c["expect"]["tool_calls"]] for c in cases],
    })  # fmt: skip
    files = sorted(glob.glob(str(runs / "*.parquet")))
    started = time.perf_counter()
    connection = duckdb.connect()
    connection.register("expected", expected)
    failed = [row[0] for row in connection.execute(FLOOR_QUERY, {"files": files}).fetchall()]
    query = time.perf_counter() - started
    out.write_text(json.dumps({"failed": failed, "query": query}), encoding="utf-8")


def floor_cmd(setup: Setup, out: Path) -> list[str]:
    """The floor's process: this script with `--_floor`, our venv's interpreter (it has duckdb)."""
    script = str(Path(__file__).resolve())
    return [sys.executable, script, "--_floor", str(setup.folder / "runs"), str(setup.folder / "spec.json"), str(out)]


# --- the run ----------------------------------------------------------------------------------


def run_one(tool: str, setup: Setup) -> Run:
    """Measure `tool` once and check that it failed exactly the planted cases."""
    work = setup.folder / "work"
    if tool == "agentevals":
        result = measure(tool, agentevals_cmd(setup), _clean_env(), work / "agentevals.json")
        failed = agentevals_failures(work / "agentevals.json", setup)
    elif tool == "floor":
        out = work / "floor.json"
        result = measure(tool, floor_cmd(setup, out), _clean_env(), work / "floor.out")
        floor = json.loads(out.read_text(encoding="utf-8"))
        result.query, failed = floor["query"], set(floor["failed"])
    else:
        report = work / f"evaltrace-{tool}.json"
        cmd = evaltrace_cmd(setup, cold=tool == "cold", report=report)
        empty_store(setup)
        cached = _cache_files(setup)
        result = measure(tool, cmd, evaltrace_env(setup), work / f"evaltrace-{tool}.out")
        result.cache_miss = tool == "warm" and _cache_files(setup) - cached != set()
        failed = evaltrace_failures(report, setup)
    if failed != setup.planted:
        extra, missed = sorted(failed - setup.planted)[:5], sorted(setup.planted - failed)[:5]
        raise SystemExit(f"{tool} disagrees on which cases fail: also failed {extra}, passed planted {missed}")
    return result


def _cache_files(setup: Setup) -> set[str]:
    """The traces cache's file names (a hit only touches its file): a warm run that adds one missed the cache."""
    return {p.name for p in setup.cache_dir.rglob("*.parquet")}


def has_no_cache_option() -> bool:
    """Whether this checkout's `evaltrace score` has `--no-cache` (issue 17 adds it)."""
    cmd = [sys.executable, "-m", "evaltrace.cli", "score", "--help"]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**_clean_env(), "COLUMNS": "200"}, check=True)
    return "--no-cache" in done.stdout


def prime_cache(setup: Setup) -> None:
    """Empty the benchmark's trace cache, then fill it with one unmeasured `evaltrace score`."""
    import shutil

    shutil.rmtree(setup.cache_dir, ignore_errors=True)
    empty_store(setup)
    report = setup.folder / "work" / "evaltrace-prime.json"
    run = measure(
        "prime", evaltrace_cmd(setup, cold=False, report=report), evaltrace_env(setup), report.with_suffix(".out")
    )
    if evaltrace_failures(report, setup) != setup.planted:
        raise SystemExit("evaltrace (priming run) disagrees on which cases fail")
    print(f"cache primed: {run.wall:.2f} s", flush=True)


def _median(runs: list[Run], field: str) -> float:
    return float(statistics.median(getattr(r, field) for r in runs))


def report_table(results: dict[str, list[Run]], no_cache: bool) -> str:
    """The results table: medians, spreads, ratios to agentevals (wall and CPU) and the aims (on wall time)."""
    base, base_cpu = _median(results["agentevals"], "wall"), _median(results["agentevals"], "cpu")
    label = {
        "agentevals": "agentevals-cli 0.11.0",
        "cold": "evaltrace score, cold" + ("" if no_cache else " (no --no-cache yet)"),
        "warm": "evaltrace score, warm" + ("" if no_cache else " (no cache yet)"),
        "floor": "DuckDB floor, process",
    }
    lines = [
        f"{'tool':42} {'wall s':>7} {'(min-max)':>13} {'CPU s':>7} {'peak MB':>8} {'tree MB':>8} {'PSS MB':>7} "
        f"{'x wall':>7} {'x CPU':>6}  aim",
    ]
    for tool in TOOLS:
        runs = [r for r in results[tool] if not r.cache_miss] or results[tool]
        wall, cpu = _median(runs, "wall"), _median(runs, "cpu")
        spread = f"{min(r.wall for r in runs):.2f}-{max(r.wall for r in runs):.2f}"
        aim = ""
        if tool in AIMS:
            met = base / wall >= AIMS[tool]
            peak = max(_median(runs, "peak_mb"), _median(runs, "tree_mb"))
            rss = "met" if peak <= RSS_AIM_MB else "NOT met"
            aim = f">= {AIMS[tool]:.0f}x: {'met' if met else 'NOT met'}; RSS <= {RSS_AIM_MB:.0f} MB: {rss}"
        lines.append(
            f"{label[tool]:42} {wall:7.2f} {spread:>13} {cpu:7.2f} {_median(runs, 'peak_mb'):8.0f} "
            f"{_median(runs, 'tree_mb'):8.0f} {_median(runs, 'tree_pss_mb'):7.0f} {base / wall:6.1f}x "
            f"{base_cpu / cpu:5.1f}x  {aim}"
        )
    query = statistics.median(r.query for r in results["floor"] if r.query is not None)
    misses = sum(r.cache_miss for r in results["warm"])
    if misses:
        lines.insert(0, f"({misses} warm runs missed the cache and are left out of the warm row when any hit it)")
    lines.append(
        f"{'DuckDB floor, query alone':42} {query:7.3f} {'':>13} {'':>7} {'':>8} {'':>8} {'':>7} {base / query:6.0f}x"
    )
    return "\n".join(lines)


def reprint(saved: Path) -> None:
    """Print the table of a run saved by this script (its `results-*.json`)."""
    payload = json.loads(saved.read_text(encoding="utf-8"))
    results = {tool: [Run(**r) for r in runs] for tool, runs in payload["runs"].items()}
    print(report_table(results, payload["no_cache"]))


def _profiled(stats_file: str, argv: list[str]) -> None:
    """Run `evaltrace <argv>` under cProfile timed by CPU, not wall, time (the shared VM's load
    would otherwise spread other processes' time over whatever happened to be running)."""
    import cProfile
    import runpy

    sys.argv = ["evaltrace", *argv]
    profiler = cProfile.Profile(time.process_time)
    try:
        profiler.runcall(runpy.run_module, "evaltrace.cli", run_name="__main__")
    except SystemExit as stop:
        if stop.code not in (0, 1, None):
            raise
    finally:
        profiler.dump_stats(stats_file)


def profile(setup: Setup, top: int) -> None:
    """cProfile of `evaltrace score` cold with one worker (so the work is in the profiled process)."""
    import pstats

    work = setup.folder / "work"
    stats_file = work / "score-cold.prof"
    score = evaltrace_cmd(setup, cold=True, report=work / "evaltrace-profile.json")[3:] + ["--workers", "1"]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_profiled", str(stats_file), *score]
    print("$ evaltrace " + " ".join(score), flush=True)
    empty_store(setup)
    run = measure("profile", cmd, evaltrace_env(setup), work / "evaltrace-profile.out")
    print(f"wall {run.wall:.2f} s under the profiler, CPU {run.cpu:.2f} s, peak {run.peak_mb:.0f} MB", flush=True)
    if evaltrace_failures(work / "evaltrace-profile.json", setup) != setup.planted:
        raise SystemExit("evaltrace (profiled) disagrees on which cases fail")
    stats = pstats.Stats(str(stats_file))
    print(f"\n--- top {top} by own CPU time ---", flush=True)
    stats.sort_stats("tottime").print_stats(top)
    print(f"\n--- evaltrace's own functions, top {top} by cumulative CPU time ---", flush=True)
    stats.sort_stats("cumulative").print_stats(r"/(collector|evaluators|cli)/", top)


def main() -> None:
    """Parse the arguments and run the benchmark (or one of its child roles)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="print a cProfile of evaltrace score cold instead")
    parser.add_argument("--table", type=Path, metavar="RESULTS_JSON", help="reprint the table of a saved run")
    parser.add_argument("--_generate", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--_floor", nargs=3, help=argparse.SUPPRESS)
    if sys.argv[1:2] == ["--_profiled"]:
        _profiled(sys.argv[2], sys.argv[3:])
        return
    args = parser.parse_args()
    if args._generate:
        _generate(Path(args._generate[0]), int(args._generate[1]), int(args._generate[2]))
        return
    if args._floor:
        _floor(*(Path(a) for a in args._floor))
        return
    if args.table:
        reprint(args.table)
        return

    peer = peer_python()
    folder, meta = dataset(args.traces, args.seed)
    setup = Setup(folder, meta, peer, has_no_cache_option(), folder / "cache")
    (folder / "work").mkdir(exist_ok=True)
    if args.profile:
        profile(setup, 20)
        return
    load_before = os.getloadavg()
    print(
        f"{meta['traces']:,} traces, {meta['spans']:,} spans, {meta['tool_calls']:,} tool calls, "
        f"{len(meta['planted'])} planted failures; python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {load_before[0]:.2f}; --no-cache {'present' if setup.no_cache else 'absent'}",
        flush=True,
    )
    prime_cache(setup)
    results: dict[str, list[Run]] = {tool: [] for tool in TOOLS}
    saved = folder / f"results-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    for round_ in range(args.rounds):
        order = TOOLS[round_ % len(TOOLS) :] + TOOLS[: round_ % len(TOOLS)]
        for tool in order:
            run = run_one(tool, setup)
            results[tool].append(run)
            print(
                f"round {round_ + 1} {tool:10} {run.wall:7.2f} s wall, {run.cpu:7.2f} s CPU, "
                f"peak {run.peak_mb:5.0f} MB, tree {run.tree_mb:5.0f} MB (PSS {run.tree_pss_mb:5.0f} MB)"
                + (f", query {run.query:.3f} s" if run.query is not None else "")
                + (" (MISSED the cache: the code changed since it was filled)" if run.cache_miss else ""),
                flush=True,
            )
        # Saved after every round: a long run stopped early keeps its complete rounds (--table reads them).
        payload = {"args": vars(args), "no_cache": setup.no_cache, "load": [load_before, os.getloadavg()]}
        payload["runs"] = {tool: [asdict(r) for r in runs] for tool, runs in results.items()}
        saved.write_text(json.dumps(payload, indent=1, default=str), encoding="utf-8")
    print(f"\nall tools failed exactly the {len(meta['planted'])} planted cases in every run")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} (1 min)\n")
    print(report_table(results, setup.no_cache))
    print(f"\nraw results: {saved}")


if __name__ == "__main__":
    main()
