"""`--engine ray` without an address starts a Ray of its own; it never joins a cluster found on the machine.

Ray's `ray.init()` without an address reads the machine-wide pointer to the latest cluster started
(`ray_current_cluster` in Ray's temp folder, `/tmp/ray` unless `RAY_TMPDIR` says otherwise) and
joins it: another user's cluster would receive the traces and hand pickled results back to the
driver (issue 28, item 14). Here a real cluster on loopback is named by that pointer (in a temp
folder of the test's own, through `RAY_TMPDIR`), `evaltrace score --engine ray` runs without
`--ray-address`, and the cluster's job table must not list evaltrace's driver.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from _ray_cluster import HEAD_IP, Cluster, ray_python

REPO = Path(__file__).resolve().parents[4]
SAMPLES = REPO / "samples"


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(ray_python(), tmp_path / "cache") as running:
        yield running


def _driver_pids(cluster: Cluster) -> list[int]:
    """The process ids of every driver the cluster's job table lists."""
    script = (
        "import json, logging, ray\n"
        f"ray.init(address={cluster.address!r}, _node_ip_address={HEAD_IP!r}, logging_level=logging.ERROR)\n"
        "print(json.dumps([job['DriverPid'] for job in ray._private.state.jobs()]))\n"
    )
    done = subprocess.run(
        [str(cluster.python), "-c", script], env=cluster.env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    pids: list[int] = json.loads(done.stdout.strip().splitlines()[-1])
    return pids


def test_without_an_address_scoring_starts_its_own_ray(cluster: Cluster, tmp_path: Path) -> None:
    # Ray's socket paths must stay short: the pointer's folder (and the local Ray's sessions) under /tmp.
    state = Path(tempfile.mkdtemp(prefix="rl", dir="/tmp"))
    try:
        (state / "ray").mkdir()
        (state / "ray" / "ray_current_cluster").write_text(cluster.address, encoding="utf-8")
        env = {**cluster.env, "RAY_TMPDIR": str(state)}
        args = ["score", str(SAMPLES / "runs"), "--spec", str(SAMPLES / "evals.yaml"), "--no-store"]
        command = [
            str(cluster.python),
            "-m",
            "evaltrace.cli",
            *args,
            "--json",
            str(tmp_path / "r.json"),
            "--engine",
            "ray",
        ]
        with subprocess.Popen(
            command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as run:
            _, stderr = run.communicate(timeout=600)
        assert run.pid not in _driver_pids(cluster), "the scoring joined the cluster Ray's pointer named"
        assert run.returncode in (0, 1), stderr[-3000:]
        assert "Traceback" not in stderr, stderr[-3000:]
        report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
        assert report["counts"]["entries"] > 0
        # The Ray it started kept its session under the folder RAY_TMPDIR names, not the cluster's.
        assert any(path.name.startswith("session_") for path in (state / "ray").iterdir())
    finally:
        shutil.rmtree(state, ignore_errors=True)
