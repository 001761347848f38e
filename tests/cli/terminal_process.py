"""`evaltrace` as a real subprocess whose stdout and/or stderr is a pseudo-terminal.

A terminal is what makes a difference to the CLI: click strips some ANSI sequences only when the
output is not a terminal, and the progress bar is drawn only when stderr is one. Each stream
given `tty=True` gets its own pty (sized 120x40, `TERM=xterm-256color`); the others are pipes.
The bytes are returned as the terminal received them (the pty turns `\\n` into `\\r\\n`).
"""

from __future__ import annotations

import fcntl
import os
import pty
import selectors
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

_COLUMNS, _LINES = 120, 40


@dataclass(frozen=True)
class Finished:
    """What a run on a terminal left: its exit code and the bytes of each stream."""

    returncode: int
    stdout: bytes
    stderr: bytes


def _pty_pair() -> tuple[int, int]:
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", _LINES, _COLUMNS, 0, 0))
    return leader, follower


def evaltrace_on_terminal(
    *args: str | Path,
    stdout_tty: bool = True,
    stderr_tty: bool = True,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> Finished:
    """Run `python -m evaltrace.cli ARGS` with the chosen streams on pseudo-terminals."""
    leaders: dict[str, int] = {}
    followers: dict[str, int] = {}
    for name, wanted in (("stdout", stdout_tty), ("stderr", stderr_tty)):
        if wanted:
            leaders[name], followers[name] = _pty_pair()
    full_env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(_COLUMNS), **(env or {})}
    process = subprocess.Popen(
        [sys.executable, "-m", "evaltrace.cli", *map(str, args)],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=followers.get("stdout", subprocess.PIPE),
        stderr=followers.get("stderr", subprocess.PIPE),
        env=full_env,
    )
    for follower in followers.values():
        os.close(follower)  # the child holds them now: its exit ends our reads
    sources = dict(leaders)
    if process.stdout is not None:
        sources["stdout"] = process.stdout.fileno()
    if process.stderr is not None:
        sources["stderr"] = process.stderr.fileno()
    received = {"stdout": bytearray(), "stderr": bytearray()}
    selector = selectors.DefaultSelector()
    for name, fd in sources.items():
        selector.register(fd, selectors.EVENT_READ, name)
    deadline = time.monotonic() + timeout
    try:
        while selector.get_map():
            if time.monotonic() > deadline:
                process.kill()
                raise TimeoutError(f"evaltrace {' '.join(map(str, args))} ran over {timeout} s")
            for key, _ in selector.select(timeout=1.0):
                try:
                    data = os.read(key.fd, 65536)
                except OSError:  # a pty whose other end closed reads as EIO on Linux: the end
                    data = b""
                if data:
                    received[key.data] += data
                else:
                    selector.unregister(key.fd)
        returncode = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        selector.close()
        for leader in leaders.values():
            os.close(leader)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    return Finished(returncode, bytes(received["stdout"]), bytes(received["stderr"]))
