"""Every `evaltrace` command the documentation runs on the shipped samples works as it says.

The documentation (README.md and the docs site's pages) is what a new user types first; a command
in it that fails (a stale trace id, a renamed option) is a broken product for them. Each command
runs as a real subprocess in a fresh folder holding the samples, as in a user's clone, with the
exit code the page promises: 0, or 1 where its comment says "exit 1". The README's first
record-and-score example runs as written too, wherever it is shown.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from cli_process import evaltrace
from readme_blocks import BIN, README, doc_pages, docs_text

REPO = Path(__file__).resolve().parents[2]
_BASH_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
_EXAMPLE = re.compile(
    r"<!-- example: record-and-score -->\n```python\n(.*?)```\n\n```yaml\n(.*?)```\n\n```bash\n(.*?)```", re.DOTALL
)


def _sample_commands() -> list[tuple[str, dict[str, str], list[str], int]]:
    """(line, environment, evaltrace arguments, expected exit code) of each documented sample command, once."""
    commands = []
    for block in _BASH_BLOCK.findall(docs_text()):
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
                found = (" ".join(words), env, words[1:], 1 if "exit 1" in comment else 0)
                if found not in commands:  # the quick start is in the README and in Getting started
                    commands.append(found)
    return commands


SAMPLE_COMMANDS = _sample_commands()


def test_the_docs_have_sample_commands() -> None:
    # Guards the parsing above: a rewrite that hid every command would pass the test below.
    verbs = {arguments[0] for _, _, arguments, _ in SAMPLE_COMMANDS}
    assert {"score", "runs", "traces", "show", "run", "scorers", "replay"} <= verbs, SAMPLE_COMMANDS
    assert len(SAMPLE_COMMANDS) >= 13, SAMPLE_COMMANDS  # as many as the README ran before the docs site


@pytest.mark.parametrize(
    ("env", "arguments", "expected"),
    [pytest.param(env, arguments, expected, id=line) for line, env, arguments, expected in SAMPLE_COMMANDS],
)
def test_documented_command(tmp_path: Path, env: dict[str, str], arguments: list[str], expected: int) -> None:
    (tmp_path / "samples").symlink_to(REPO / "samples", target_is_directory=True)
    done = evaltrace(*arguments, cwd=tmp_path, env=env, timeout=300)
    assert done.returncode == expected, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr


def test_ci_runs_the_readme_test_command() -> None:
    readme_blocks = [block.strip() for block in _BASH_BLOCK.findall(README.read_text(encoding="utf-8"))]
    ci_lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    test_command = ci_lines[-1]
    assert "pytest" in test_command
    assert test_command in readme_blocks  # the quick start's second command, as its own block


EXAMPLES = [
    (path.relative_to(REPO).as_posix(), found) for path, text in doc_pages().items() for found in _EXAMPLE.findall(text)
]


def test_the_readme_and_getting_started_show_the_record_and_score_example() -> None:
    assert [page for page, _ in EXAMPLES] == ["README.md", "docs/getting-started.md"]


@pytest.mark.parametrize(("app", "spec", "commands"), [pytest.param(*found, id=page) for page, found in EXAMPLES])
def test_the_record_and_score_example_runs_as_written(tmp_path: Path, app: str, spec: str, commands: str) -> None:
    (tmp_path / "app.py").write_text(app, encoding="utf-8")
    (tmp_path / "evals.yaml").write_text(spec, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", EVALTRACE_CACHE_DIR=str(tmp_path / "cache"))
    done = []
    for line in commands.splitlines():
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{line!r} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        done.append(proc.stdout)
    assert done[1].rstrip().endswith("1 trace") and "What is 2 + 2?" in done[1], done[1]
    assert "Gate PASSED" in done[2], done[2]
    assert "1 passed" in done[2] or "1/1" in done[2], done[2]


def _documented_specs() -> list[str]:
    """Every spec the docs show: whole ```yaml specs, and `expect:` fragments put into a case of their own."""
    specs = []
    for block in re.findall(r"```yaml\n(.*?)```", docs_text(), re.DOTALL):
        if block.startswith("    expect:"):  # a case's `expect`, as in "Steps validators"
            specs.append("cases:\n  - id: fragment\n    input: a question\n" + block)
        elif re.search(r"^cases:", block, re.MULTILINE):
            specs.append(block)
    return specs


def test_the_docs_show_specs() -> None:
    assert len(_documented_specs()) >= 4  # the README's and Getting started's, the spec and the steps fragment


@pytest.mark.parametrize("spec", _documented_specs())
def test_every_documented_spec_is_valid(tmp_path: Path, spec: str) -> None:
    # A spec the docs show is one `evaltrace score` accepts: it scores (gate passed or failed), never exit 2.
    (tmp_path / "spec.yaml").write_text(spec, encoding="utf-8")
    done = evaltrace("score", REPO / "samples" / "runs", "--spec", "spec.yaml", "--no-store", cwd=tmp_path)
    assert done.returncode in (0, 1) and "Error:" not in done.stderr, done.stderr
    assert "Gate PASSED" in done.stdout or "Gate FAILED" in done.stdout, done.stdout


def _install(site: Path, module: str, entry_point: str) -> dict[str, str]:
    """`my_package` holding `module` as the documented entry point names it, laid out as pip installs it.

    `entry_point` is the docs' ```toml block (`[project.entry-points."GROUP"]` then `NAME = "MODULE:CLASS"`);
    returns the environment that finds the package.
    """
    header, _, line = entry_point.strip().partition("\n")
    group = re.fullmatch(r'\[project\.entry-points\."([\w.]+)"\]', header)
    assert group is not None, header
    name, _, target = (part.strip().strip('"') for part in line.partition("="))
    assert target.startswith("my_package.") and target.count(":") == 1, target
    package = site / "my_package"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / f"{target.split(':')[0].split('.')[1]}.py").write_text(module, encoding="utf-8")
    info = site / "my_package-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-package\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{group.group(1)}]\n{name} = {target}\n", encoding="utf-8")
    return {"PYTHONPATH": str(site)}


def test_the_documented_report_format_plugin_writes_its_report(tmp_path: Path) -> None:
    # docs/reports.md "Report format plugins": its class, installed under its entry point as pip
    # would (a dist-info folder on the path), is a `--report csv=FILE` format of a real scoring.
    text = (REPO / "docs" / "reports.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- example: report-format -->\n```python\n(.*?)```\n\n```toml\n(.*?)```", text, re.DOTALL)
    assert found is not None
    env = _install(tmp_path / "site", *found.groups())
    table = tmp_path / "results.csv"
    args = ("score", REPO / "samples" / "runs", "--spec", REPO / "samples" / "evals.yaml", "--no-store")
    done = evaltrace(*args, "--report", f"csv={table}", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    rows = table.read_text(encoding="utf-8").splitlines()
    assert rows[0] == "case_id,status,scores" and rows[-1] == "gate,True,"
    assert len(rows) == 2 + 6 and "paris-weather,passed," in table.read_text(encoding="utf-8")


def test_the_documented_scorer_entry_point_offers_the_scorer_to_every_run(tmp_path: Path) -> None:
    # docs/scorers.md "Custom scorers": samples/scorers.py installed under the documented entry point
    # is listed by `evaltrace scorers` and scores the sample run with no --plugin.
    text = (REPO / "docs" / "scorers.md").read_text(encoding="utf-8")
    (entry_point,) = re.findall(r"```toml\n(.*?)```", text, re.DOTALL)
    env = _install(tmp_path / "site", (REPO / "samples" / "scorers.py").read_text(encoding="utf-8"), entry_point)
    listed = json.loads(evaltrace("scorers", "--json", cwd=tmp_path, env=env).stdout)["scorers"]
    assert [s["builtin"] for s in listed if s["name"] == "cities_named"] == [False]
    report = tmp_path / "report.json"
    args = ("score", REPO / "samples" / "runs", "--spec", REPO / "samples" / "evals-custom.yaml", "--json", report)
    done = evaltrace(*args, "--no-store", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    scorers = {s["scorer"] for entry in json.loads(report.read_text())["entries"] for s in entry["scores"]}
    assert "cities_named" in scorers
