"""Regenerate the reference tables of docs/cli.md and docs/scorers.md from the installed evaltrace.

Run `python docs/_generate.py` after changing a command's options or help text, or a built-in
scorer: it rewrites cli.md from `evaltrace COMMAND --help` and the part of scorers.md between its
"## Rule scorers" and "## Custom scorers" headings from `evaltrace scorers --json`.
tests/cli/test_help_vs_docs.py fails while an option or scorer is missing from either page.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
EVALTRACE = [str(Path(sys.executable).parent / "evaltrace")]
"""The console script beside this Python, so usage lines read `evaltrace ...`."""
CLI_INTRO = """# Command-line reference

Every command and every option, as `evaltrace COMMAND --help` prints them (a test holds this page
to the real help: an option added, renamed or removed fails it; `python docs/_generate.py` rewrites
it). Exit codes: 0 success (the gate passed), 1 the gate failed (or, for `compare` and `calibrate`,
a regression or a judge below the threshold), 2 bad input, usage or setup, with one `Error:` line
([exit codes](scoring.md#exit-codes)). `evaltrace --version` prints the version;
`python -m evaltrace.cli` is the same as `evaltrace`.
"""


def _run(*args: str) -> str:
    env = {**os.environ, "COLUMNS": "250"}
    return subprocess.run([*EVALTRACE, *args], capture_output=True, text=True, env=env, check=True).stdout


def _escape(text: str) -> str:
    """Text as a Markdown table cell: no column break, emphasis or HTML tag."""
    return text.replace("|", "\\|").replace("*", "\\*").replace("<", "&lt;").replace(">", "&gt;")


ORDER = (
    "version doctor runs traces show clean compact import collect replay score run schema scorers compare history"
    " review labels calibrate"
).split()
"""Reading order of the reference: recording, then scoring, then results; a new command goes last."""


def commands() -> list[str]:
    """Every command, a group's subcommands as `GROUP SUB`, in `ORDER`."""
    found = []
    for name in re.findall(r"^│ ([a-z][a-z-]*) ", _run("--help"), re.MULTILINE):
        subcommands = re.findall(r"^│ ([a-z][a-z-]*) ", _run(name, "--help").partition("Commands")[2], re.MULTILINE)
        found += [f"{name} {sub}" for sub in subcommands] or [name]
    return sorted(found, key=lambda c: ORDER.index(c.split()[0]) if c.split()[0] in ORDER else len(ORDER))


def _panel_row(rows: list[list[str]], line: str) -> None:
    body = line[1:].rstrip().removesuffix("│").rstrip()[1:]
    required = body.startswith("*")
    body = " " + body[1:] if required else body
    if not body.strip():
        return
    if rows and len(body) - len(body.lstrip()) > 6:  # a continued description
        rows[-1][2] += " " + body.strip()
        return
    name, meta, meaning = (re.split(r"\s{2,}", body.strip()) + ["", ""])[:3]
    if not meaning:
        meta, meaning = "", meta
    if required and "[required]" not in meaning:
        meaning += " [required]"
    rows.append([name, "" if meta == "<bool>" else meta, meaning])


def command_section(command: str) -> list[str]:
    """The Markdown section of one command: usage, summary, a table per help panel."""
    lines = _run(*command.split(), "--help").splitlines()
    start = next(i for i, line in enumerate(lines) if "Usage:" in line)
    usage = lines[start].split("Usage: ", 1)[1].strip()
    end = next((i for i, line in enumerate(lines) if line.startswith("╭")), len(lines))
    summary = " ".join(line.strip() for line in lines[start + 1 : end] if line.strip())
    panels: list[tuple[str, list[list[str]]]] = []
    for line in lines[end:]:
        if line.startswith("╭"):
            panels.append((line.split("─ ", 1)[1].split(" ─", 1)[0], []))
        elif line.startswith("│"):
            _panel_row(panels[-1][1], line)
    out = [f"## {command}", "", f"`{usage}`", "", summary.replace("|", "\\|"), ""]
    for title, rows in panels:
        rows = [row for row in rows if row[0] != "--help"]
        if rows:
            head = {"Arguments": "argument", "Options": "option"}.get(title, f"{title.lower()} option")
            out += [f"| {head} | value | meaning |", "|---|---|---|"]
            out += [
                f"| `{name}` | {f'`{_escape(meta)}`' if meta else ''} | {_escape(text)} |" for name, meta, text in rows
            ]
            out.append("")
    return out


def scorer_sections() -> list[str]:
    """The built-in scorers, rule scorers then judges, each with its options."""
    listing = json.loads(_run("scorers", "--json"))["scorers"]
    out = []
    for kind, title in (("rule", "Rule scorers"), ("judge", "Judge scorers")):
        out += [f"## {title}", ""]
        if kind == "judge":
            out += ["Judge scorers ask the configured judge ([Judges](judges.md)); every one takes `samples`.", ""]
        for scorer in (s for s in listing if s["builtin"] and s["kind"] == kind):
            out += [f"### {scorer['name']}", "", _escape(scorer["summary"]), ""]
            if scorer["options"]:
                out += ["| option | type | default | meaning |", "|---|---|---|---|"]
                for option in scorer["options"]:
                    default = "required" if option["required"] else f"`{json.dumps(option['default'])}`"
                    kind_text = option["type"].replace(" | ", " or ")
                    out.append(f"| `{option['name']}` | `{kind_text}` | {default} | {_escape(option['description'])} |")
                out.append("")
    return out


def main() -> None:
    """Rewrite docs/cli.md and the built-in part of docs/scorers.md."""
    cli = [CLI_INTRO] + [line for command in commands() for line in command_section(command)]
    (DOCS / "cli.md").write_text("\n".join(cli).rstrip() + "\n", encoding="utf-8")
    scorers = (DOCS / "scorers.md").read_text(encoding="utf-8")
    head, rest = scorers.split("## Rule scorers", 1)
    tail = rest[rest.index("## Custom scorers") :]
    (DOCS / "scorers.md").write_text(head + "\n".join(scorer_sections()).rstrip() + "\n\n" + tail, encoding="utf-8")


if __name__ == "__main__":
    main()
