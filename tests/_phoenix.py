"""A real Arize Phoenix server for the forwarding tests, on 127.0.0.1, from a virtualenv of its own.

Why a separate virtualenv instead of the `test` extra: installing `arize-phoenix` next to
evaltrace changes the environment the rest of the suite runs in.

- `arize-phoenix-client` registers a `pytest11` plugin, which pytest then loads in every run.
- `openinference-instrumentation-openai` registers the `opentelemetry_instrumentor` entry point
  `openai`, the same name as `opentelemetry-instrumentation-openai-v2`. Every
  `opentelemetry-instrument` run would then instrument the openai client twice.
- It adds about 80 packages (about 500 MB). Among them are anthropic, google-genai and boto3,
  pulled in through `pydantic-ai-slim` extras. google-genai's `tenacity<9.2` pin also
  downgrades tenacity.

The server venv lives in `.phoenix-venv/env` at the repository root, or under
`$EVALTRACE_PHOENIX_VENV` when that is set. It is built once, under a file lock, and reused
while its recorded requirement matches `PHOENIX_REQUIREMENT`. `.phoenix-venv/.gitignore`
(`*`) keeps it out of git and out of ruff.

Nothing may reach beyond this machine:
- The server runs with a minimal environment. `HOME` is its temporary folder, and the
  `PHOENIX_*` settings in `OFFLINE_SETTINGS` switch off every feature that fetches from the
  internet on its own (web fonts, telemetry pixels, the WASM sandbox download, the agent
  assistant and its docs MCP server).
- HTTP and gRPC proxy variables are removed from the server's environment and from the
  apps' (`without_proxies`), so OTLP traffic to 127.0.0.1 cannot be sent to a proxy.

Phoenix binds its HTTP port to `PHOENIX_HOST` (127.0.0.1), but its gRPC OTLP port is
hard-coded to `[::]`, so that port listens on every interface while the tests run. This is
inbound only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from _venvs import cached_venv

PHOENIX_REQUIREMENT = "arize-phoenix==20.26.1"
"""Pinned so the server (its REST API and its OTLP receivers) only changes when we say so."""

REPO = Path(__file__).resolve().parents[1]
VENV_ROOT_VARIABLE = "EVALTRACE_PHOENIX_VENV"
START_TIMEOUT = 240.0  # a cold start (imports + SQLite migrations) took 15-35 s; leave room for load
STOP_TIMEOUT = 20.0
QUERY_TIMEOUT = 5.0

OFFLINE_SETTINGS = {
    "PHOENIX_HOST": "127.0.0.1",
    # No public-internet requests of Phoenix's own: web fonts, telemetry, WASM binary download.
    "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    # FullStory and Scarf.sh pixels (already off when external resources are off).
    "PHOENIX_TELEMETRY_ENABLED": "false",
    # The assistant talks to LLM providers and a hosted docs MCP server.
    "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
    "PHOENIX_ENABLE_MCP_SERVER": "false",
    # Hosted code sandboxes (Daytona, E2B, Modal, Vercel, ...): none is needed to receive spans.
    "PHOENIX_ALLOWED_SANDBOX_PROVIDERS": "NONE",
    # Migrations otherwise echo every SQL statement (thousands of lines) into the log.
    "PHOENIX_LOG_MIGRATIONS": "false",
}
"""Server settings that keep Phoenix off the internet (read in phoenix/config.py of the pinned version)."""

_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "grpc_proxy", "no_proxy")
_INHERITED = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ")
_POLLING_REQUESTS = ('"GET /healthz ', '"GET /v1/projects/')


def without_proxies(env: Mapping[str, str]) -> dict[str, str]:
    """Return `env` without HTTP/gRPC proxy variables, with loopback marked as never proxied."""
    clean = {k: v for k, v in env.items() if k.lower() not in _PROXY_VARIABLES}
    clean["NO_PROXY"] = clean["no_proxy"] = "127.0.0.1,localhost"
    return clean


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def phoenix_python() -> Path:
    """The interpreter of the Phoenix virtualenv, building the venv first if it is missing or stale."""
    root = Path(os.environ.get(VENV_ROOT_VARIABLE) or REPO / ".phoenix-venv")
    return cached_venv(root, [PHOENIX_REQUIREMENT], with_evaltrace=False)


@dataclass
class PhoenixServer:
    """A running Phoenix server: its ports, its log, and the REST queries the tests need."""

    process: subprocess.Popen[bytes]
    http_port: int
    grpc_port: int
    log_path: Path
    start_seconds: float = 0.0
    _client: httpx.Client = field(default_factory=lambda: httpx.Client(trust_env=False, timeout=QUERY_TIMEOUT))

    @property
    def base_url(self) -> str:
        """Root of the UI and REST API; also the OTLP/HTTP endpoint (`/v1/traces` is appended)."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_endpoint(self) -> str:
        """OTLP/gRPC endpoint; the `http` scheme makes the OTel exporter connect without TLS."""
        return f"http://127.0.0.1:{self.grpc_port}"

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server's combined stdout and stderr, without the access log of our own polling."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else "(no log)"
        kept = [line for line in text.splitlines() if not any(poll in line for poll in _POLLING_REQUESTS)]
        return "\n".join(kept[-lines:]) or "(log is empty)"

    def spans(self, project: str, trace_id: str) -> list[dict[str, Any]]:
        """Spans of one trace that Phoenix has stored in `project` (empty until the project exists)."""
        url = f"{self.base_url}/v1/projects/{project}/spans"
        try:
            reply = self._client.get(url, params={"trace_id": trace_id, "limit": 1000})
        except httpx.HTTPError:
            return []
        if reply.status_code == 404:  # the project is created by the first span that names it
            return []
        reply.raise_for_status()
        data: list[dict[str, Any]] = reply.json()["data"]
        return data

    def wait_for_spans(self, project: str, trace_id: str, count: int, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll until Phoenix holds at least `count` spans of the trace, or `timeout` passes; return what it holds.

        Phoenix inserts received spans in batches, so they appear shortly after the exporter's reply.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = self.spans(project, trace_id)
            if len(found) >= count or time.monotonic() > deadline or self.process.poll() is not None:
                return found
            time.sleep(0.25)

    def stop(self) -> None:
        """Stop the server (SIGTERM to its own process group, SIGKILL if it lingers) and close the client."""
        self._client.close()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


def _server_env(workdir: Path, http_port: int, grpc_port: int) -> dict[str, str]:
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env.update(OFFLINE_SETTINGS)
    env.update(
        HOME=str(workdir),
        PHOENIX_WORKING_DIR=str(workdir / "phoenix"),
        PHOENIX_PORT=str(http_port),
        PHOENIX_GRPC_PORT=str(grpc_port),
        PYTHONUNBUFFERED="1",
    )
    return without_proxies(env)


def _wait_until_ready(server: PhoenixServer, timeout: float) -> str | None:
    """Poll `/healthz`; return None once it answers 200, else why it never did."""
    started = time.monotonic()
    with httpx.Client(trust_env=False, timeout=2.0) as client:
        while time.monotonic() - started < timeout:
            code = server.process.poll()
            if code is not None:
                return f"Phoenix exited with code {code} before it was ready"
            try:
                if client.get(f"{server.base_url}/healthz").status_code == 200:
                    server.start_seconds = time.monotonic() - started
                    return None
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(0.5)
    return f"Phoenix was not ready within {timeout:.0f} s"


def start_phoenix(workdir: Path, timeout: float = START_TIMEOUT) -> PhoenixServer:
    """Start Phoenix with its data in `workdir`; fail the test with the log tail if it does not come up."""
    python = phoenix_python()
    workdir.mkdir(parents=True, exist_ok=True)
    http_port, grpc_port = free_port(), free_port()
    log_path = workdir / "phoenix.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(python), "-m", "phoenix.server.main", "serve"],
            env=_server_env(workdir, http_port, grpc_port),
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so stop() ends its children too
        )
    server = PhoenixServer(process, http_port, grpc_port, log_path)
    problem = _wait_until_ready(server, timeout)
    if problem is not None:
        server.stop()
        pytest.fail(f"{problem} (http {http_port}, grpc {grpc_port}). Log tail:\n{server.log_tail()}", pytrace=False)
    return server


@contextmanager
def running_phoenix(workdir: Path) -> Iterator[PhoenixServer]:
    """A started Phoenix server, stopped on exit."""
    server = start_phoenix(workdir)
    try:
        yield server
    finally:
        server.stop()
