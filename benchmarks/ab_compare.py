"""Compare the speed of this checkout with an earlier commit, both measured in the same run.

Run: `.venv/bin/python benchmarks/ab_compare.py --base REV [--stage score] [--traces 10000] [--rounds 6]`

This VM's speed drifts by 10-20% within minutes (more between days), more than most changes
are worth, so timings taken one after the other cannot tell two versions apart. Here both run at
the same time, each in its own process pinned to its own core, and the cores are swapped every
round; the result is the median of the per-round ratios of CPU time (this checkout / base), with
their spread. The base is a `git worktree` of REV in a temporary folder, imported through
PYTHONPATH ahead of the installed package (each process reports which code it ran).

Stages (on the scoring benchmark's cached dataset, see `bench_scoring.py`):
`read` = `reader.iter_traces`; `rebuild` = `convert.read_traces(histories=False)`;
`score` = read, rebuild and score with the spec in one process (`scoring.score`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
STAGES = ("read", "rebuild", "score")


def _child(stage: str, core: int, runs: Path, spec: Path) -> None:
    os.sched_setaffinity(0, {core})  # before any work, so the whole measurement stays on this core
    sys.path.insert(0, str(HERE))
    import bench_scoring  # a sibling script

    import evaltrace.collector

    result = bench_scoring.measure(stage, runs, spec)
    print(json.dumps({"code": evaltrace.collector.__file__, "cpu": result["cpu"], "traces": result["traces"]}))


def _start(code: Path, stage: str, core: int, runs: Path, spec: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(code / ".mypy-src"), "ARROW_DEFAULT_MEMORY_POOL": "system"}
    cmd = [sys.executable, __file__, "--_child", stage, str(core), str(runs), str(spec)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=tempfile.gettempdir())


def _result(proc: subprocess.Popen[str], code: Path) -> dict[str, Any]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"the run of {code} failed (exit {proc.returncode})")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    if not result["code"].startswith(str(code)):
        raise SystemExit(f"expected the code under {code}, but {result['code']} ran")
    return result


def compare(base: Path, stage: str, runs: Path, spec: Path, rounds: int) -> list[float]:
    """Per-round ratios of CPU time, this checkout over `base`."""
    ratios = []
    for index in range(rounds):
        head_core = index % 2
        head = _start(ROOT, stage, head_core, runs, spec)
        older = _start(base, stage, 1 - head_core, runs, spec)
        new, old = _result(head, ROOT), _result(older, base)
        if new["traces"] != old["traces"]:
            raise SystemExit(f"the two versions read different trace counts: {new['traces']} and {old['traces']}")
        ratios.append(new["cpu"] / old["cpu"])
        print(f"round {index + 1}: this checkout {new['cpu']:.2f} s, base {old['cpu']:.2f} s CPU", flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the commit to compare with (any git revision)")
    parser.add_argument("--stage", choices=STAGES, default="score")
    parser.add_argument("--traces", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--_child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        stage, core, runs, spec = args._child
        _child(stage, int(core), Path(runs), Path(spec))
        return
    if not args.base:
        parser.error("--base REV is required")
    if len(os.sched_getaffinity(0)) < 2:
        parser.error("needs two CPUs: the versions run at the same time on different cores")
    sys.path.insert(0, str(HERE))
    from bench_scoring import dataset  # a sibling script

    runs, spec, spans = dataset(args.traces, 7)
    with tempfile.TemporaryDirectory(prefix="evaltrace-ab-") as scratch:
        base = Path(scratch) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.base], check=True)
        try:
            print(f"{args.stage} stage, {args.traces:,} traces ({spans:,} spans): this checkout against {args.base}")
            ratios = compare(base, args.stage, runs, spec, args.rounds)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=True)
    spread = f"min {min(ratios):.3f}, max {max(ratios):.3f}"
    print(f"this checkout / base, CPU time: median {statistics.median(ratios):.3f} ({spread}, {len(ratios)} rounds)")


if __name__ == "__main__":
    main()
