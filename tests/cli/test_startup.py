"""What a rule-only `evaltrace score` loads: nothing for judges it does not run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCORE_THEN_LIST_MODULES = """
import sys
from evaltrace.cli.main import main
code = main(["score", "samples/runs", "--spec", "samples/evals.yaml"])
print("exit", code)
print("httpx loaded" if "httpx" in sys.modules else "httpx not loaded")
"""


def test_rule_only_scoring_never_imports_the_http_client() -> None:
    # httpx takes ~0.2 s to import; only a judge session needs it.
    done = subprocess.run(
        [sys.executable, "-c", _SCORE_THEN_LIST_MODULES], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "exit 0" in done.stdout
    assert "httpx not loaded" in done.stdout, done.stdout


# Ctrl-C while the commands are still being imported: the interrupt is raised, as Python raises it, in
# the import of the score command (a finder sends SIGINT to this process when that module is looked up).
_INTERRUPTED_WHILE_IMPORTING = """
import os, signal, sys

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "evaltrace.cli.score":
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["evaltrace", "score", "samples/runs", "--spec", "samples/evals.yaml"]
from evaltrace.cli.main import run
run()
"""


def test_ctrl_c_while_the_commands_load_is_an_interruption_not_a_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_WHILE_IMPORTING], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "Error: interrupted\n"
