"""Scoring benchmark: read, rebuild and rule-score synthetic agent traces; time and peak memory.

Run: `.venv/bin/python benchmarks/bench_scoring.py [--sizes 1000,10000,100000] [--seed 7]`
(`--profile N` prints a cProfile of the end-to-end path at N traces instead; `--scoring-alone N`
times rule scoring of N traces rebuilt beforehand and kept in memory; adding `--scorer-timeout-ab`
alternates its rounds with and without the per-call scorer time limit.)

Datasets (see `_scoring_data.py`) are generated once per (size, seed) under `benchmarks/out/`
and reused. Every measurement runs in a fresh subprocess so that imports, caches and the
memory high-water mark of one stage never leak into another:

- `read`: `reader.iter_traces` (two-pass streaming read, dedup, grouping by trace);
- `rebuild`: `convert.read_traces` (the above plus span tree, classification, `Trace` records)
  as scoring calls it for this spec: no scorer reads the prompts, so `histories=False`;
- `score`: `scoring.score` with `ScoreOptions(workers=1)` with the spec, streaming the entries to a
  JSON file through `ReportWriter`, all in one process;
- `sharded`: `scoring.score(...)` with one worker process per CPU (`--workers N` of
  `evaltrace score`), each reading, rebuilding and scoring one shard of the traces;
- `cli` (largest size only): `evaltrace score DIR --spec SPEC --json FILE` itself (auto workers).

Stage times are the differences of the cumulative wall times (read s = read; rebuild s =
rebuild - read; score s = score - rebuild). Peak RSS is the subprocess's `ru_maxrss`; for
`sharded` also the largest worker's (`RUSAGE_CHILDREN`).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
STAGES = ("read", "rebuild", "score", "sharded")


def dataset(traces: int, seed: int) -> tuple[Path, Path, int]:
    """The cached dataset folder, spec file and span count for (traces, seed), generated if missing."""
    folder = OUT / f"scoring-{traces}-seed{seed}"
    meta = folder / "dataset.json"
    spec = folder / "spec.json"
    if not meta.exists():
        # In a child process: Linux carries a process's peak RSS over fork and exec, so a parent
        # grown by generating the data would inflate every stage's measured peak.
        cmd = [sys.executable, str(Path(__file__).resolve()), "--_generate", str(traces), str(seed)]
        subprocess.run(cmd, check=True)
    info = json.loads(meta.read_text(encoding="utf-8"))
    return folder / "runs", spec, int(info["spans"])


def generate(traces: int, seed: int) -> None:
    """Write the dataset for (traces, seed) under `OUT`."""
    folder = OUT / f"scoring-{traces}-seed{seed}"
    print(f"generating {traces:,} traces (seed {seed}) in {folder} ...", file=sys.stderr, flush=True)
    runs = folder / "runs"
    if runs.exists():
        for stale in runs.iterdir():
            stale.unlink()
    sys.path.insert(0, str(HERE))
    scoring_data = importlib.import_module("_scoring_data")  # a sibling script, not a package

    started = time.perf_counter()
    spans = scoring_data.generate(runs, traces, seed)
    scoring_data.write_spec(folder / "spec.json", seed)
    meta = {"traces": traces, "spans": spans, "seed": seed}
    (folder / "dataset.json").write_text(json.dumps(meta), encoding="utf-8")
    print(f"  {spans:,} spans in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


def measure(stage: str, runs: Path, spec: Path) -> dict[str, Any]:
    """Run one stage in this process; returns counts, wall seconds and peak RSS (MB)."""
    import gc

    gc.collect()
    started, cpu_started = time.perf_counter(), time.process_time()
    spans = traces = workers = 0
    if stage == "read":
        from evaltrace.collector import resolve_paths
        from evaltrace.collector.runfiles.reader import iter_traces

        for group in iter_traces(resolve_paths([str(runs)])):
            traces += 1
            spans += len(group)
    elif stage == "rebuild":
        from evaltrace.collector import resolve_paths
        from evaltrace.collector.traces.rebuild import read_traces

        for trace in read_traces(resolve_paths([str(runs)]), histories=False):
            traces += 1
            spans += trace.span_count
    elif stage == "sharded":
        from evaltrace.evaluators.engine.scoring import ScoreOptions, score
        from evaltrace.evaluators.engine.shards import available_cpus
        from evaltrace.evaluators.results.report.json_writer import ReportWriter
        from evaltrace.evaluators.scoring.spec.loader import load_spec

        workers = available_cpus()
        with ReportWriter(str(runs.parent / "report-sharded.json")) as writer:
            options = ScoreOptions(paths=(str(runs),), workers=workers)
            run = score([str(runs)], load_spec(spec), options, writer)
            writer.finish(run.report)
        traces = run.report.counts.traces
    else:
        from evaltrace.evaluators.engine.scoring import ScoreOptions, score
        from evaltrace.evaluators.results.report.json_writer import ReportWriter
        from evaltrace.evaluators.scoring.spec.loader import load_spec

        with ReportWriter(str(runs.parent / "report.json")) as writer:
            options = ScoreOptions(paths=(str(runs),), workers=1)
            run = score([str(runs)], load_spec(spec), options, writer)
            writer.finish(run.report)
        traces = run.report.counts.traces
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    worker_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "stage": stage,
        "seconds": seconds,
        "cpu": cpu,
        "traces": traces,
        "spans": spans,
        "peak_mb": peak_mb,
        "worker_peak_mb": worker_mb,
        "workers": workers if stage == "sharded" else 1,
    }


def _child(stage: str, runs: Path, spec: Path) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_stage", stage, str(runs), str(spec)]
    # The allocator `evaltrace score` sets for pyarrow (see cli/main.py), unless the caller chose one.
    env = {"ARROW_DEFAULT_MEMORY_POOL": "system", **os.environ}
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _cli(runs: Path, spec: Path) -> dict[str, Any]:
    """`evaltrace score` as a subprocess: wall time, exit code and the largest process's peak RSS."""
    report = runs.parent / "cli-report.json"
    cmd = [sys.executable, "-m", "evaltrace.cli", "score", str(runs), "--spec", str(spec), "--json", str(report)]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    # The CLI reaps its workers, so this maximum covers them too.
    return {"seconds": seconds, "exit": proc.returncode, "peak_mb": usage.ru_maxrss / 1024}


def run_size(traces: int, seed: int) -> dict[str, Any]:
    """All stages for one dataset size."""
    runs, spec, spans = dataset(traces, seed)
    row: dict[str, Any] = {"traces": traces, "spans": spans}
    for stage in STAGES:
        result = _child(stage, runs, spec)
        row[stage] = result
        print(
            f"  {traces:>7,} traces {stage:<8} {result['seconds']:7.2f} s  peak {result['peak_mb']:7.1f} MB", flush=True
        )
    return row


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown results table."""
    workers = rows[0]["sharded"]["workers"] if rows else 1
    head = (
        "| traces | spans | read s | rebuild s | score s | total s, 1 process | spans/s | "
        f"total s, {workers} processes | spans/s | traces/s | peak RSS MB, 1 process | "
        f"peak RSS MB, {workers} processes (parent + each worker) |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for row in rows:
        read, rebuild, score, sharded = (row[s]["seconds"] for s in STAGES)
        spans = row["spans"]
        lines.append(
            f"| {row['traces']:,} | {spans:,} | {read:.2f} | {rebuild - read:.2f} | {score - rebuild:.2f} "
            f"| {score:.2f} | {spans / score:,.0f} | {sharded:.2f} | {spans / sharded:,.0f} "
            f"| {row['traces'] / sharded:,.0f} | {row['score']['peak_mb']:.0f} "
            f"| {row['sharded']['peak_mb']:.0f} + {row['sharded']['worker_peak_mb']:.0f} |"
        )
    return head + "\n".join(lines) + "\n"


def scoring_alone(traces: int, seed: int, rounds: int, *, timeout_ab: bool = False) -> None:
    """CPU seconds of rule scoring alone: the traces are rebuilt first and kept in memory.

    What is left of the time budget once reading and rebuilding cost nothing: the same engine
    call as the `score` stage (`score` with the spec, entries streamed to a JSON report)
    over an in-memory list. The list is built before timing and frozen out of the cyclic GC's
    scans, which a streaming run never pays for either.
    """
    import gc

    from evaltrace.collector import resolve_paths
    from evaltrace.collector.traces.rebuild import read_traces
    from evaltrace.evaluators.engine.scoring import ScoreOptions, score
    from evaltrace.evaluators.results.report.json_writer import ReportWriter
    from evaltrace.evaluators.scoring.spec.loader import load_spec

    runs, spec_path, spans = dataset(traces, seed)
    built = list(read_traces(resolve_paths([str(runs)]), histories=False))
    spec = load_spec(spec_path)
    gc.collect()
    gc.freeze()
    # With --scorer-timeout-ab, odd rounds run without the time limit and even ones with the
    # default, so the drift of the VM's speed falls on both alike.
    for round_ in range(1, rounds + 1):
        limited = not timeout_ab or round_ % 2 == 0
        options = ScoreOptions(paths=(str(runs),)) if limited else ScoreOptions(paths=(str(runs),), scorer_timeout=None)
        started = time.process_time()
        with ReportWriter(str(runs.parent / "report-alone.json")) as writer:
            run = score(built, spec, options, writer)
            writer.finish(run.report)
        cpu = time.process_time() - started
        label = (" with the time limit" if limited else " without it") if timeout_ab else ""
        print(
            f"round {round_}{label}: scored {len(built):,} traces ({spans:,} spans) in {cpu:.2f} s CPU: "
            f"{cpu / len(built) * 1e6:,.0f} us per trace, {cpu / spans * 1e6:.1f} us per span",
            flush=True,
        )


def profile(traces: int, seed: int, top: int) -> None:
    """cProfile of the `score` stage at `traces` traces, sorted by own time."""
    import cProfile
    import pstats

    runs, spec, _ = dataset(traces, seed)
    profiler = cProfile.Profile()
    profiler.runcall(measure, "score", runs, spec)
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated trace counts")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-cli", action="store_true", help="skip `evaltrace score` at the largest size")
    parser.add_argument("--profile", type=int, metavar="TRACES", help="print a cProfile at this size and stop")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--scoring-alone", type=int, metavar="TRACES", help="time rule scoring of prebuilt traces at this size and stop"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --scoring-alone")
    parser.add_argument(
        "--scorer-timeout-ab", action="store_true", help="--scoring-alone: alternate rounds without/with the time limit"
    )
    parser.add_argument("--_stage", nargs=3, metavar=("STAGE", "RUNS", "SPEC"), help=argparse.SUPPRESS)
    parser.add_argument("--_generate", nargs=2, type=int, metavar=("TRACES", "SEED"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._generate:
        generate(*args._generate)
        return
    if args._stage:
        stage, runs, spec = args._stage
        print(json.dumps(measure(stage, Path(runs), Path(spec))))
        return
    if args.profile:
        profile(args.profile, args.seed, args.top)
        return
    if args.scoring_alone:
        scoring_alone(args.scoring_alone, args.seed, args.rounds, timeout_ab=args.scorer_timeout_ab)
        return
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {platform.platform()}", flush=True)
    rows = [run_size(size, args.seed) for size in sizes]
    print()
    print(table(rows))
    if not args.no_cli:
        runs, spec, spans = dataset(max(sizes), args.seed)
        cli = _cli(runs, spec)
        rate = spans / cli["seconds"]
        print(
            f"evaltrace score --spec ({max(sizes):,} traces, {spans:,} spans): {cli['seconds']:.2f} s, "
            f"{rate:,.0f} spans/s, exit {cli['exit']}, peak RSS {cli['peak_mb']:.0f} MB"
        )


if __name__ == "__main__":
    main()
