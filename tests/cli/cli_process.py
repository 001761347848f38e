"""`evaltrace` as a real subprocess, for the CLI tests (one helper, so every test runs it the same way)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def evaltrace(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m evaltrace.cli ARGS` in `cwd` with `env` added to this environment; output as text."""
    return subprocess.run(
        [sys.executable, "-m", "evaltrace.cli", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
