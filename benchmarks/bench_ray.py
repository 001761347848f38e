"""Ray benchmark: `evaltrace score` on the local engine vs the Ray engine with one and two worker nodes.

Run: `.venv/bin/python benchmarks/bench_ray.py [--traces 10000] [--seed 7] [--rounds 1]`

The dataset is the scoring benchmark's (`_scoring_data.py`, cached under `benchmarks/out/`). The
cluster is the tests' (`tests/evaluators/engine/ray/_ray_cluster.py`): a real Ray in a cached venv, a head node on
127.0.0.2 given no CPUs (so it schedules no shard) and worker nodes of one CPU each on 127.0.0.3
and up, every node a process group of its own. Each measurement is the wall time of one
`evaltrace score DIR --spec SPEC --no-cache --no-store --json FILE` subprocess (cold: traces rebuilt),
Ray's connection included, from the cluster's venv; every report is checked equal to the local
engine's (timestamps and unmatched order aside). Configurations:

- `local-1`: the local engine in one process (`--workers 1`);
- `local-2`: the local engine with two forked workers (`--workers 2`);
- `ray-1node`, `ray-2nodes`: `--engine ray` with one, then two worker nodes (two shards per CPU).

With each Ray configuration the stages of the Ray Data path are timed alone, in a driver of their
own joined to the same cluster (the connection not counted): `read` (every file read into keyed
Arrow rows, `ray_data.read_file`) and `read+shuffle` (the same rows grouped by shard key with
Ray's shuffle, each group only counted, `ray_data.shuffled`). Their difference is the shuffle's cost.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests"), str(REPO / "tests" / "evaluators" / "engine" / "ray")]

from _ray_cluster import HEAD_IP, Cluster, ray_python  # noqa: E402 - after the path set-up above
from bench_scoring import dataset  # noqa: E402

WORKER_IPS = ("127.0.0.3", "127.0.0.4")


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in report.items() if key not in {"created_at", "unmatched"}}
    kept["unmatched"] = sorted(item["trace_id"] for item in report["unmatched"])
    return kept


def measure(traces: int, seed: int, rounds: int) -> list[dict[str, Any]]:
    """Best-of-`rounds` wall time of each configuration on the (traces, seed) dataset, and its driver's CPU."""
    runs, spec, spans = dataset(traces, seed)
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix="ray-bench-", dir=runs.parent) as scratch,
        Cluster(ray_python(), Path(scratch) / "cache", head_cpus=0) as cluster,
    ):
        configs: list[tuple[str, list[str], int]] = [
            ("local-1", ["--workers", "1"], 0),
            ("local-2", ["--workers", "2"], 0),
            ("ray-1node", cluster.engine_args(), 1),
            ("ray-2nodes", cluster.engine_args(), 2),
        ]
        reference: dict[str, Any] | None = None
        for name, extra, nodes in configs:
            while len(cluster.nodes) - 1 < nodes:
                cluster.add_node(WORKER_IPS[len(cluster.nodes) - 1])
            timed = [timed_run(cluster, runs, spec, Path(scratch), extra) for _ in range(rounds)]
            best = min(timed, key=lambda found: float(found["wall_s"]))
            report = best.pop("report")
            reference = reference or _comparable(report)
            if _comparable(report) != reference:
                raise SystemExit(f"{name}: the report differs from local-1's")
            seconds = best["wall_s"]
            row = {"config": name, "traces": traces, "spans": spans, "seconds": seconds, "spans_per_s": spans / seconds}
            row.update({key: value for key, value in best.items() if key != "wall_s"})
            if nodes:
                row.update(_stages(cluster, runs, nodes))
            rows.append(row)
            stages = f"  read {row['read_s']:.2f} s, read+shuffle {row['shuffle_s']:.2f} s" if nodes else ""
            driver = f"  driver CPU {row['driver_cpu_s']:.2f} s"
            print(f"  {name:<11} {seconds:7.2f} s  {spans / seconds:9,.0f} spans/s{driver}{stages}", flush=True)
    return rows


STAGES = """\
import json, logging, sys, time
from pathlib import Path
import pyarrow as pa
import ray, ray.data
from evaltrace.collector import resolve_paths
from evaltrace.evaluators.engine import ray_data
ray.init(address=sys.argv[1], _node_ip_address=sys.argv[2], logging_level=logging.ERROR, log_to_driver=False)
ray_data.quiet_ray_data(ray.data.DataContext.get_current())
locations = [str(p.resolve()) for p in resolve_paths([sys.argv[3]], uris=True).locations]
count = 2 * int(sys.argv[4])
items = [{"file": i, "location": loc} for i, loc in enumerate(locations)]
files = lambda: ray.data.from_items(items, override_num_blocks=len(items))
started = time.perf_counter()
read = files().map_batches(ray_data.read_file, batch_size=1, batch_format="pyarrow", fn_kwargs={"count": count}).count()
read_s = time.perf_counter() - started
started = time.perf_counter()
count_rows = lambda t: pa.table({"n": [t.num_rows]})
groups = ray_data.shuffled(files(), count, 3).map_groups(count_rows, batch_format="pyarrow")
grouped = sum(batch["n"].to_pylist()[0] for batch in groups.iter_batches(batch_size=1, batch_format="pyarrow"))
shuffle_s = time.perf_counter() - started
assert read == grouped, (read, grouped)
print(json.dumps({"read_s": read_s, "shuffle_s": shuffle_s, "rows": read}))
"""


def _stages(cluster: Cluster, runs: Path, nodes: int) -> dict[str, Any]:
    """Wall seconds of the Ray Data path's read stage alone and of read+shuffle, on `nodes` one-CPU nodes."""
    cmd = [str(cluster.python), "-c", STAGES, cluster.address, HEAD_IP, str(runs), str(nodes)]
    done = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True, timeout=3600, cwd=cluster.temp)
    if done.returncode != 0:
        raise SystemExit(f"timing the stages failed:\n{done.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


DRIVER = """\
import json, logging, resource, sys, time
from evaltrace.cli import main as cli
from evaltrace.evaluators.engine import ray_engine, ray_entries
address, ip, runs, spec, out, store = sys.argv[1:7]
if "--engine" in sys.argv:
    import ray
    ray.init(address=address, _node_ip_address=ip, logging_level=logging.ERROR, log_to_driver=False)
marks = {"receive": 0.0}
scored = ray_engine.score_on_ray
def timed(*args, **kwargs):
    marks["tasks_start"], marks["tasks_wall"] = time.thread_time(), time.perf_counter()
    done = scored(*args, **kwargs)
    marks["tasks_end"], marks["tasks_wall_end"] = time.thread_time(), time.perf_counter()
    return done
ray_engine.score_on_ray = timed
received = ray_entries.EntryStage.add
def receive(self, *args):
    started = time.thread_time()
    received(self, *args)
    marks["receive"] += time.thread_time() - started
ray_entries.EntryStage.add = receive
args = ["score", runs, "--spec", spec, "--no-cache", "--store", store, "--json", out, *sys.argv[7:]]
def process_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
cpu, wall, every = time.thread_time(), time.perf_counter(), process_cpu()
code = cli.main(args)
cpu, wall, every = time.thread_time() - cpu, time.perf_counter() - wall, process_cpu() - every
during = marks.get("tasks_end", 0.0) - marks.get("tasks_start", 0.0)
print(json.dumps({"code": code, "driver_cpu_s": cpu, "process_cpu_s": every, "wall_s": wall,
                  "cpu_while_tasks_s": during, "receive_cpu_s": marks["receive"], "cpu_outside_tasks_s": cpu - during}))
"""


def timed_run(cluster: Cluster, runs: Path, spec: Path, scratch: Path, extra: list[str]) -> dict[str, Any]:
    """One `evaltrace score` (JSON report and score store written) in a timed driver; its figures and report.

    The command runs in a process of its own after its imports (and, for Ray, after joining the
    cluster), so `wall_s` is scoring alone. `driver_cpu_s` is the main thread's CPU
    (`time.thread_time`): what the driver itself computes, none of Ray's threads or the workers';
    `receive_cpu_s` the part spent taking the entries stage's results as they came, and
    `cpu_outside_tasks_s` the part before and after the tasks (merging, the gate, the reports).
    """
    out, store = scratch / "report.json", scratch / "store"
    shutil.rmtree(store, ignore_errors=True)
    given = [str(runs), str(spec), str(out), str(store), *extra]
    cmd = [str(cluster.python), "-c", DRIVER, cluster.address, HEAD_IP, *given]
    done = subprocess.run(cmd, env=cluster.env, capture_output=True, text=True, timeout=3600, cwd=cluster.temp)
    marked = done.stdout.strip().splitlines()
    if done.returncode != 0 or not out.exists() or not marked:
        raise SystemExit(f"evaltrace {' '.join(extra)} failed:\n{done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(marked[-1])
    if found["code"] not in (0, 1):
        raise SystemExit(f"evaltrace {' '.join(extra)} exited {found['code']}:\n{done.stderr[-3000:]}")
    # The entries stage ran: the tasks wrote the scores table as parts (a folder per run).
    found["entries_stage"] = all(path.is_dir() for path in (store / "scores").iterdir())
    found["report"] = json.loads(out.read_text(encoding="utf-8"))
    shutil.rmtree(store, ignore_errors=True)
    return found


def driver_time(traces: int, seed: int, nodes: int) -> dict[str, Any]:
    """The driver's serial work on one cold Ray scoring on `nodes` one-CPU worker nodes (see `timed_run`)."""
    runs, spec, spans = dataset(traces, seed)
    with (
        tempfile.TemporaryDirectory(prefix="ray-driver-", dir=runs.parent) as scratch,
        Cluster(ray_python(), Path(scratch) / "cache", head_cpus=0) as cluster,
    ):
        for index in range(nodes):
            cluster.add_node(WORKER_IPS[index])
        found = timed_run(cluster, runs, spec, Path(scratch), cluster.engine_args())
    del found["report"]
    per_million = 1_000_000 / spans
    found.update(traces=traces, spans=spans, nodes=nodes, driver_cpu_per_1m_s=found["driver_cpu_s"] * per_million)
    return found


def table(rows: list[dict[str, Any]]) -> str:
    base = rows[0]["seconds"]
    lines = [
        "| configuration | traces | spans | wall s | spans/s | vs local-1 | driver CPU s | read s | read+shuffle s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        stages = f"{row['read_s']:.2f} | {row['shuffle_s']:.2f}" if "read_s" in row else "- | -"
        lines.append(
            f"| {row['config']} | {row['traces']:,} | {row['spans']:,} | {row['seconds']:.2f} | "
            f"{row['spans_per_s']:,.0f} | {base / row['seconds']:.2f}x | {row['driver_cpu_s']:.2f} | {stages} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--driver", type=int, metavar="NODES", help="only time the driver's serial work, on NODES nodes"
    )
    args = parser.parse_args(argv)
    if args.driver:
        found = driver_time(args.traces, args.seed, args.driver)
        print(json.dumps(found, indent=2))
        name = f"ray-driver-{args.traces}-seed{args.seed}-{args.driver}node.json"
        (HERE / "out" / name).write_text(json.dumps(found, indent=2), encoding="utf-8")
        return
    print(f"{platform.python_version()} on {platform.machine()}, head {HEAD_IP}, workers {', '.join(WORKER_IPS)}")
    rows = measure(args.traces, args.seed, args.rounds)
    print(table(rows))
    (HERE / "out" / f"ray-{args.traces}-seed{args.seed}.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
