"""A real Ray cluster on this machine's loopback for the tests: a head and worker nodes, each a process group.

Each node is `ray start --block` in a session of its own, so stopping or killing a node is one
signal to its process group (raylet, object store, workers), never `ray stop`, which would stop
every Ray on the machine. Ray replaces 127.0.0.1 by the machine's network address, so the head
listens on 127.0.0.2 and worker nodes on 127.0.0.3 and up: the cluster never leaves 127.0.0.0/8.
Usage stats are off, the dashboard is not started, memory and the object store are bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from _venvs import cached_venv

REPO = Path(__file__).resolve().parents[4]
RAY_REQUIREMENT = "ray[data]==2.60.0"  # Ray Data (numpy, pandas) reads and shuffles the spans
HEAD_IP = "127.0.0.2"
NODE_MEMORY = str(1_500_000_000)
OBJECT_STORE = str(150_000_000)
START_TIMEOUT = 120.0
# The Ray Data path's tasks: reading the files, the shuffle's map and reduce, scoring a group, or
# (warm) a shard from its cached traces table.
RUN_TASKS = (
    "MapBatches(read_file)",
    "map",
    "reduce",
    "_sample_block",
    "MapBatches(score_group)",
    "MapBatches(shard_samples)",
    "MapBatches(group_samples)",  # with a spec: a group's samples handed on by case (entries stage)
    "MapBatches(score_conversations)",
    "MapBatches(write_entries)",
)


def ray_python() -> Path:
    """The interpreter of the cached venv with Ray Data and this repository (built once)."""
    python: Path = cached_venv(REPO / ".framework-venvs" / "ray-data", [RAY_REQUIREMENT], with_evaltrace=True)
    return python


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


class Node:
    """One node: `ray start --block` and every process it starts, in one process group."""

    def __init__(self, process: subprocess.Popen[bytes], ip: str, log: BinaryIO) -> None:
        self.process = process
        self.ip = ip
        self.log = log

    def _processes(self) -> list[tuple[int, str]]:
        """(pid, title) of the node's processes: its process group, and the workers its raylet started
        (Ray workers move to process groups of their own, so they are found by their parent)."""
        table: dict[int, tuple[int, int, str]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            except OSError:
                continue
            table[int(entry.name)] = (int(fields[1]), int(fields[2]), title)  # parent, group, title
        group = {pid for pid, (_, pgid, _) in table.items() if pgid == self.process.pid}
        return [(pid, title) for pid, (parent, pgid, title) in table.items() if pid in group or parent in group]

    def running_task(self, name: str) -> bool:
        """Whether a worker process of this node is running a task of function `name` now."""
        return any(title.startswith(f"ray::{name}") for _, title in self._processes())

    def processes_titled(self, prefix: str) -> list[int]:
        """The pids of this node's processes whose title starts with `prefix` (an actor: `ray::JudgeWorker`)."""
        return [pid for pid, title in self._processes() if title.startswith(prefix)]

    def running_a_scoring_task(self) -> bool:
        """Whether a worker process of this node runs any task of a scoring's Ray Data path now."""
        return any(self.running_task(name) for name in RUN_TASKS)

    def kill(self) -> None:
        """SIGKILL the whole node at once, its workers included, as a machine failure would."""
        for pid, _ in self._processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait(timeout=30)
        self.log.close()

    def stop(self) -> None:
        """SIGTERM the node's group, then SIGKILL whatever is left after 5 s."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
        self.kill()  # what SIGTERM left, and workers that outlived their raylet


class Cluster:
    """A head node on `HEAD_IP`, plus the nodes `add_node` starts; all stopped on exit."""

    def __init__(self, python: Path, cache_dir: Path, *, head_cpus: int = 1) -> None:
        self.python = python
        self.head_cpus = head_cpus
        self.ray = python.parent / "ray"
        self.port = _free_port(HEAD_IP)
        self.client_port = _free_port(HEAD_IP)  # Ray Client's server (`ray://HEAD_IP:client_port`)
        # Ray's socket paths must stay short (108 bytes): pytest's tmp paths are too long.
        self.temp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
        dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "RAY_ADDRESS")
        self.env = {key: value for key, value in os.environ.items() if key not in dropped}
        self.env.update(RAY_USAGE_STATS_ENABLED="0", EVALTRACE_CACHE_DIR=str(cache_dir), NO_PROXY="*")
        # A Ray started without an address writes ~/.ray/auth_token, and `ray start` then turns token
        # auth on, which drivers given an address do not: the test clusters keep it off either way.
        self.env["RAY_AUTH_MODE"] = "disabled"
        # Ray Client's server starts a server process per `ray://` client and gives up on it after 30 s
        # ("Initialization failure from server"): at load 30-46 its start (importing Ray) took longer.
        self.env["RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S"] = "300"
        self.nodes: list[Node] = []

    @property
    def address(self) -> str:
        return f"{HEAD_IP}:{self.port}"

    def engine_args(self) -> list[str]:
        return ["--engine", "ray", "--ray-address", self.address]

    def __enter__(self) -> Cluster:
        head = [
            "--head",
            f"--port={self.port}",
            f"--ray-client-server-port={self.client_port}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={self.temp}",
        ]
        try:
            self._start(HEAD_IP, head, cpus=self.head_cpus)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def add_node(self, ip: str, *, hidden: Path | None = None) -> Node:
        """Start a worker node on loopback address `ip` and wait until the head lists it.

        `hidden`: the node runs in a mount namespace of its own with an empty tmpfs over that folder,
        as a machine that does not share it with the driver's (`unshare`, as root).
        """
        return self._start(ip, [f"--address={self.address}"], hidden=hidden)

    def _start(self, ip: str, role: list[str], cpus: int = 1, hidden: Path | None = None) -> Node:
        limits = [f"--num-cpus={cpus}", f"--memory={NODE_MEMORY}", f"--object-store-memory={OBJECT_STORE}"]
        log = (self.temp / f"node-{ip}.log").open("wb")
        cmd = [str(self.ray), "start", "--block", f"--node-ip-address={ip}", *limits, *role]
        if hidden is not None:
            mount = 'mount -t tmpfs -o size=64m evaltrace-unshared "$0" && exec "$@"'
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, str(hidden), *cmd]
        process = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        node = Node(process, ip, log)
        self.nodes.append(node)
        self._wait_for(ip)
        return node

    def alive_nodes(self) -> list[str]:
        """The addresses of the nodes the head counts as alive."""
        script = (
            "import json, logging, ray\n"
            f"ray.init(address={self.address!r}, _node_ip_address={HEAD_IP!r}, logging_level=logging.ERROR)\n"
            "print('ALIVE=' + json.dumps([n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']]))\n"
        )
        done = subprocess.run(
            [str(self.python), "-c", script], env=self.env, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            return []
        # Ray prints its own warnings (lagging heartbeats on a busy machine) to stdout, after ours.
        marked = [line for line in done.stdout.splitlines() if line.startswith("ALIVE=")]
        if not marked:
            return []
        found: list[str] = json.loads(marked[-1].removeprefix("ALIVE="))
        return found

    def _wait_for(self, ip: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.nodes[-1].process.poll() is not None:
                break
            if ip in self.alive_nodes():
                return
            time.sleep(1.0)
        tail = (self.temp / f"node-{ip}.log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the Ray node on {ip} did not join within {START_TIMEOUT:.0f} s:\n{tail}")

    def evaltrace(
        self, *args: str, timeout: float = 600, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`python -m evaltrace.cli ARGS` from the cluster's venv, as a real subprocess (`env`: added variables)."""
        cmd = [str(self.python), "-m", "evaltrace.cli", *args]
        given = {**self.env, **(env or {})}
        return subprocess.run(cmd, env=given, capture_output=True, text=True, timeout=timeout, cwd=self.temp)

    def log_tails(self, pattern: str, chars: int = 2000) -> str:
        """The end of each of the cluster's Ray log files named like `pattern` (`ray_client_server_*.err`)."""
        found = sorted((self.temp / "session_latest" / "logs").glob(pattern))
        return "\n".join(f"--- {path.name}:\n{path.read_text(errors='replace')[-chars:]}" for path in found)

    def start_evaltrace(self, *args: str) -> subprocess.Popen[str]:
        """`evaltrace` started without waiting, for the tests that act while it runs."""
        cmd = [str(self.python), "-m", "evaltrace.cli", *args]
        pipe = subprocess.PIPE
        return subprocess.Popen(cmd, env=self.env, stdout=pipe, stderr=pipe, text=True, cwd=self.temp)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for node in reversed(self.nodes):
            node.stop()
        shutil.rmtree(self.temp, ignore_errors=True)
