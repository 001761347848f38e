"""Cached virtualenvs of their own for tests whose packages cannot live in the suite's environment.

A Phoenix server, and agent frameworks whose pins clash with the suite's (CrewAI, Google ADK,
...), each get a venv built once under a file lock and reused while its recorded requirements
match. A framework venv installs this repository editable, so the recording it makes always runs
the code under test. Each venv root holds a `.gitignore` of `*`, keeping it out of git and ruff.

uv (a `test` dependency) builds them, not pip: it downloads and installs in parallel and links
from its own cache (`~/.cache/uv`, or `$UV_CACHE_DIR`), shared by every clone on the machine. On
an empty cache, uv against pip: CrewAI 11 s / 110 s, Phoenix 9 s / 188 s, Ray 5 s / 107 s; from a
warm cache a venv takes a few seconds.
So each clone keeps venvs of its own (each pointing at its own code) and a second clone builds
them in seconds. uv knows no pip settings (the machine's torch wheel, its constraints): none of
these venvs pulls torch.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT = 1500.0  # also the wait for another run's build; uv's cold installs take well under a minute


def run_step(cmd: list[str], timeout: float, what: str) -> None:
    """Run an install step outside the suite's venv settings; fail the test with the output's tail."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not finish within {timeout:.0f} s: {' '.join(cmd)}", pytrace=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        pytest.fail(f"{what} failed (exit {done.returncode}): {' '.join(cmd)}\n{tail}", pytrace=False)


@contextmanager
def locked(path: Path, timeout: float) -> Iterator[None]:
    """Hold an exclusive lock on `path`, waiting at most `timeout` seconds (another run may be building)."""
    deadline = time.monotonic() + timeout
    with path.open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"gave up after {timeout:.0f} s waiting for the lock {path}", pytrace=False)
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _uv() -> str:
    """The uv executable installed with the suite (the `test` extra)."""
    try:
        from uv import find_uv_bin
    except ImportError:
        pytest.fail("uv is missing: install the test extra (pip install -e '.[test]')", pytrace=False)
    return str(find_uv_bin())


def _write_bytecode(env_dir: Path) -> None:
    """Let the venv's processes cache the bytecode of what they import, even under PYTHONDONTWRITEBYTECODE.

    uv installs no bytecode, and this machine sets PYTHONDONTWRITEBYTECODE: every process would
    compile the framework from source again (`import crewai` took 7.4 s of CPU against 3.9 s once
    cached). Compiling every file at install (`uv pip install --compile-bytecode`) costs more than
    the first run's compiling of the modules used. A `.pth` line runs at every start of the venv.
    """
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = env_dir / "lib" / version / "site-packages"
    (site / "_evaltrace_tests_bytecode.pth").write_text("import sys; sys.dont_write_bytecode = False\n")


def _project_digest() -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    installed = {"entry-points": project["entry-points"], "dependencies": project["dependencies"]}
    return hashlib.sha256(json.dumps(installed, sort_keys=True).encode()).hexdigest()


def cached_venv(root: Path, requirements: Sequence[str], *, with_evaltrace: bool) -> Path:
    """The interpreter of the venv at `root/env`, built first when missing or made for other requirements.

    Args:
        root: the venv's folder (created, with a `.gitignore` of `*`).
        requirements: what uv installs, pinned by the caller so the venv changes only when asked.
        with_evaltrace: also install this repository, editable.
    """
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# A test venv (tests/_venvs.py); never committed.\n*\n")
    env_dir = root / "env"
    python = env_dir / "bin" / "python"
    marker = env_dir / ".evaltrace-requirements"
    # An editable install copies the entry points of pyproject.toml into the venv and installs its
    # dependencies: a venv made before either changed would load stale entry points or miss a
    # dependency, so it is keyed on both.
    project = _project_digest() if with_evaltrace else None
    wanted = json.dumps({"requirements": list(requirements), "evaltrace": with_evaltrace, "pyproject": project})
    with locked(root / ".lock", INSTALL_TIMEOUT):
        if python.exists() and marker.exists() and marker.read_text() == wanted:
            return python
        shutil.rmtree(env_dir, ignore_errors=True)
        uv = _uv()
        create = [uv, "venv", "--quiet", "--python", sys.executable, str(env_dir)]
        run_step(create, 300.0, f"creating the venv {env_dir}")
        install = [uv, "pip", "install", "--quiet", "--python", str(python), *requirements]
        if with_evaltrace:
            install += ["-e", str(REPO)]
        run_step(install, INSTALL_TIMEOUT, f"installing {', '.join(requirements)}")
        _write_bytecode(env_dir)
        marker.write_text(wanted)
    return python
