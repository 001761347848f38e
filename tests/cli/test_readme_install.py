"""The documented install lines work on a fresh machine as written, with evaltrace not on PyPI.

The "Install" block of docs/getting-started.md runs as written with bash in a copy of the source
tree (as a clone), a new empty venv first on PATH and a new HOME: it builds the wheel, points
PIP_FIND_LINKS at it and `pip install evaltrace` installs it (its requirements from the package
index). The installed copy (not the source tree) then scores the samples. The GitHub Actions
example's install step (docs/ci.md) then runs as written in a folder holding the wheel in
`wheels/`, as a repository that committed it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from readme_blocks import bash_block, docs_text

REPO = Path(__file__).resolve().parents[2]


def _clone(destination: Path) -> None:
    """The tracked files of the work tree, as a clone has them (no venv, caches or build output)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def _shell(venv: Path, home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_FIND_LINKS", "VIRTUAL_ENV"))}
    env.pop("PYTHONPATH", None)
    return {**env, "HOME": str(home), "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(venv)}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(the clone, the venv evaltrace was installed into by the documented lines, their shell environment)."""
    root = tmp_path_factory.mktemp("install")
    clone, home, venv = root / "evaltrace", root / "home", root / "venv"
    _clone(clone)
    home.mkdir()
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    env = _shell(venv, home)
    block = bash_block("pip wheel")
    done = subprocess.run(["bash", "-e", "-c", block], cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return clone, venv, env


def test_the_install_block_installs_the_built_wheel_and_it_scores(fresh: tuple[Path, Path, dict[str, str]]) -> None:
    clone, venv, env = fresh
    home = Path(env["HOME"])
    assert [p.name for p in (home / "evaltrace-wheels").iterdir()] == ["evaltrace-0.1.0-py3-none-any.whl"]
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import evaltrace.cli; print(evaltrace.cli.__file__)"],
        cwd=home, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert Path(where.strip()).is_relative_to(venv), where  # the installed wheel, not the source tree
    scored = subprocess.run(
        [venv / "bin" / "evaltrace", "score", "samples/runs", "--spec", "samples/evals.yaml", "--no-store"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert scored.returncode == 0, scored.stdout + scored.stderr
    assert "Gate PASSED" in scored.stdout


def test_the_github_actions_step_installs_the_committed_wheel(
    fresh: tuple[Path, Path, dict[str, str]], tmp_path: Path
) -> None:
    _, venv, env = fresh
    workflow = re.search(r"```yaml\n(# \.github/workflows/evals\.yml\n.*?)```", docs_text(), re.DOTALL)
    assert workflow is not None
    steps = yaml.safe_load(workflow.group(1))["jobs"]["evals"]["steps"]
    (install,) = [step["run"] for step in steps if "pip install" in step.get("run", "")]
    (tmp_path / "wheels").mkdir()
    shutil.copy2(next((Path(env["HOME"]) / "evaltrace-wheels").iterdir()), tmp_path / "wheels")
    subprocess.run([venv / "bin" / "pip", "uninstall", "-q", "-y", "evaltrace"], env=env, check=True)
    done = subprocess.run(["bash", "-e", "-c", install], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    version = subprocess.run([venv / "bin" / "evaltrace", "version"], env=env, capture_output=True, text=True)
    assert version.returncode == 0 and "0.1.0" in version.stdout, version.stdout + version.stderr
