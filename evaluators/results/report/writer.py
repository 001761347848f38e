"""What every report writer receives: typed entries, one at a time, in report order, then the header.

Scored samples wait on disk as compact JSON until their entry is written, so memory does not grow
with the number of traces. A `ReportEntry` is typed (`result()` gives the `EntryResult`, parsing
the waiting JSON only then) and keeps that JSON beside it (`json_chunks()`), so the JSON
writer copies it without parsing. A new format is a module with a class satisfying
`ReportFormat`, its `for_target`, and one row in `formats.FORMATS` (which also feeds several formats at once).

The engine parks each sample as a *record* (`park`): its JSON plus a side part for writers that
want the sample's values without parsing that JSON (the score store's rows). An entry a scoring
worker decided comes as its JSON up to its samples and the fields the store's rows repeat
(`ReportEntry.decided`, `entry_head`, `EntryFields`): the parent makes no model of it unless a writer asks.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate
from typing import Any, NamedTuple, Protocol, Self

from pydantic_core import to_json

from evaltrace.evaluators.results.report.model import EntryResult, EntryStatus, Report

_LENGTH = struct.Struct("<I")


def park(json: bytes, side: bytes) -> bytes:
    """One sample's record: its compact JSON and a side part, as `Parked` reads them back."""
    return _LENGTH.pack(len(json)) + json + side


class Parked(NamedTuple):
    """Records (see `park`) where they wait, in order: `data` and each one's (offset, length, head) in it.

    `head`: how many bytes of a record's JSON come before its sample's (an entry's head, parked with
    the sample that was its case's whole entry). Many samples' JSON is sliced out and joined at once,
    a slice per sample and no read or copy of its own.
    """

    data: bytes
    at: Sequence[tuple[int, int, int]]

    @classmethod
    def of(cls, records: Sequence[bytes]) -> Parked:
        """Records held in memory, in order."""
        offsets = accumulate((len(record) for record in records), initial=0)  # one more than the records
        return cls(b"".join(records), [(at, len(record), 0) for at, record in zip(offsets, records, strict=False)])

    def json(self, before: bytes = b"", after: bytes = b"") -> bytes:
        """The samples' JSON (heads left out) comma-joined, the items of an entry's `samples`, between two ends."""
        with memoryview(self.data) as data:  # slices of a view copy nothing: `join` copies each sample once
            pieces = [piece for at, end, head in self._json_spans(data) for piece in (b",", data[at + head : end])]
            pieces[:1] = [before]  # the first comma's place (or, for no sample, before the end)
            pieces.append(after)
            return b"".join(pieces)

    def samples(self) -> Iterator[tuple[int, bytes]]:
        """Each record's head length and JSON (its head included), in order."""
        for offset, end, head in self._json_spans(self.data):
            yield head, self.data[offset:end]

    def sides(self) -> list[bytes]:
        """The records' side parts, in order."""
        spans = zip(self._json_spans(self.data), self.at, strict=True)
        return [self.data[end : offset + length] for (_, end, _), (offset, length, _) in spans]

    def _json_spans(self, data: bytes | memoryview) -> list[tuple[int, int, int]]:
        """Per record, where its JSON starts and ends in `data`, and its head's length."""
        unpack, size = _LENGTH.unpack_from, _LENGTH.size
        return [(offset + size, offset + size + unpack(data, offset)[0], head) for offset, _, head in self.at]


class EntryFields(NamedTuple):
    """An entry's own values, without its scores and samples: what the score store's rows repeat."""

    case_id: str | None
    tier: str | None
    tags: tuple[str, ...]
    rule: str | None
    status: EntryStatus
    passed: bool | None
    pass_rate: float | None

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> EntryFields:
        """An entry's fields, from its fields by name (as `EntryResult` takes them, or `model_dump` gives them)."""
        tags, verdict = tuple(fields["tags"]), (fields["status"], fields["passed"], fields["pass_rate"])
        return cls(fields["case_id"], fields["tier"], tags, fields["rule"], *verdict)


def entry_head(fields: Mapping[str, Any], scores: bytes | None = None) -> bytes:
    """An entry's compact JSON object up to its samples' (`...,"samples":[`: they come last), made without a model.

    Args:
        fields: every field but `samples`, in `EntryResult`'s order and types, as its `model_dump`
            gives them: the JSON is theirs dumped by pydantic's serializer (`EntryResult`'s bytes).
        scores: its scores as a JSON list (as `decide_case_json` keeps them), `fields["scores"]` being empty.

    Raises:
        ValueError: `scores` given for an entry that has its own.
    """
    if scores is not None and fields["scores"]:
        raise ValueError("an entry given its scores as JSON must leave its own scores empty")
    head = to_json(fields, inf_nan_mode="null")
    if scores is not None:
        head = with_scores(head, scores)
    return head[:-1] + b',"samples":['


class ReportEntry:
    """One entry of the report as the engine hands it to the writers.

    An entry comes whole (`of`), as its JSON (`from_json`), or as a scoring worker `decided` it: its
    JSON up to its samples, its fields, and its samples' records, read from disk on first use.
    `result()` parses the entry at most once and its JSON is made once, so an entry given to
    several writers (`formats.FanOut`) is read and parsed once for all of them.
    """

    __slots__ = ("_entry", "_json", "_result", "_head", "_parked", "stored")

    def __init__(
        self, entry: EntryResult | None, json: bytes | None, head: tuple[bytes, EntryFields] | None = None
    ) -> None:
        self._entry = entry
        self._json = json
        self._head = head
        """A `decided` entry's JSON up to its samples and its fields."""
        self._parked: Callable[[], Parked] | Parked | None = None
        """A `decided` entry's samples: their reader, then (once read) their records."""
        self._result: EntryResult | None = entry
        self.stored = False
        """Its score-store rows were given to the store already (`StoreWriter.add_rows`)."""

    @classmethod
    def of(cls, entry: EntryResult) -> ReportEntry:
        """An entry held whole in memory."""
        return cls(entry, None)

    @classmethod
    def from_json(cls, payload: bytes, *, stored: bool = False) -> ReportEntry:
        """An entry given as its compact JSON object (parsed only if `result()` is asked); `stored`: see `stored`."""
        entry = cls(None, payload)
        entry.stored = stored
        return entry

    @classmethod
    def decided(cls, head: bytes, fields: EntryFields, samples: Callable[[], Parked]) -> ReportEntry:
        """An entry given as its JSON up to its samples (`entry_head`) and its fields, with its samples' records.

        The records (see `park`) are read on first use. A scoring worker decided the entry:
        nothing is parsed unless `result()` is asked.
        """
        entry = cls(None, None, (head, fields))
        entry._parked = samples
        return entry

    def fields(self) -> EntryFields | None:
        """The entry's fields when it was `decided`, else `None`."""
        return self._head[1] if self._head is not None else None

    def sides(self) -> list[bytes] | None:
        """The side parts of the samples' records, in order; `None` unless every record has one."""
        parked = self._samples()
        sides = parked.sides() if parked is not None else None
        return None if sides is None or not all(sides) else sides

    def result(self) -> EntryResult:
        """The entry, samples included: parsed from its JSON (once), as a reader of the JSON report sees it."""
        if self._result is None:
            self._result = EntryResult.model_validate_json(self.json_bytes())
        return self._result

    def json_bytes(self) -> bytes:
        """The entry's compact JSON object, made once: the samples' JSON copied as stored."""
        if self._json is None:
            parked = self._samples()
            if parked is not None and self._head is not None:
                self._json = parked.json(self._head[0], b"]}")
            else:
                assert self._entry is not None
                self._json = self._entry.model_dump_json().encode()
        return self._json

    def _samples(self) -> Parked | None:
        if self._parked is not None and not isinstance(self._parked, Parked):
            self._parked = self._parked()
        return self._parked


_NO_SCORES = b',"scores":[],'


def with_scores(head: bytes, scores: bytes) -> bytes:
    """An entry's or a sample's JSON object (scores empty) with `scores` as its scores.

    The first `,"scores":[],` is the key's: inside a JSON string every quote is escaped, so a quote
    after a comma is a string's start, and only a key's string is followed by a colon.
    """
    at = head.index(_NO_SCORES)
    return b"".join((head[:at], b',"scores":', scores, b",", head[at + len(_NO_SCORES) :]))


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


class AbortOnExit:
    """`with writer:` drops an output left unfinished when the block ends (`abort` after `finish` does nothing)."""

    def abort(self) -> None:
        """Drop the unfinished output (each writer has its own)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()


class Discard:
    """An `EntrySink` dropping the entries: a run whose only output is its summary keeps none in memory."""

    def add(self, entry: ReportEntry) -> None:
        """Drop the entry."""


class EntryList:
    """An `EntrySink` keeping the entries in memory (`scoring.score` without a sink)."""

    def __init__(self) -> None:
        self.entries: list[EntryResult] = []

    def add(self, entry: ReportEntry) -> None:
        """Keep the entry, samples parsed."""
        self.entries.append(entry.result())
