"""`evaltrace CMD --help` agrees with the README: every option the README gives a command exists, and the facts
both state (what PATH arguments read, which extra `--engine ray` needs) are the same.

The README's command lines are read from its code blocks (`evaltrace CMD ...`, `$ evaltrace CMD ...`,
`.venv/bin/evaltrace CMD ...`, continued lines joined) and from inline code spans starting with
`evaltrace CMD` or `CMD --option`; each command's help is the real CLI's, run as a subprocess.
"""

from __future__ import annotations

import functools
import re
import tomllib
from pathlib import Path

import pytest
from cli_process import evaltrace
from readme_blocks import readme_text

REPO = Path(__file__).resolve().parents[2]
_CODE_BLOCK = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
_INDENTED = re.compile(r"^    (\S.*)$", re.MULTILINE)
_INLINE = re.compile(r"`([^`\n]+)`")
_COMMAND = re.compile(r"(?:^|[\s$/;(])evaltrace ([a-z][a-z-]*(?: (?:export|import))?)((?: [^#|;&]*)?)")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
_READS_OTLP = ("score", "runs", "traces", "show", "doctor", "replay")
"""The commands README "OTLP files" says read OTLP files too."""


@functools.cache
def _commands() -> frozenset[str]:
    listing = evaltrace("--help", env={"COLUMNS": "200"}).stdout
    return frozenset(re.findall(r"^│ ([a-z][a-z-]*) ", listing, re.MULTILINE))


def _readme_lines() -> list[str]:
    text = readme_text()
    lines = []
    for block in [*_CODE_BLOCK.findall(text), *_INDENTED.findall(text)]:
        lines += block.replace("\\\n", " ").splitlines()
    return lines


def _readme_options() -> dict[str, set[str]]:
    """Command -> the options the README gives it."""
    found: dict[str, set[str]] = {}
    for line in _readme_lines():
        if "pip install" in line:  # `pip install evaltrace crewai==...` names packages, not commands
            continue
        for command, rest in _COMMAND.findall(line.partition(" #")[0]):
            found.setdefault(command, set()).update(_OPTION.findall(rest))
    for span in _INLINE.findall(readme_text()):
        words = span.removeprefix("evaltrace ").split()
        if len(words) > 1 and words[0] in _commands() and (span.startswith("evaltrace ") or words[1].startswith("--")):
            found.setdefault(words[0], set()).update(_OPTION.findall(" ".join(words[1:])))
    return found


@functools.cache
def _help(command: str) -> str:
    """`evaltrace COMMAND --help`, the table's frame removed and lines joined (wide, so nothing is cut)."""
    done = evaltrace(*command.split(), "--help", env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


def test_the_readme_names_commands_and_options() -> None:
    # Guards the parsing: a README whose lines were no longer found would pass the test below.
    options = _readme_options()
    assert {"score", "compare", "run", "traces", "history", "collect"} <= set(options), options
    assert {"--baseline", "--strict", "--alpha", "--engine", "--markdown"} <= options["score"], options["score"]


@pytest.mark.parametrize("command", sorted(_readme_options()))
def test_every_option_the_readme_gives_a_command_is_in_its_help(command: str) -> None:
    assert command.split()[0] in _commands(), f"the README runs `evaltrace {command}`, which is not a command"
    shown = set(_OPTION.findall(_help(command)))
    missing = _readme_options()[command] - shown
    assert not missing, f"README gives `evaltrace {command}` {sorted(missing)}, not in its --help"


@pytest.mark.parametrize("command", _READS_OTLP)
def test_path_arguments_name_otlp_files(command: str) -> None:
    # README "OTLP files": these commands read OTLP JSON lines and protobuf files beside run files.
    assert re.search(r"OTLP files", readme_text()) is not None
    arguments = _help(command).partition("Arguments")[2].partition("Options")[0]
    assert "PATH" in arguments and "OTLP" in arguments, arguments


def test_engine_names_the_extra_pyproject_defines() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    help_text = _help("score")
    named = re.findall(r"pip install '?evaltrace\[([\w-]+)\]", help_text)
    assert named == ["ray"] and "ray" in extras, help_text
    assert "pip install 'evaltrace[ray]'" in readme_text()  # README "On a Ray cluster" says the same


@pytest.mark.parametrize("command", ["score", "compare"])
def test_alpha_and_strict_read_the_same_on_score_and_compare(command: str) -> None:
    text = _help(command)
    assert "--alpha P Significance level of the regression tests against the baseline" in text, text
    assert "--strict Fail (exit 1) on any case that passed in the baseline and fails now" in text, text
