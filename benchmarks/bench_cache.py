"""Traces cache benchmark: first scoring (cold) against re-scoring an unchanged run (warm).

Run: `.venv/bin/python benchmarks/bench_cache.py [--data DIR] [--rounds 3]` where DIR holds `runs/`
and `spec.json` (default: the peer benchmark's 10,000-trace set, `benchmarks/out/peer-10000-seed7`,
made by `bench_peer.py`; else `bench_scoring.py`'s 10,000-trace set, generated if missing).
`--profile` prints a cProfile of a warm `evaltrace score` instead of measuring.

Each measurement runs in a fresh subprocess with its own cache folder under `benchmarks/out/`:

- `rebuild`: `read_traces(files, histories=False)`: spans to `Trace` records, as scoring reads them;
- `build`: `cached_traces(...)` with an empty cache: the rebuild plus writing the traces table;
- `read`: `cached_traces(...)` again: the traces read back from the table;
- `cli cold`: `evaltrace score runs --spec spec.json --json FILE --no-cache --no-store --workers 1`;
- `cli warm`: the same without `--no-cache`, the cache filled beforehand.

Reported: the median wall time of `--rounds` rounds, CPU time, and peak RSS (`ru_maxrss`).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
PEER = OUT / "peer-10000-seed7"


def _data(arg: str | None) -> Path:
    if arg is not None:
        return Path(arg)
    if (PEER / "runs").is_dir():
        return PEER
    sys.path.insert(0, str(HERE))
    from bench_scoring import dataset

    runs, _spec, _spans = dataset(10_000, 7)
    return runs.parent


def _stage(stage: str, data: Path, cache: Path) -> dict[str, Any]:
    """One in-process stage, run in this (fresh) process."""
    from evaltrace.collector import resolve_paths
    from evaltrace.collector.traces.cache import cached_traces
    from evaltrace.collector.traces.rebuild import read_traces

    files = resolve_paths([data / "runs"])
    started, cpu = time.perf_counter(), time.process_time()
    if stage == "rebuild":
        count = sum(1 for _ in read_traces(files, histories=False))
    else:
        count = sum(1 for _ in cached_traces(files, histories=False, root=cache))
    return {"traces": count, "wall": time.perf_counter() - started, "cpu": time.process_time() - cpu}


def _child(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, **env})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    result = {"wall": wall, "cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}
    result["peak_mb"] = after.ru_maxrss / 1024
    if done.stdout.startswith("{"):
        result.update(json.loads(done.stdout))
    return result


def _score_argv(data: Path, report: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "evaltrace.cli", "score", str(data / "runs"), "--spec", str(data / "spec.json"),
        "--json", str(report), "--no-store", "--workers", "1", *extra,
    ]  # fmt: skip


def measure(data: Path, rounds: int) -> dict[str, list[dict[str, Any]]]:
    cache = OUT / "bench-cache"
    report = OUT / "bench-cache-report.json"
    env = {"EVALTRACE_CACHE_DIR": str(cache)}
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in ("rebuild", "build", "read", "cli cold", "cli warm")}
    me = [sys.executable, str(Path(__file__).resolve()), "--data", str(data)]
    for _ in range(rounds):
        # Interleaved, so the shared machine's load falls on every stage alike.
        shutil.rmtree(cache, ignore_errors=True)
        for stage in ("rebuild", "build", "read"):
            results[stage].append(_child([*me, "--_stage", stage], env))
        results["cli warm"].append(_child(_score_argv(data, report), env))
        results["cli cold"].append(_child(_score_argv(data, report, "--no-cache"), env))
    shutil.rmtree(cache, ignore_errors=True)
    return results


def _print(data: Path, results: dict[str, list[dict[str, Any]]]) -> None:
    meta = json.loads((data / "dataset.json").read_text()) if (data / "dataset.json").exists() else {}
    print(f"data {data.name}: {meta.get('traces', '?')} traces, {meta.get('spans', '?')} spans")
    print(f"{platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"{'stage':<10} {'wall s (median)':>16} {'all rounds':>28} {'cpu s':>7} {'peak MB':>8}")
    for stage, rows in results.items():
        walls = [r["wall"] for r in rows]
        rounds = " ".join(f"{w:.2f}" for w in walls)
        peak = max(r["peak_mb"] for r in rows)
        cpu = statistics.median(r["cpu"] for r in rows)
        print(f"{stage:<10} {statistics.median(walls):>16.2f} {rounds:>28} {cpu:>7.2f} {peak:>8.0f}")


def profile(data: Path) -> None:
    cache = OUT / "bench-cache"
    env = {"EVALTRACE_CACHE_DIR": str(cache)}
    report = OUT / "bench-cache-report.json"
    shutil.rmtree(cache, ignore_errors=True)
    _child(_score_argv(data, report), env)  # fill the cache
    os.environ.update(env)
    sys.argv = _score_argv(data, report)[2:]
    from evaltrace.cli.main import run

    profiler = cProfile.Profile(time.process_time)
    try:
        profiler.runcall(run)
    except SystemExit:
        pass
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--_stage", help=argparse.SUPPRESS)
    args = parser.parse_args()
    data = _data(args.data)
    if args._stage:
        print(json.dumps(_stage(args._stage, data, Path(os.environ["EVALTRACE_CACHE_DIR"]))))
    elif args.profile:
        profile(data)
    else:
        _print(data, measure(data, args.rounds))


if __name__ == "__main__":
    main()
