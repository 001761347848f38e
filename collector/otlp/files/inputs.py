"""PATH arguments to run files: the one place they are resolved, OTLP files imported as a step of it.

A command resolves its PATH arguments once, here, and hands the `RunFiles` on: the reader, the
traces cache, the engine and the HTML report read those files and never look at a PATH again.

A PATH is a file, a folder (every `*.parquet` directly inside) or a glob (`runs/*.parquet`,
`runs/**/*.parquet`); with `uris=True` also a URI (`file:///runs`, `s3://bucket/run`: one file, or
a folder's `*.parquet` files; no globs), which only the `ray` engine's nodes read. A file holding
OTLP (JSON lines or protobuf, plain or gzip: told by its content, `framing.sniff`) stands for the
run files it is imported into, once, in the cache (`import_cache.py`).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import overload

import pyarrow as pa

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files import framing
from evaltrace.collector.runfiles.inflight import is_inflight
from evaltrace.collector.runfiles.reader import folder_span_files, split_signals
from evaltrace.collector.runfiles.runfiles import Location, is_uri

__all__ = ["PathArg", "RunFiles", "resolve_paths"]

PathArg = str | os.PathLike[str]
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class RunFiles(Sequence[Path]):
    """Resolved PATH arguments: the local run files, in name order, each once (a `Sequence[Path]`)."""

    files: tuple[Path, ...]
    imported: tuple[Path, ...] = ()
    """The OTLP files among the PATHs, imported into run files (which are in `files`)."""
    uris: tuple[str, ...] = ()
    """Run files named by URI (`resolve_paths(..., uris=True)` only): for readers that take them."""

    @overload
    def __getitem__(self, index: int) -> Path: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Path]: ...
    def __getitem__(self, index: int | slice) -> Path | Sequence[Path]:
        return self.files[index]

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self) -> Iterator[Path]:
        return iter(self.files)

    @cached_property
    def _signals(self) -> tuple[list[Path], list[Path]]:
        return split_signals(self.files)  # reads each file's footer: once per resolution

    @property
    def span_files(self) -> list[Path]:
        """The span files among `files` (by content)."""
        return self._signals[0]

    @property
    def log_files(self) -> list[Path]:
        """The log-record files among `files` (by content)."""
        return self._signals[1]

    @property
    def locations(self) -> list[Location]:
        """`files` and `uris` together, in name order."""
        found: list[Location] = [*self.files, *self.uris]
        return sorted(found, key=lambda loc: (_name(loc), str(loc)))


def resolve_paths(paths: Iterable[PathArg] | RunFiles, *, fresh_imports: bool = False, uris: bool = False) -> RunFiles:
    """Expand PATH arguments into the run files they name, de-duplicated, in name order.

    Args:
        paths: files, folders (their `*.parquet` files) or glob patterns; OTLP files are imported.
            `RunFiles` are resolved already: returned as they are (an entry point handed them on).
        fresh_imports: import OTLP files again even when the cache holds them (`--no-cache`).
        uris: also take URIs (into `RunFiles.uris`); otherwise a URI is a path like any other.

    Raises:
        InputError: no argument given, a path that does not exist, a glob matching no file, a
            folder without `*.parquet` files, an OTLP file that cannot be read (named with its
            line), or a URI naming nothing or no filesystem pyarrow knows.
    """
    if isinstance(paths, RunFiles):
        return paths
    given = [str(arg) for arg in paths]
    remote = [arg for arg in given if uris and is_uri(arg)]
    found: dict[str, Path] = {}
    imported: list[Path] = []
    empty: list[Path] = []  # OTLP files holding no span or log record
    for arg in given:
        for path in [] if arg in remote else _expand(arg):
            run_files = _run_files(path, fresh_imports, imported)
            for run_file in run_files:
                found.setdefault(os.path.realpath(run_file), run_file)
            if not run_files:
                empty.append(path)
    if not given:
        raise InputError("no PATH given: name span files, a folder of them (e.g. runs) or a glob (runs/*.parquet)")
    if not found and not remote and empty:  # said here: an empty list would read as "no PATH given" further on
        raise InputError(f"{empty[0]}: no spans or log records in this OTLP file")
    listed = dict.fromkeys(location for uri in remote for location in _uri_files(uri))
    return RunFiles(
        files=tuple(sorted(found.values(), key=lambda p: (p.name, str(p)))),
        imported=tuple(imported),
        uris=tuple(listed),
    )


def _run_files(path: Path, fresh: bool, imported: list[Path]) -> list[Path]:
    """`path` itself, or the run files an OTLP file is imported into (noted in `imported`)."""
    fmt = framing.sniff(path)
    if fmt is None:
        return [path]
    from evaltrace.collector.otlp.files.import_cache import imported_files  # deferred: loads the OTLP decoder

    imported.append(path)
    return imported_files(path, fmt, fresh=fresh)


def _expand(arg: str) -> list[Path]:
    if any(c in _GLOB_CHARS for c in arg):
        matches = [Path(m) for m in glob.glob(arg, recursive=True)]
        files = [m for m in matches if m.is_file() and not is_inflight(m)]
        if not files:
            raise InputError(f"no files match {arg!r}")
        return files
    path = Path(arg)
    if path.is_dir():
        return _folder_files(path)
    if path.is_file():
        return [path]
    if path.exists():  # a device or a pipe (`<(cat f)`): Parquet is read from the end, so needs a file
        raise InputError(f"{arg}: not a regular file or folder")
    raise InputError(f"{arg}: no such file or folder")


def _folder_files(folder: Path) -> list[Path]:
    files = folder_span_files(folder)
    if not files:
        inflight = sum(1 for p in folder.iterdir() if is_inflight(p))
        hint = f" ({inflight} in-flight temporary file(s): a writer may still be running)" if inflight else ""
        if not hint and any(p.is_file() and not p.name.startswith(".") for p in folder.iterdir()):
            hint = f" (OTLP files are read when named: {folder / '*.jsonl'}, for instance)"
        raise InputError(f"{folder}: no *.parquet files in this folder{hint}")
    return files


def _name(location: Location) -> str:
    return location.name if isinstance(location, Path) else location.rstrip("/").rsplit("/", 1)[-1]


def _uri_files(uri: str) -> list[str]:
    from pyarrow import fs as pafs

    try:
        filesystem, inner = pafs.FileSystem.from_uri(uri)
        info = filesystem.get_file_info(inner)
        if info.type == pafs.FileType.Directory:
            listed = filesystem.get_file_info(pafs.FileSelector(inner))
            names = [i.base_name for i in listed if i.type == pafs.FileType.File and i.extension == "parquet"]
            if not names:
                raise InputError(f"{uri}: no *.parquet files in this folder")
            return [f"{uri.rstrip('/')}/{name}" for name in names if not name.startswith(".")]
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"{uri}: cannot be listed ({' '.join(str(exc).split())})") from None
    if info.type != pafs.FileType.File:
        raise InputError(f"{uri}: no such file or folder")
    return [uri]
