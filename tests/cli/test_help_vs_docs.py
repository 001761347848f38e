"""`evaltrace CMD --help` agrees with the documentation (README.md and the docs site's pages).

- docs/cli.md, the command-line reference, has a section per command listing exactly the options
  and arguments of its `--help`: an option added, renamed or removed without the docs fails here.
- Every option any page gives a command (in code blocks: `evaltrace CMD ...`, `$ evaltrace CMD ...`,
  `.venv/bin/evaltrace CMD ...`, continued lines joined; and inline code spans starting with
  `evaltrace CMD` or `CMD --option`) exists in that command's help.
- docs/scorers.md lists every built-in scorer with every option `evaltrace scorers --json` gives it.
- Facts both state (what PATH arguments read, which extra `--engine ray` needs) are the same.

Each command's help is the real CLI's, run as a subprocess.
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from pathlib import Path

import pytest
from cli_process import evaltrace
from readme_blocks import DOCS, docs_text

REPO = Path(__file__).resolve().parents[2]
_CODE_BLOCK = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
_INDENTED = re.compile(r"^    (\S.*)$", re.MULTILINE)
_INLINE = re.compile(r"`([^`\n]+)`")
_COMMAND = re.compile(r"(?:^|[\s$/;(])evaltrace ([a-z][a-z-]*(?: (?:export|import))?)((?: [^#|;&]*)?)")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
_READS_OTLP = ("score", "runs", "traces", "show", "doctor", "replay")
"""The commands docs/otlp.md ("OTLP files") says read OTLP files too."""
_ROW_NAME = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


@functools.cache
def _raw_help(command: str) -> str:
    """`evaltrace COMMAND --help` (`""`: the top level), wide so nothing is cut; run once per command."""
    done = evaltrace(*command.split(), "--help", env={"COLUMNS": "250"})
    assert done.returncode == 0, done.stderr
    return done.stdout


@functools.cache
def _commands() -> tuple[str, ...]:
    """Every command, a group's as `GROUP SUB` (`labels export`), from the real CLI's help."""
    found: list[str] = []
    for name in re.findall(r"^│ ([a-z][a-z-]*) ", _raw_help(""), re.MULTILINE):
        group = _raw_help(name)
        subcommands = re.findall(r"^│ ([a-z][a-z-]*) ", group.partition("Commands")[2], re.MULTILINE)
        found += [f"{name} {sub}" for sub in subcommands] or [name]
    return tuple(found)


def _doc_lines() -> list[str]:
    text = docs_text()
    lines = []
    for block in [*_CODE_BLOCK.findall(text), *_INDENTED.findall(_CODE_BLOCK.sub("", text))]:
        lines += block.replace("\\\n", " ").splitlines()
    return lines


def _doc_options() -> dict[str, set[str]]:
    """Command -> the options the documentation gives it."""
    found: dict[str, set[str]] = {}
    for line in _doc_lines():
        if "pip install" in line:  # `pip install evaltrace crewai==...` names packages, not commands
            continue
        for command, rest in _COMMAND.findall(line.partition(" #")[0]):
            found.setdefault(command, set()).update(_OPTION.findall(rest))
    top = {command.split()[0] for command in _commands()}
    for span in _INLINE.findall(_CODE_BLOCK.sub("", docs_text())):
        words = span.removeprefix("evaltrace ").split()
        if len(words) > 1 and words[0] in top and (span.startswith("evaltrace ") or words[1].startswith("--")):
            found.setdefault(words[0], set()).update(_OPTION.findall(" ".join(words[1:])))
    return found


def _help(command: str) -> str:
    """`evaltrace COMMAND --help`, the table's frame removed and lines joined."""
    return " ".join(_raw_help(command).replace("│", " ").replace("╭", " ").replace("╰", " ").split())


def _help_entries(command: str) -> set[str]:
    """The options (`--json`) and arguments (`PATH`, `[RUN]`) `evaltrace COMMAND --help` lists."""
    entries = set()
    for line in _raw_help(command).splitlines():  # an entry starts near the frame; a continued line far from it
        if name := re.match(r"│ (?:\* *| {0,4})(\S+(?: \S+)*?)(?: {2,}| *│)", line):
            entries.add(name.group(1))
    return {e for e in entries if e.startswith(("-", "[")) or e.isupper()} - {"--help"}


def _cli_sections() -> dict[str, str]:
    """docs/cli.md's sections by command (`## score` ... up to the next section)."""
    parts = re.split(r"^## (.+)$", (DOCS / "cli.md").read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_cli_reference_has_a_section_per_command() -> None:
    assert list(_cli_sections()) and sorted(_cli_sections()) == sorted(_commands())


@pytest.mark.parametrize("command", _commands())
def test_the_cli_reference_lists_exactly_the_commands_options(command: str) -> None:
    section = _cli_sections().get(command, "")
    listed = {name.replace("\\*", "*") for name in _ROW_NAME.findall(section)}
    shown = _help_entries(command)
    assert listed == shown, (
        f"docs/cli.md `{command}`: missing {sorted(shown - listed)}, not in --help {sorted(listed - shown)}"
        " (python docs/_generate.py rewrites it)"
    )
    assert f"`evaltrace {command} [OPTIONS]" in section  # its usage line


def test_the_docs_name_commands_and_options() -> None:
    # Guards the parsing: docs whose lines were no longer found would pass the test below.
    options = _doc_options()
    assert {"score", "compare", "run", "traces", "history", "collect"} <= set(options), options
    assert {"--baseline", "--strict", "--alpha", "--engine", "--markdown"} <= options["score"], options["score"]


@pytest.mark.parametrize("command", sorted(_doc_options()))
def test_every_option_the_docs_give_a_command_is_in_its_help(command: str) -> None:
    known = {*_commands(), *(c.split()[0] for c in _commands())}
    assert command in known, f"the docs run `evaltrace {command}`, which is not a command"
    shown = set(_OPTION.findall(_help(command)))
    missing = _doc_options()[command] - shown
    assert not missing, f"the docs give `evaltrace {command}` {sorted(missing)}, not in its --help"


def test_the_scorers_reference_lists_every_builtin_scorer_and_option() -> None:
    listing = json.loads(evaltrace("scorers", "--json").stdout)["scorers"]
    page = (DOCS / "scorers.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^### (\S+)\n(.*?)(?=^##|\Z)", page, re.MULTILINE | re.DOTALL))
    builtin = [s for s in listing if s["builtin"]]
    assert sorted(sections) == sorted(s["name"] for s in builtin), "python docs/_generate.py rewrites docs/scorers.md"
    for scorer in builtin:
        documented = set(_ROW_NAME.findall(sections[scorer["name"]]))
        assert documented == {o["name"] for o in scorer["options"]}, f"{scorer['name']}: python docs/_generate.py"


@pytest.mark.parametrize("command", _READS_OTLP)
def test_path_arguments_name_otlp_files(command: str) -> None:
    # docs/otlp.md "OTLP files": these commands read OTLP JSON lines and protobuf files beside run files.
    assert re.search(r"`score`, `traces`, `show`, `runs`, `doctor` and `replay` also read OTLP files", docs_text())
    arguments = _help(command).partition("Arguments")[2].partition("Options")[0]
    assert "PATH" in arguments and "OTLP" in arguments, arguments


def test_engine_names_the_extra_pyproject_defines() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    help_text = _help("score")
    named = re.findall(r"pip install '?evaltrace\[([\w-]+)\]", help_text)
    assert named == ["ray"] and "ray" in extras, help_text
    assert "pip install 'evaltrace[ray]'" in docs_text()  # docs/scale.md "On a Ray cluster" says the same


@pytest.mark.parametrize("command", ["score", "compare"])
def test_alpha_and_strict_read_the_same_on_score_and_compare(command: str) -> None:
    text = _help(command)
    assert "--alpha P Significance level of the regression tests against the baseline" in text, text
    assert "--strict Fail (exit 1) on any case that passed in the baseline and fails now" in text, text
