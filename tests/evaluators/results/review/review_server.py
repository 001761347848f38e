"""`evaltrace review` as a real subprocess for the tests: started on port 0, its printed URL read back."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from _serving import end

URL = re.compile(r"evaltrace review: (http://127\.0\.0\.1:(\d+)/#token=([A-Za-z0-9_-]+))")
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class Server:
    url: str
    port: int
    token: str
    pid: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def review_server(*args: str | Path, cwd: Path) -> Iterator[Server]:
    """`evaltrace review ARGS --no-browser --port 0`, until the block ends (then terminated)."""
    command = [sys.executable, "-m", "evaltrace.cli", "review", *map(str, args), "--no-browser", "--port", "0"]
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ}
    )
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(process.stdout.readline() if process.stdout else ""))
    reader.start()
    reader.join(START_TIMEOUT)
    try:
        match = URL.fullmatch(first[0].strip()) if first else None
        if match is None:
            process.kill()
            _, errors = process.communicate(timeout=10)
            raise AssertionError(f"no URL printed: {first!r}, stderr: {errors[-2000:]}")
        yield Server(url=match[1], port=int(match[2]), token=match[3], pid=process.pid)
    finally:
        end(process)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
