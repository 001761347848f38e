"""The Ray engine's entries folder: the tasks' entries as files, read by the driver in report order.

With a spec, each task of the entries stage (`ray_entries.py`) writes its partition's entries'
JSON in report order (`write_json`) and the driver reads the partitions in turn (`read_json`).

Without a spec each trace is its own entry and the report lists them by start time, then trace id.
Each task (a group of Ray Data's path, or a shard's task) sorts its entries so and writes them to
a file of the run's entries folder (`write_sorted`), returning only its router's hand-over and its
run statistics. The driver merges the tasks' files (`SortedParts.ordered`, read one entry at a
time from each) into the writers, as a local run reads its spill back: it receives no entry from
Ray and parks none. The nodes write into a folder the driver made (`TMPDIR` on the driver's
machine): a cluster of several machines needs it on a filesystem they share, as the span files.
"""

from __future__ import annotations

import heapq
import os
import secrets
import shutil
import struct
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evaltrace.evaluators.engine._spill import Spill

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


def write_sorted(folder: Path, key: int, rows: Sequence[_Row]) -> None:
    """Task `key`'s entries in report order as one file of `folder`; whole or not at all (a re-run task)."""
    keyed = sorted((_micros(start), trace or "", index) for index, (_, start, trace, _, _) in enumerate(rows))
    hidden = folder / f".sorted-{key:05d}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    with hidden.open("wb") as out:
        for micros, trace, index in keyed:
            name, payload, tag = trace.encode(), rows[index][3], rows[index][4]
            out.write(_HEAD.pack(micros, len(name), tag, len(payload)) + name + payload)
    os.replace(hidden, folder / f"sorted-{key:05d}")


def write_json(folder: Path, part: int, entries: Iterable[bytes]) -> None:
    """Partition `part`'s entries' JSON, each after its length, as one file; whole or not at all (a re-run task)."""
    name = f"entries-{part:05d}"
    hidden = folder / f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    with hidden.open("wb") as out:
        for payload in entries:
            out.write(_LENGTH.pack(len(payload)) + payload)
    os.replace(hidden, folder / name)


def read_json(folder: Path, part: int) -> Iterator[bytes]:
    """Partition `part`'s entries' JSON as `write_json` wrote them, one entry at a time."""
    with (folder / f"entries-{part:05d}").open("rb") as source:
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
        self.folder = Path(tempfile.mkdtemp(prefix="evaltrace-ray-entries-")).resolve()

    def ordered(self, group: str) -> Iterator[tuple[int, bytes]]:
        """Every task's entries as (tag, JSON), by start time then trace id, one read at a time from each file."""
        assert not self.count(group), "a run without a spec parks no entry on the driver"
        files = sorted(self.folder.glob("sorted-*"))
        streams = [read_sorted(path, int(path.name.removeprefix("sorted-"))) for path in files]
        for *_, tag, payload in heapq.merge(*streams):
            yield tag, payload

    def close(self) -> None:
        """Remove the folder and the spill's file."""
        shutil.rmtree(self.folder, ignore_errors=True)
        super().close()
