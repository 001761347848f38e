"""The JSON report: written whole (`write_report`) or streamed entry by entry (`ReportWriter`)."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

from evaltrace.collector.errors import InputError
from evaltrace.collector.terminal import json_safe_bytes
from evaltrace.evaluators.results.report.model import Report
from evaltrace.evaluators.results.report.writer import AbortOnExit, ReportEntry

if TYPE_CHECKING:
    from evaltrace.evaluators.results.report.formats import ReportTarget


def write_report(report: Report, destination: str) -> None:
    """Write the JSON report to a file, or to stdout when `destination` is `-`.

    Raises:
        InputError: the file cannot be written.
    """
    text = report.to_json()
    if destination == "-":
        sys.stdout.write(text)
        return
    path = Path(destination)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{destination}: cannot write the JSON report: {exc.strerror or exc}") from None


_JOINED = 1 << 16
"""An entry's JSON up to this size is written joined to what precedes it (one write); a larger one apart."""


class ReportWriter(AbortOnExit):
    """Streams a report to a JSON file (or stdout for `-`): entries as they come, the header last.

    The file is one JSON object whose `entries` key comes first (key order means nothing to JSON
    parsers): the gate, counts and totals are known only after the last entry. A file is written
    under a temporary name in its folder and renamed into place by `finish`, so a reader never
    sees half a report; `abort` (or leaving the `with` block on an error) removes it.
    """

    def __init__(self, destination: str) -> None:
        self._destination = destination
        self._temp: Path | None = None
        if destination == "-":
            sys.stdout.flush()  # text already printed must come before the report's bytes
        self._out: IO[bytes] = sys.stdout.buffer if destination == "-" else self._open_temp()
        self._entries = 0

    def _open_temp(self) -> IO[bytes]:
        path = Path(self._destination)
        temp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Mode 0o666 less the umask, as a plainly written file gets (a temp file would be 0o600).
            # One write per entry (a few KB): a 256 KB buffer instead of 8 KB makes far fewer write calls.
            handle = os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb", buffering=1 << 18)
        except OSError as exc:
            raise self._error(exc) from None
        self._temp = temp
        return handle

    def add(self, entry: ReportEntry) -> None:
        """Write one entry: its compact JSON, the samples copied as they were stored."""
        # The opening is written with the first entry, so an error before any entry leaves stdout empty.
        opening, json = b"," if self._entries else b'{"entries":[', entry.json_bytes()
        if len(json) > _JOINED:  # not copied to join the opening to it
            self._put(opening)
        self._put(json if len(json) > _JOINED else opening + json)  # one write per entry
        self._entries += 1

    def finish(self, report: Report) -> None:
        """Write the header keys of `report` (its `entries` are not written) and publish the file."""
        header = report.header_json()
        self._put((b"]," if self._entries else b'{"entries":[],') + header[1:] + b"\n")
        try:
            self._out.flush()
            if self._temp is not None:
                self._out.close()
                os.replace(self._temp, self._destination)
                self._temp = None
        except OSError as exc:
            raise self._error(exc) from None

    def abort(self) -> None:
        """Drop an unfinished file (stdout is left as it is)."""
        if self._temp is not None:
            self._out.close()
            self._temp.unlink(missing_ok=True)
            self._temp = None

    def _put(self, data: bytes) -> None:
        if self._destination == "-":
            # Recorded text quoted in the report must not drive a terminal: C1, DEL and bidi
            # characters (which JSON leaves raw) become \u escapes, the same JSON once parsed.
            data = json_safe_bytes(data)
        try:
            self._out.write(data)
        except OSError as exc:
            raise self._error(exc) from None

    def _error(self, exc: OSError) -> Exception:
        if isinstance(exc, BrokenPipeError) and self._destination == "-":
            return exc  # the reader of stdout went away: not a problem with the destination given
        return InputError(f"{self._destination}: cannot write the JSON report: {exc.strerror or exc}")


def for_target(target: ReportTarget) -> ReportWriter:
    """The `json` format (`formats.FORMATS`)."""
    return ReportWriter(target.destination)
