"""What every report writer receives: typed entries, one at a time, in report order, then the header.

Scored samples wait on disk as compact JSON until their entry is written, so memory does not grow
with the number of traces. A `ReportEntry` is typed (`result()` gives the `EntryResult`, parsing
the waiting JSON only then) and keeps that JSON beside it (`json_chunks()`), so the JSON
writer copies it without parsing. A new format is a module with a class satisfying
`ReportFormat` and one line in `formats.FORMATS` (which also feeds several formats at once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from evaltrace.evaluators.report.model import EntryResult, Report


class ReportEntry:
    """One entry of the report as the engine hands it to the writers."""

    __slots__ = ("_entry", "_json", "_samples")

    def __init__(
        self, entry: EntryResult | None, json: bytes | None, samples: Callable[[], Iterable[bytes]] | None
    ) -> None:
        self._entry = entry
        self._json = json
        self._samples = samples

    @classmethod
    def of(cls, entry: EntryResult) -> ReportEntry:
        """An entry held whole in memory."""
        return cls(entry, None, None)

    @classmethod
    def from_json(cls, payload: bytes) -> ReportEntry:
        """An entry given as its compact JSON object (parsed only if `result()` is asked)."""
        return cls(None, payload, None)

    @classmethod
    def with_samples(cls, entry: EntryResult, samples: Callable[[], Iterable[bytes]]) -> ReportEntry:
        """`entry` (its `samples` left empty) with its samples' JSON objects, read from disk on each call."""
        return cls(entry, None, samples)

    def result(self) -> EntryResult:
        """The entry, samples included: parsed from its JSON, as a reader of the JSON report sees it."""
        if self._entry is not None and self._samples is None:
            return self._entry
        return EntryResult.model_validate_json(b"".join(self.json_chunks()))

    def json_chunks(self) -> Iterator[bytes]:
        """The entry as the pieces of its compact JSON object: the samples' JSON copied as stored."""
        if self._json is not None:
            yield self._json
            return
        assert self._entry is not None
        if self._samples is None:
            yield self._entry.model_dump_json().encode()
            return
        head = self._entry.model_dump_json(exclude={"samples"}).encode()
        yield head[:-1] + b',"samples":['
        for index, payload in enumerate(self._samples()):
            yield b"," + payload if index else payload
        yield b"]}"


class EntrySink(Protocol):
    """Where the engine sends the entries, in report order."""

    def add(self, entry: ReportEntry) -> None:
        """Take one entry."""


class ReportFormat(EntrySink, Protocol):
    """A report writer: the entries as they come, then the header once scoring is done."""

    def finish(self, report: Report) -> None:
        """Write `report`'s header (its `entries` were given to `add`) and publish the output."""

    def abort(self) -> None:
        """Drop an unfinished output."""


class EntryList:
    """An `EntrySink` keeping the entries in memory (for `score_traces`)."""

    def __init__(self) -> None:
        self.entries: list[EntryResult] = []

    def add(self, entry: ReportEntry) -> None:
        """Keep the entry, samples parsed."""
        self.entries.append(entry.result())
