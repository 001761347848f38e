"""Memory of reading span files into traces: peak RSS and CPU of the rebuild per decoded batch size.

Run: `.venv/bin/python benchmarks/bench_read_memory.py [--data DIR] [--batch-rows 16384,4096,2048,1024]`
where DIR holds `runs/` (default: the peer benchmark's 10,000-trace set, `benchmarks/out/peer-10000-seed7`,
made by `bench_peer.py`).

Each measurement is a fresh subprocess that imports evaltrace, sets the reader's batch size
(`collector.store.runfiles.BATCH_ROWS`), and iterates `read_traces(files, histories=False)` (spans
to `Trace` records, as scoring reads them) without keeping the traces. Reported: the process's peak
RSS before and after reading (`ru_maxrss`: imports alone, then the whole), and the CPU time of the read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEER = HERE / "out" / "peer-10000-seed7"

_CHILD = """
import json, resource, sys, time
from evaltrace.collector.runfiles import runfiles
from evaltrace.collector import resolve_paths
from evaltrace.collector.traces.rebuild import read_traces
runfiles.BATCH_ROWS = int(sys.argv[1])
files = resolve_paths([sys.argv[2]])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.process_time()
count = sum(1 for _ in read_traces(files, histories=False))
print(json.dumps({"traces": count, "cpu": time.process_time() - start, "imports_kb": before,
                  "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def measure(runs: Path, batch_rows: int) -> dict[str, float]:
    """One fresh process reading `runs` with `batch_rows` rows per decoded batch."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(batch_rows), str(runs)], check=True, capture_output=True, text=True
    )
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=PEER, help="a folder holding runs/")
    parser.add_argument("--batch-rows", default="16384,4096,2048,1024", help="comma-separated batch sizes")
    args = parser.parse_args()
    runs = args.data / "runs"
    if not runs.is_dir():
        sys.exit(f"{runs}: no such folder (make it with benchmarks/bench_peer.py --traces 10000)")
    print(f"{'batch rows':>10} {'traces':>7} {'CPU s':>7} {'imports MB':>11} {'peak MB':>8}")
    for rows in (int(part) for part in args.batch_rows.split(",")):
        found = measure(runs, rows)
        print(
            f"{rows:>10} {found['traces']:>7.0f} {found['cpu']:>7.2f} "
            f"{found['imports_kb'] / 1024:>11.0f} {found['peak_kb'] / 1024:>8.0f}"
        )


if __name__ == "__main__":
    main()
