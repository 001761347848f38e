"""Scored results parked on disk until the end of a run, then read back in report order.

The report lists a case's samples (and, without a spec, the entries) by start time, which is
known only once every trace is in, while traces arrive in file order. Keeping every result in
memory until then made scoring memory grow with the run (~19 KB per trace). Instead each result
is written as JSON to an anonymous temporary file as soon as it is scored; memory keeps only a
small index row per result (sort key, offset, length, a tag), and the JSON is read back in order
when the report is written.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC)
_BUFFER = 1 << 18
_pread = getattr(os, "pread", None)
"""Positional reads where the platform has them (not Windows)."""

# (start time, trace id, offset, length, tag): the first two are the report order; the offset
# breaks ties in arrival order, as the stable sort of the in-memory lists did.
_Row = tuple[datetime, str, int, int, int]


class Spill:
    """An append-only file of JSON results, grouped by a key, read back sorted by start time."""

    def __init__(self) -> None:
        # A sample's record is a few KB: an 8 KB buffer (the default) wrote every few samples, 256 KB every ~100.
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="evaltrace-scores-", buffering=_BUFFER)
        self._size = 0
        self._groups: dict[str, list[_Row]] = {}

    def add(self, group: str, start: datetime | None, trace_id: str | None, payload: bytes, tag: int = 0) -> None:
        """Park one result's JSON under `group`; `tag` is a small caller-defined code kept in memory."""
        self._file.write(payload)
        row = (start or _FAR_FUTURE, trace_id or "", self._size, len(payload), tag)
        self._groups.setdefault(group, []).append(row)
        self._size += len(payload)

    def count(self, group: str) -> int:
        """How many results `group` holds."""
        return len(self._groups.get(group, ()))

    def flush(self) -> None:
        """Write what the buffer holds: before a fork, lest the child's copy of the buffer be written again."""
        self._file.flush()

    def records(self, group: str) -> list[bytes]:
        """`group`'s results' JSON, by start time then trace id (what `ordered` gives, without the tags)."""
        rows = self._groups.get(group)
        if not rows:
            return []
        self._file.flush()
        if _pread is not None:  # one call per result, and the file position is left alone
            fd = self._file.fileno()
            return [_pread(fd, length, offset) for _, _, offset, length, _ in (sorted(rows) if len(rows) > 1 else rows)]
        return [payload for _, payload in self.ordered(group)]

    def ordered(self, group: str) -> Iterator[tuple[int, bytes]]:
        """`group`'s results as (tag, JSON), by start time then trace id, one read at a time."""
        rows = sorted(self._groups.get(group, ()))
        self._file.flush()
        for _, _, offset, length, tag in rows:
            self._file.seek(offset)
            yield tag, self._file.read(length)
        self._file.seek(0, 2)  # back to the end, should more results be added

    def close(self) -> None:
        """Delete the file (it is anonymous: closing removes it)."""
        self._file.close()
        self._groups.clear()

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
