"""`evaltrace collect` as a real subprocess for the receiver tests, and the run files it writes as rows.

`running_collector(folder, ...)` starts `python -m evaltrace.cli collect` on free loopback ports
(port 0), waits for the addresses it prints, and stops it with SIGTERM on leaving (unless a test
stopped it already); `stop()` returns its exit code and output. `rows(folder)` reads every span
(or log-record) file of a folder as sorted rows.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

NO_PROXY = [("grpc.enable_http_proxy", 0)]
"""gRPC channel options for the tests: never through a proxy set in the environment."""

_HTTP = re.compile(r"OTLP/HTTP  http://(\S+)")
_GRPC = re.compile(r"OTLP/gRPC  (\S+)")


@dataclass
class Collector:
    """A running `evaltrace collect`."""

    process: subprocess.Popen[str]
    http: str | None = None
    """host:port of OTLP/HTTP."""
    grpc: str | None = None
    """host:port of OTLP/gRPC."""
    out: list[str] = field(default_factory=list)
    err: str = ""
    returncode: int | None = None

    @property
    def http_url(self) -> str:
        """The OTLP/HTTP base URL."""
        return f"http://{self.http}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        """Signal the receiver and wait for it to exit; its exit code."""
        if self.returncode is None:
            self.process.send_signal(sig)
            rest, self.err = self.process.communicate(timeout=timeout)
            self.out.append(rest)
            self.returncode = self.process.returncode
        return self.returncode

    @property
    def stdout(self) -> str:
        """Everything it printed to stdout (complete once stopped)."""
        return "".join(self.out)


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without OTLP settings or proxies (loopback traffic only), plus `extra`."""
    proxies = ("http_proxy", "https_proxy", "all_proxy", "grpc_proxy")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k.lower() not in proxies}
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return {**env, **(extra or {})}


def _read_announcement(collector: Collector, deadline: float) -> None:
    stream = collector.process.stdout
    assert stream is not None
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            raise AssertionError(f"collect exited early: {collector.process.wait()} {collector.process.stderr.read()}")  # type: ignore[union-attr]
        collector.out.append(line)
        if (found := _HTTP.search(line)) is not None:
            collector.http = found.group(1)
        if (found := _GRPC.search(line)) is not None:
            collector.grpc = found.group(1)
        if line.startswith("Stop with"):
            return
    raise AssertionError("collect did not announce its addresses in time")


def start_collector(folder: Path, *args: str, env: dict[str, str] | None = None) -> Collector:
    """Start `evaltrace collect --dir folder` on free loopback ports (more options in `args`)."""
    command = [sys.executable, "-m", "evaltrace.cli", "collect", "--dir", str(folder)]
    command += ["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", *args]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(env),
    )
    collector = Collector(process)
    timer = threading.Timer(60, process.kill)  # a hung start must not hang the test run
    timer.start()
    try:
        _read_announcement(collector, time.monotonic() + 60)
    except BaseException:
        process.kill()
        raise
    finally:
        timer.cancel()
    return collector


@contextmanager
def running_collector(folder: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Collector]:
    """A receiver for the duration of a `with` block, stopped with SIGTERM at its end."""
    collector = start_collector(folder, *args, env=env)
    try:
        yield collector
    finally:
        if collector.returncode is None:
            try:
                collector.stop()
            except subprocess.TimeoutExpired:
                collector.process.kill()
                raise


def rows(folder: Path, logs: bool = False, drop: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every row of the folder's span files (or log-record files), without the `drop` columns, sorted."""
    files = sorted(p for p in folder.glob("*.parquet") if p.name.endswith(".logs.parquet") == logs)
    found: list[dict[str, Any]] = []
    for path in files:
        found.extend(pq.read_table(path).drop_columns(list(drop)).to_pylist())
    return sorted(found, key=repr)
