"""`--engine ray` on a cluster whose worker node does not share the driver's folders.

The worker node runs in a mount namespace of its own with an empty tmpfs over the folder holding
the driver's `TMPDIR` (and, in one run, its score store), as a second machine would: the span
files, the spec and the cache stay shared. The head node has no CPU, so every task runs there.
A task finds out that it does not see the driver's entries folder (the token the driver wrote
there is missing) and returns its entries' file through Ray; the reports and exit codes are the
local engine's. A store the node does not see stops the run with one line naming it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _ray_cluster import Cluster, ray_python
from test_ray_engine import SAMPLES, _bench_data, _comparable, _score_args, _stored


def _unshare_works() -> bool:
    try:
        probe = ["unshare", "--mount", "--propagation", "private", "true"]
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not _unshare_works(), reason="needs `unshare --mount` (root)")


@pytest.fixture(scope="module")
def hidden() -> Iterator[Path]:
    """A folder the worker node cannot see (short, under /tmp: not where pytest keeps the runs)."""
    folder = Path(tempfile.mkdtemp(prefix="r1-unshared-", dir="/tmp"))
    (folder / "tmp").mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(hidden: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(ray_python(), tmp_path_factory.mktemp("ray-cache"), head_cpus=0) as running:
        running.add_node("127.0.0.6", hidden=hidden)
        yield running


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _bench_data(tmp_path_factory.mktemp("bench"), 300)


def _both(cluster: Cluster, hidden: Path, args: list[str], local_args: list[str]) -> tuple[Any, Any]:
    """The local engine's run and the Ray engine's with the driver's TMPDIR in `hidden`; reports compared."""
    env = {"TMPDIR": str(hidden / "tmp")}
    local = cluster.evaltrace(*local_args)
    ray = cluster.evaltrace(*args, *cluster.engine_args(), env=env)
    assert ray.returncode == local.returncode, ray.stderr[-3000:]
    assert "Error" not in ray.stderr and "Traceback" not in ray.stderr, ray.stderr[-3000:]
    return local, ray


def _reports(*paths: Path) -> list[dict[str, Any]]:
    return [_comparable(json.loads(path.read_text(encoding="utf-8"))) for path in paths]


def test_the_node_truly_does_not_see_the_driver_s_folder(cluster: Cluster, hidden: Path) -> None:
    (hidden / "tmp" / "here").write_text("the driver's", encoding="utf-8")
    script = f"import os; print('SEEN=' + str(os.path.exists({str(hidden / 'tmp' / 'here')!r})))"
    node = cluster.nodes[-1]
    # A process in the node's mount namespace (its raylet's) looks at the folder.
    done = subprocess.run(
        ["nsenter", f"--mount=/proc/{node.process.pid}/ns/mnt", str(cluster.python), "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "SEEN=False" in done.stdout, (done.stdout, done.stderr)


@pytest.mark.parametrize("with_spec", [True, False], ids=["spec", "no-spec"])
def test_entries_come_back_through_ray_where_the_folder_is_not_shared(
    cluster: Cluster, hidden: Path, bench_run: tuple[Path, Path], tmp_path: Path, with_spec: bool
) -> None:
    runs, spec = bench_run[0], bench_run[1] if with_spec else None
    out = [tmp_path / "local.json", tmp_path / "ray.json"]
    _both(cluster, hidden, _score_args(runs, spec, out[1], "--no-cache"), _score_args(runs, spec, out[0], "--no-cache"))
    local, ray = _reports(*out)
    assert ray == local and local["counts"]["traces"] == 300
    assert not list((hidden / "tmp").glob("evaltrace-ray-entries-*"))  # the driver's folder, removed


def test_a_shared_store_beside_an_unshared_tmpdir_is_written_by_the_tasks(
    cluster: Cluster, hidden: Path, tmp_path: Path
) -> None:
    spec, out = SAMPLES / "evals.yaml", [tmp_path / "local.json", tmp_path / "ray.json"]
    stores = [tmp_path / "local-store", tmp_path / "ray-store"]
    args = [_score_args(SAMPLES / "runs", spec, path, store=store) for path, store in zip(out, stores, strict=True)]
    _both(cluster, hidden, args[1], args[0])
    local, ray = _reports(*out)
    assert ray == local and _stored(stores[1]) == _stored(stores[0])
    (parts,) = (stores[1] / "scores").iterdir()
    assert parts.is_dir() and list(parts.glob("part-*.parquet"))  # the tasks wrote the store's parts


def test_a_store_a_node_does_not_see_is_one_error_line(cluster: Cluster, hidden: Path, tmp_path: Path) -> None:
    store = hidden / "store"
    args = _score_args(SAMPLES / "runs", SAMPLES / "evals.yaml", tmp_path / "ray.json", store=store)
    done = cluster.evaltrace(*args, *cluster.engine_args(), env={"TMPDIR": str(hidden / "tmp")})
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {store}: Ray node 127.0.0.6 does not see"), lines
    assert not (tmp_path / "ray.json").exists()
