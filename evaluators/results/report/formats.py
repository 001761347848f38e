"""The report formats by name (`json`, `junit`, `markdown`, `html`), and one writer feeding several at once.

A format is a factory taking a `ReportTarget` and returning a `ReportFormat` (each writer module's
`for_target`); a new format is one module and one row in `FORMATS`, whose modules are imported
only when their format is asked for. Installed distributions add formats through the entry-point
group `evaltrace.report_formats` (`csv = my_reports:open_csv`), used as `--report csv=FILE`.
`open_formats` opens every requested writer before scoring starts (so an unwritable destination is
reported first) and returns them as one `ReportFormat`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from evaltrace.collector.errors import InputError
from evaltrace.collector.registry import Registry
from evaltrace.evaluators.results.report.model import Report
from evaltrace.evaluators.results.report.writer import ReportEntry, ReportFormat


@dataclass(frozen=True)
class ReportTarget:
    """Where one report goes and what its writer needs to know beyond the entries."""

    destination: str
    """The file (`-` is stdout, for the formats that allow it)."""
    spec: str | None = None
    """The spec file scored with (`FILE` or `FILE::CASE_ID`), or `None` for the reference-free defaults."""
    cache: bool = True
    """Whether span files may be read through the traces cache (the HTML report reads them again)."""
    files: Sequence[Path] | None = None
    """The scoring's run files (its PATHs resolved once), which the HTML report reads again."""


FormatFactory = Callable[[ReportTarget], ReportFormat]

FORMATS: Registry[FormatFactory] = Registry("report format", group="evaltrace.report_formats")
"""Every report format, by the name `--FORMAT FILE` (or `--report FORMAT=FILE`) gives it."""

for _name in ("json", "junit", "markdown", "html"):
    FORMATS.lazy(_name, f"{__package__}.{_name}_writer:for_target")

STDOUT_FORMATS = frozenset({"json"})
"""Formats that may be written to stdout (`-`)."""
CREATES_FOLDERS = frozenset({"json"})
"""Formats whose writer creates a missing folder (the JSON report always has); the others refuse one."""


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
    FORMATS.get(name)
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
            writers.append(FORMATS.get(name)(target))
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
