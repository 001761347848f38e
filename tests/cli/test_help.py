"""Every command's `--help` names what each option takes, never a Python type."""

from __future__ import annotations

import re

import pytest
from cli_process import evaltrace

COMMANDS = ("score", "run", "runs", "clean", "compact", "traces", "show", "scorers", "doctor", "schema", "version")
_OPTION_ROW = re.compile(r"^│\s+\*?\s*(--[a-z-]+)\s+(\S*)")
_PYTHON_TYPE = re.compile(r"<(bool|str|int|float|path|list\[[a-z]+\])\b")


def _option_rows(help_text: str) -> dict[str, str]:
    """Option name -> the word printed after it (its metavar, or the help's first word for a flag)."""
    return {m.group(1): m.group(2) for line in help_text.splitlines() if (m := _OPTION_ROW.match(line))}


@pytest.mark.parametrize("command", COMMANDS)
def test_options_show_metavars_not_python_types(command: str) -> None:
    result = evaltrace(command, "--help", env={"COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    rows = _option_rows(result.stdout)
    assert "--help" in rows, result.stdout
    option_lines = [line for line in result.stdout.splitlines() if _OPTION_ROW.match(line)]
    assert not [line for line in option_lines if _PYTHON_TYPE.search(line)], result.stdout
    # A flag takes no value: its help text follows it directly.
    assert rows["--help"] == "Show"


def test_score_help_names_what_each_option_takes() -> None:
    rows = _option_rows(evaltrace("score", "--help", env={"COLUMNS": "120"}).stdout)
    assert rows["--spec"] == "FILE"
    assert rows["--confidence"] == "RATE"
    assert rows["--workers"] == "N"
    assert rows["--case"] == "GLOB"
    assert rows["--judge-timeout"] == "SECONDS"
    assert rows["--no-judge-cache"] == "Neither"


_ARGUMENT_ROW = re.compile(r"^│\s+\*?\s*([A-Z_]+)\s+(\S+)")


@pytest.mark.parametrize(
    ("command", "usage", "arguments"),
    [
        ("score", "evaltrace score [OPTIONS] PATH...", {"PATH": "Run"}),
        ("show", "evaltrace show [OPTIONS] TRACE_ID PATH...", {"TRACE_ID": "A", "PATH": "Run"}),
        ("clean", "evaltrace clean [OPTIONS] [PATH]...", {"PATH": "Runs"}),  # PATH is optional with --cache
    ],
)
def test_arguments_read_as_unix_usage(command: str, usage: str, arguments: dict[str, str]) -> None:
    # Usage lines name positionals as POSIX does (`PATH...`), and the arguments table gives the
    # help right after the name, not a Python annotation such as `<list[str]>`.
    text = evaltrace(command, "--help", env={"COLUMNS": "120"}).stdout
    assert f"Usage: {usage}" in " ".join(text.split()), text
    rows = {m.group(1): m.group(2) for line in text.splitlines() if (m := _ARGUMENT_ROW.match(line))}
    assert rows == arguments, text
