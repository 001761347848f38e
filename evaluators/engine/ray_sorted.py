"""The Ray engine's entries folder: the tasks' entries as files, read by the driver in report order.

With a spec, each task of the entries stage (`ray_entries.py`) writes its partition's entries'
JSON in report order (`write_json`) and the driver reads the partitions in turn (`read_json`).

Without a spec each trace is its own entry and the report lists them by start time, then trace id.
Each task (a group of Ray Data's path, or a shard's task) sorts its entries so and writes them to
a file of the run's entries folder (`write_sorted`), returning only its router's hand-over and its
run statistics. The driver merges the tasks' files (`SortedParts.ordered`, read one entry at a
time from each) into the writers, as a local run reads its spill back: it receives no entry from
Ray and parks none.

The folder is the driver's (beside the store's parts, else in its `TMPDIR`), which the nodes of a
cluster of several machines may not share. The driver writes a random token in it
(`EntriesFolder`); a task whose node does not find that token there returns its file's bytes with
its result, and the driver writes the file on receipt (`EntriesFolder.keep`), so the report is
read from the same files either way.
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import secrets
import shutil
import struct
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from evaltrace.evaluators.engine._spill import Spill
from evaltrace.evaluators.results.store.writer import StoreParts, store_writer

if TYPE_CHECKING:
    from evaltrace.evaluators.engine._routers import SpecRouter
    from evaltrace.evaluators.engine.scoring import ScoreOptions
    from evaltrace.evaluators.results.report.writer import EntrySink

# A sample row as tasks keep it (`ray_data.ListSpill`): group, start, trace id, JSON, tag.
_Row = tuple[str, datetime | None, str | None, bytes, int]
_HEAD = struct.Struct("<qIBI")
"""Each entry's head in a file: start (microseconds; none: last), trace id's length, tag, JSON's length."""
_LENGTH = struct.Struct("<I")
"""An entry's length before its JSON in the entries stage's files (`write_json`)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST = 2**63 - 1


def _micros(start: datetime | None) -> int:
    """The report's order of `start` as an integer: microseconds since the epoch, no start last."""
    return _LAST if start is None else (start - _EPOCH) // timedelta(microseconds=1)


SORTED, JSON = "sorted-{:05d}", "entries-{:05d}"
"""The names of a task's file: its sorted entries (without a spec), a partition's entries' JSON (with one)."""
_MARKER = ".evaltrace-token"


@dataclasses.dataclass(frozen=True)
class EntriesFolder:
    """The run's entries folder as the tasks get it: its path and the random token the driver wrote there."""

    path: Path
    token: str

    @classmethod
    def made(cls, path: Path) -> EntriesFolder:
        """`path` (an empty folder of the driver's) marked with a new token."""
        token = secrets.token_hex(16)
        (path / _MARKER).write_text(token, encoding="ascii")
        return cls(path, token)

    def seen(self) -> bool:
        """Whether this process sees the driver's folder: its token is there (no guess from the path)."""
        try:
            return (self.path / _MARKER).read_text(encoding="ascii") == self.token
        except (OSError, UnicodeDecodeError):
            return False

    def put(self, name: str, chunks: Iterable[bytes]) -> bytes | None:
        """A task's file `name`: written here if its node sees the folder (`None`), else its bytes for the driver."""
        if not self.seen():
            return b"".join(chunks)
        self.keep(name, chunks)
        return None

    def keep(self, name: str, chunks: Iterable[bytes]) -> None:
        """Write file `name` from `chunks`, whole or not at all (a task Ray re-runs writes it anew)."""
        hidden = self.path / f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        with hidden.open("wb") as out:
            out.writelines(chunks)
        os.replace(hidden, self.path / name)


@dataclasses.dataclass(frozen=True)
class EntryTarget:
    """The entries stage's partitions of the cases, the store's parts and the folder of the entries' JSON.

    `store` is `None` without a score store, `json` without a report writer.
    """

    parts: int
    store: StoreParts | None
    json: EntriesFolder | None = None


def entry_target(router: SpecRouter, count: int, sink: EntrySink | None, options: ScoreOptions) -> EntryTarget:
    """The run's partitions (at most one per case), the store's parts if it is a writer, the entries folder.

    The entries folder (when there are writers) goes beside the store's parts, else in a temporary folder.
    """
    store = store_writer(sink) if options.store_values else None
    parts = store.in_parts() if store is not None else None
    # The nodes do not share the driver's working folder: the folders go absolute.
    located = dataclasses.replace(parts, folder=parts.folder.resolve()) if parts is not None else None
    json = None
    if sink is not None and located is not None:
        json = located.folder.with_suffix(".entries")
        json.mkdir()
    elif sink is not None:
        json = Path(tempfile.mkdtemp(prefix="evaltrace-ray-entries-")).resolve()
    folder = EntriesFolder.made(json) if json is not None else None
    return EntryTarget(max(1, min(count, len(router.selected))), located, folder)


def write_sorted(folder: EntriesFolder, key: int, rows: Sequence[_Row]) -> bytes | None:
    """Task `key`'s entries in report order as one file of `folder` (`EntriesFolder.put`)."""
    keyed = sorted((_micros(start), trace or "", index) for index, (_, start, trace, _, _) in enumerate(rows))
    chunks = (_head(micros, trace, rows[index]) for micros, trace, index in keyed)
    return folder.put(SORTED.format(key), chunks)


def _head(micros: int, trace: str, row: _Row) -> bytes:
    name, payload, tag = trace.encode(), row[3], row[4]
    return _HEAD.pack(micros, len(name), tag, len(payload)) + name + payload


def write_json(folder: EntriesFolder, part: int, entries: Iterable[bytes]) -> bytes | None:
    """Partition `part`'s entries' JSON, each after its length, as one file of `folder` (`EntriesFolder.put`)."""
    return folder.put(JSON.format(part), (_LENGTH.pack(len(payload)) + payload for payload in entries))


def read_json(folder: Path, part: int) -> Iterator[bytes]:
    """Partition `part`'s entries' JSON as `write_json` wrote them, one entry at a time."""
    with (folder / JSON.format(part)).open("rb") as source:
        while header := source.read(_LENGTH.size):
            yield source.read(_LENGTH.unpack(header)[0])


def read_sorted(path: Path, key: int) -> Iterator[tuple[int, str, int, int, int, bytes]]:
    """A file of `write_sorted` one entry at a time: its sort key (start, trace id, task, place), tag, JSON."""
    with path.open("rb") as source:
        place = 0
        while head := source.read(_HEAD.size):
            micros, name, tag, size = _HEAD.unpack(head)
            yield micros, source.read(name).decode(), key, place, tag, source.read(size)
            place += 1


class SortedParts(Spill):
    """The driver's spill for a run without a spec: its `ordered` entries are the tasks' files, merged.

    `folder` is where the tasks write (made here, removed on leaving). Entries parked on the spill
    itself are not read back: every path of a run without a spec writes its entries to the folder.
    """

    def __init__(self) -> None:
        super().__init__()
        self.folder = EntriesFolder.made(Path(tempfile.mkdtemp(prefix="evaltrace-ray-entries-")).resolve())

    def ordered(self, group: str) -> Iterator[tuple[int, bytes]]:
        """Every task's entries as (tag, JSON), by start time then trace id, one read at a time from each file."""
        assert not self.count(group), "a run without a spec parks no entry on the driver"
        files = sorted(self.folder.path.glob("sorted-*"))
        streams = [read_sorted(path, int(path.name.removeprefix("sorted-"))) for path in files]
        for *_, tag, payload in heapq.merge(*streams):
            yield tag, payload

    def close(self) -> None:
        """Remove the folder and the spill's file."""
        shutil.rmtree(self.folder.path, ignore_errors=True)
        super().close()
