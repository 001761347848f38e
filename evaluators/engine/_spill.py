"""Scored results parked on disk until the end of a run, then read back in report order.

The report lists a case's samples (and, without a spec, the entries) by start time, which is
known only once every trace is in, while traces arrive in file order. Keeping every result in
memory until then made scoring memory grow with the run (~19 KB per trace). Instead each result
is written as JSON to an anonymous temporary file soon after it is scored (results are held by
group up to a few MB, so that a group's lie in a few runs); memory keeps only a small index row per
result (sort key, offset, length, a tag), and the JSON is read back in order when the report is written.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import IO

from evaltrace.evaluators.results.report.writer import Parked

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
_BUFFER = 1 << 18
_HELD = 2 << 20
"""Bytes of results held in memory, by group, before they are written (see `_Group`)."""
_pread = getattr(os, "pread", None)
"""Positional reads where the platform has them (not Windows): the file's position is left alone."""

# (start time, trace id, offset in its group, length, tag): the first two are the report order; the
# offset breaks ties in arrival order, as the stable sort of the in-memory lists did.
_Row = tuple[datetime, str, int, int, int]
Added = tuple[str, datetime | None, str | None, bytes, int]
"""One result as `Spill.add_rows` takes it: group, start, trace id, JSON, a tag (a small code kept in memory)."""


class _Group:
    """One group's results: their index rows, the runs of them written to the file, those not written yet.

    Results arrive mixed (a worker's message holds many cases' samples); held by group until `_HELD`
    bytes wait, each group's are written as one run, so a group is read back in a few reads, not one per result.
    """

    __slots__ = ("rows", "runs", "held", "written")

    def __init__(self) -> None:
        self.rows: list[_Row] = []
        self.runs: list[tuple[int, int]] = []
        """(file offset, length) of each run written."""
        self.held = bytearray()
        self.written = 0
        """The runs' bytes: the offset in the group of the first held byte."""


_NONE = _Group()
"""A group no result was parked under (read only)."""


class Spill:
    """An append-only file of JSON results, grouped by a key, read back sorted by start time."""

    def __init__(self) -> None:
        # Runs of a few KB (many groups, few results each) are written through a 256 KB buffer.
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="evaltrace-scores-", buffering=_BUFFER)
        self._size = 0
        self._held = 0
        self._holding: list[_Group] = []
        """The groups holding results not written yet (of many groups, most may hold none)."""
        self._groups: dict[str, _Group] = {}

    def add_rows(self, rows: Iterable[Added]) -> None:
        """Park results' JSON, each under its group, in order (a worker's message, a batch's kept samples)."""
        groups, held, holding = self._groups, self._held, self._holding
        for group, start, trace_id, payload, tag in rows:
            into = groups.get(group)
            if into is None:  # its first result is written at once: a group of one is never held
                into = groups[group] = _Group()
                self._write(into, payload)
                into.rows.append((start or _FAR_FUTURE, trace_id or "", 0, len(payload), tag))
                continue
            if not into.held:
                holding.append(into)
            into.rows.append((start or _FAR_FUTURE, trace_id or "", into.written + len(into.held), len(payload), tag))
            into.held += payload
            held += len(payload)
        self._held = held
        if held > _HELD:
            self._write_held()

    def _write_held(self) -> None:
        for into in self._holding:
            self._write(into, into.held)
            into.held.clear()
        self._held = 0
        self._holding.clear()

    def _write(self, into: _Group, data: bytes | bytearray) -> None:
        """Write `data` as the group's next run."""
        self._file.write(data)
        into.runs.append((self._size, len(data)))
        self._size += len(data)
        into.written += len(data)

    def count(self, group: str) -> int:
        """How many results `group` holds."""
        into = self._groups.get(group)
        return len(into.rows) if into is not None else 0

    def flush(self) -> None:
        """Write what the file's buffer holds: before a fork, lest the child's copy of the buffer be written again."""
        self._file.flush()

    def parked(self, group: str) -> Parked:
        """`group`'s results (records, see `writer.park`) by start time then trace id, their tags as their heads."""
        into = self._groups.get(group, _NONE)
        rows = sorted(into.rows) if len(into.rows) > 1 else into.rows
        return Parked(self._read(into), [(offset, length, tag) for _, _, offset, length, tag in rows])

    def ordered(self, group: str) -> Iterator[tuple[int, bytes]]:
        """`group`'s results as (tag, JSON), by start time then trace id."""
        data, at = self.parked(group)
        for offset, length, tag in at:
            yield tag, data[offset : offset + length]

    def _read(self, into: _Group) -> bytes:
        """The group's results' bytes, in arrival order: a read per run written, then those held."""
        if not into.runs:
            return bytes(into.held)
        self._file.flush()
        if _pread is not None:  # a forked process reads the file while its parent writes it: no seek
            fd = self._file.fileno()
            runs = [_pread(fd, length, offset) for offset, length in into.runs]
        else:
            runs = [self._read_at(offset, length) for offset, length in into.runs]
        return runs[0] if len(runs) == 1 and not into.held else b"".join([*runs, into.held])

    def _read_at(self, offset: int, length: int) -> bytes:
        self._file.seek(offset)
        data = self._file.read(length)
        self._file.seek(0, 2)  # back to the end, should more results be added
        return data

    def close(self) -> None:
        """Delete the file (it is anonymous: closing removes it)."""
        self._file.close()
        self._groups.clear()

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
