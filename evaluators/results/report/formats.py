"""The report formats by name (`json`, `junit`, `markdown`, `html`), and one writer feeding several at once.

A format is a factory taking a `ReportTarget` and returning a `ReportFormat`; a new format is one
module and one line in `FORMATS`. `open_formats` opens every requested writer before scoring starts
(so an unwritable destination is reported first) and returns them as one `ReportFormat`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.report.html_writer import HtmlWriter
from evaltrace.evaluators.results.report.json_writer import ReportWriter
from evaltrace.evaluators.results.report.junit_writer import JUnitWriter
from evaltrace.evaluators.results.report.markdown_writer import MarkdownWriter
from evaltrace.evaluators.results.report.model import Report
from evaltrace.evaluators.results.report.writer import ReportEntry, ReportFormat

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
"""The file GitHub Actions shows as the job's summary; the Markdown summary is appended to it."""


@dataclass(frozen=True)
class ReportTarget:
    """Where one report goes and what its writer needs to know beyond the entries."""

    destination: str
    """The file (`-` is stdout, for the formats that allow it)."""
    spec: str | None = None
    """The spec file scored with (`FILE` or `FILE::CASE_ID`), or `None` for the reference-free defaults."""
    cache: bool = True
    """Whether span files may be read through the traces cache (the HTML report reads them again)."""


FormatFactory = Callable[[ReportTarget], ReportFormat]

FORMATS: dict[str, FormatFactory] = {
    "json": lambda target: ReportWriter(target.destination),
    "junit": lambda target: JUnitWriter(target.destination, spec=target.spec),
    "markdown": lambda target: MarkdownWriter(target.destination, step_summary=os.environ.get(STEP_SUMMARY_ENV)),
    "html": lambda target: HtmlWriter(target.destination, cache=target.cache),
}
"""Every report format, by the name `--FORMAT FILE` gives it."""

STDOUT_FORMATS = frozenset({"json"})
"""Formats that may be written to stdout (`-`)."""
CREATES_FOLDERS = frozenset({"json"})
"""Formats whose writer creates a missing folder (the JSON report always has); the others refuse one."""


def format_factory(name: str) -> FormatFactory:
    """The factory of the format `name`.

    Raises:
        InputError: no format has that name (the message lists the valid ones).
    """
    factory = FORMATS.get(name)
    if factory is None:
        raise InputError(f"unknown report format {name!r} (formats: {', '.join(sorted(FORMATS))})")
    return factory


def check_destination(name: str, destination: str, option: str | None = None) -> None:
    """Refuse a destination the format cannot be written to, before any scoring work.

    Args:
        name: the format.
        destination: the file asked for.
        option: the command-line option named in the error (default `--NAME`).

    Raises:
        InputError: stdout for a format that is file-only, a folder, or a file in a folder that does
            not exist (for the formats not in `CREATES_FOLDERS`).
    """
    option = option or f"--{name}"
    format_factory(name)
    if destination == "-":
        if name in STDOUT_FORMATS:
            return
        raise InputError(f"{option} -: the {name} report is written to a file only ('-' is for --json)")
    path = Path(destination)
    if destination.endswith(("/", os.sep)) or path.is_dir():
        raise InputError(f"{option} {destination}: names a folder; give a file name")
    parent = path.parent
    if name not in CREATES_FOLDERS and not parent.is_dir():
        raise InputError(f"{option} {destination}: the folder {parent} does not exist")


def open_formats(requests: Sequence[tuple[str, ReportTarget]]) -> ReportFormat | None:
    """Open a writer per `(format, target)`; `None` when none was asked for.

    Raises:
        InputError: an unknown format, or a destination that cannot be written (writers already
            opened are aborted first).
    """
    writers: list[ReportFormat] = []
    try:
        for name, target in requests:
            writers.append(format_factory(name)(target))
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    if not writers:
        return None
    return writers[0] if len(writers) == 1 else FanOut(writers)


class FanOut:
    """One `ReportFormat` feeding each entry and the header to several writers, in order."""

    def __init__(self, writers: Sequence[ReportFormat]) -> None:
        self.writers = list(writers)

    def add(self, entry: ReportEntry) -> None:
        """Give the entry to every writer (it reads its samples once and parses only if a writer asks)."""
        for writer in self.writers:
            writer.add(entry)

    def finish(self, report: Report) -> None:
        """Finish every writer; after a failure the ones not yet finished are aborted."""
        for index, writer in enumerate(self.writers):
            try:
                writer.finish(report)
            except BaseException:
                for rest in self.writers[index + 1 :]:
                    rest.abort()
                raise

    def abort(self) -> None:
        """Drop every unfinished output."""
        for writer in self.writers:
            writer.abort()
