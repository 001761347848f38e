"""Every `evaltrace` command the README runs on the shipped samples works as the README says.

The README is what a new user types first; a command in it that fails (a stale trace id, a
renamed option) is a broken product for them. Each command runs as a real subprocess in a fresh
folder holding the samples, as in a user's clone, with the exit code the README promises: 0, or
1 where its comment says "exit 1".
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from cli_process import evaltrace

REPO = Path(__file__).resolve().parents[2]
_BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def _sample_commands() -> list[tuple[str, dict[str, str], list[str], int]]:
    """(line, environment, evaltrace arguments, expected exit code) of each README sample command."""
    commands = []
    for block in _BASH_BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            line, _, comment = line.partition("#")
            for command in line.split("&&"):  # the quick start installs, then scores
                words = shlex.split(command)
                env = {}
                while words and "=" in words[0]:
                    key, _, value = words.pop(0).partition("=")
                    env[key] = value
                if words[:1] not in (["evaltrace"], [".venv/bin/evaltrace"]) or not any("samples" in w for w in words):
                    continue  # placeholders such as runs/*.parquet, and install lines
                commands.append((" ".join(words), env, words[1:], 1 if "exit 1" in comment else 0))
    return commands


SAMPLE_COMMANDS = _sample_commands()


def test_the_readme_has_sample_commands() -> None:
    # Guards the parsing above: a README rewrite that hid every command would pass the test below.
    verbs = {arguments[0] for _, _, arguments, _ in SAMPLE_COMMANDS}
    assert {"score", "runs", "traces", "show", "run", "scorers"} <= verbs, SAMPLE_COMMANDS


@pytest.mark.parametrize(
    ("env", "arguments", "expected"),
    [pytest.param(env, arguments, expected, id=line) for line, env, arguments, expected in SAMPLE_COMMANDS],
)
def test_readme_command(tmp_path: Path, env: dict[str, str], arguments: list[str], expected: int) -> None:
    (tmp_path / "samples").symlink_to(REPO / "samples", target_is_directory=True)
    done = evaltrace(*arguments, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == expected, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr


def test_ci_runs_the_readme_test_command() -> None:
    readme_blocks = [block.strip() for block in _BASH_BLOCK.findall((REPO / "README.md").read_text(encoding="utf-8"))]
    ci_lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    test_command = ci_lines[-1]
    assert "pytest" in test_command
    assert test_command in readme_blocks  # the quick start's second command, as its own block
