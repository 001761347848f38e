"""The review tests run `evaltrace` through the CLI tests' one subprocess helper (tests/cli/cli_process.py)."""

from __future__ import annotations

import sys
from pathlib import Path

_CLI_TESTS = str(Path(__file__).resolve().parents[3] / "cli")
if _CLI_TESTS not in sys.path:
    sys.path.append(_CLI_TESTS)
