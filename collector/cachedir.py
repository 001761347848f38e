"""The one cache: where evaltrace keeps what it can rebuild or ask again, and how it keeps it.

Four users keep entries here, each in its namespace (a folder under the root, `NAMESPACES`):
`traces/` (traces tables, `traces/cache.py`), `imports/` (imported OTLP files,
`otlp/files/import_cache.py`), `judge/` (judge verdicts, `evaluators/scoring/judge/cache.py`) and
`specs/` (compiled specs, `evaluators/scoring/spec/cache.py`).
This module is shared by every stage and imports none of them.

Root. `cache_root()`: `EVALTRACE_CACHE_DIR`, else `$XDG_CACHE_HOME/evaltrace`, else
`~/.cache/evaltrace` (the one place these variables are read). The score store
(`.evaltrace/store`) is user data, not a cache, and lives elsewhere.

Privacy. The entries hold recorded content and verdicts and are read back as evaltrace wrote them,
so the root must be the user's alone: `private_root` creates it with mode 0700 and checks an
existing one before each use. A root owned by another user, or one that group or others may write,
is not used (a warning names it, once per process; the users go on without their cache): whoever
can write it decides what is scored. One that group or others
may only read (earlier versions created it 0755) is made 0700, with a warning saying so. No entry
holds a secret: what keys an entry is what its user passes to `entry_key`.

Keys. `entry_key` is the one keying rule: a SHA-256 of the input files' identities
(`file_identity`: resolved path, inode, size, mtime and ctime in ns), a version and a digest of
whatever else the entry depends on (configuration, content, `source_digest`). Nothing can set a
file's ctime back: a file replaced in place (tar or `cp -p` over it, `rsync -t`), even with the
same size, mtime and inode, gets a new ctime and so a new key. The device number is left out: the
nodes of a Ray cluster share one root and see the same network file system under other numbers.

Writes. An entry (a file, or a folder of files) is written under a hidden temporary name in its
namespace and renamed into place when complete (`Namespace.temp`, `Namespace.publish`,
`Namespace.write`), so a reader sees a whole entry or none, and two processes writing one key
both succeed: a file's last rename wins (both wrote the same thing), a folder's first.

Pruning. One rule over the whole root: past `MAX_BYTES` of entries, the least recently used
(oldest mtime; a read touches its entry) are removed first, whatever their namespace, except those
used in the last `IN_USE_S` (a scoring may still be reading them) and the one just written. A
process prunes after its first write and then after each `MAX_BYTES // 64` it has written, so
small entries (verdicts) do not each walk the root. `clear` removes every entry of every
namespace (`evaltrace clean --cache`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from evaltrace.collector.settings import Environment

logger = logging.getLogger("evaltrace")

CACHE_DIR_ENV: Final = "EVALTRACE_CACHE_DIR"
NAMESPACES: Final = {
    "traces": "traces tables",
    "imports": "imported OTLP files",
    "judge": "judge verdicts",
    "specs": "compiled specs",
}
"""The namespaces under the root, with what their entries are (said by `evaltrace clean --cache`)."""
MAX_BYTES: Final = 8 << 30
"""Past this much of entries under the root, the least recently used are removed."""
IN_USE_S: Final = 3600.0
"""An entry used this recently is never pruned: a scoring may still be reading it."""
TEMP_SUFFIX: Final = ".tmp"
_warned: set[str] = set()
_unpruned: list[int | None] = [None]
"""Bytes this process wrote since it last pruned (`None`: it has not pruned yet)."""


def cache_root() -> Path:
    """The root: `EVALTRACE_CACHE_DIR`, else `$XDG_CACHE_HOME/evaltrace`, else `~/.cache/evaltrace`."""
    configured = Environment.from_env().cache_dir
    if configured is not None:
        return configured.expanduser()
    # XDG_CACHE_HOME is the XDG base-directory specification's, not evaltrace's: read as every XDG tool reads it.
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "evaltrace"


def private_root(root: Path | None = None) -> Path | None:
    """The root (`root`, else `cache_root()`), created 0700; `None` when it must not be used (see Privacy above).

    A root that cannot be created is returned all the same: its users log that they cannot write
    there and go on without it.
    """
    folder = root if root is not None else cache_root()
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        found = folder.stat()
    except OSError:
        return folder  # unwritable: each user says so (at info level) and works without it
    mode = stat.S_IMODE(found.st_mode)
    if found.st_uid != os.getuid() or mode & 0o022:
        _warn_once(
            folder,
            f"evaltrace: cache folder {folder} is not private (mode {mode:o}, owner uid {found.st_uid}); "
            f"going on without the cache (make it yours and `chmod 700` it, or set {CACHE_DIR_ENV})",
        )
        return None
    if mode & 0o055:
        try:
            folder.chmod(0o700)
        except OSError:
            return folder
        _warn_once(folder, f"evaltrace: cache folder {folder} was readable by others (mode {mode:o}); made it 0700")
    return folder


def _warn_once(folder: Path, message: str) -> None:
    if str(folder) not in _warned:
        _warned.add(str(folder))
        logger.warning("%s", message)


def file_identity(path: Path) -> list[object]:
    """What an input file is known by (see the module docstring); raises `OSError` if it cannot be read."""
    found = path.stat()
    return [os.path.realpath(path), found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns]


def entry_key(*, version: object, digest: object, files: Sequence[Path] = ()) -> str:
    """The name of the entry for `files` (in order) at `version` with `digest` (JSON values); raises `OSError`."""
    described = {"files": [file_identity(path) for path in files], "version": version, "digest": digest}
    blob = json.dumps(described, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@functools.cache
def source_digest(*rooms: str, package: str = "collector") -> str:
    """Size and mtime of every source file of these rooms of `package`: an edited checkout misses its old entries.

    `package`: `collector` or `evaluators` (by name: this module imports no stage).
    """
    base = Path(__file__).resolve().parent.parent / package
    digest = hashlib.sha256()
    for path in sorted(source for room in rooms for source in (base / room).rglob("*.py")):
        found = path.stat()
        digest.update(f"{path.relative_to(base)}:{found.st_size}:{found.st_mtime_ns};".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class Namespace:
    """One user's folder under a private root. Make it with `Namespace.open`."""

    name: str
    root: Path

    @classmethod
    def open(cls, name: str, root: Path | None = None) -> Namespace | None:
        """The namespace `name` under `root` (else `cache_root()`); `None` when the root is not private."""
        if name not in NAMESPACES:
            raise ValueError(f"unknown cache namespace {name!r}; valid: {', '.join(NAMESPACES)}")
        base = private_root(root)
        return None if base is None else cls(name, base)

    @property
    def folder(self) -> Path:
        """Where the entries are: `<root>/<name>`."""
        return self.root / self.name

    def entry(self, key: str, suffix: str = "") -> Path:
        """The path of the entry named `key`."""
        return self.folder / f"{key}{suffix}"

    def temp(self, entry: Path) -> Path:
        """A fresh hidden name beside `entry` to write it under; raises `OSError` if the folder cannot be made."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self.folder / f".{entry.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}"

    def publish(self, temp: Path, entry: Path) -> None:
        """Rename the complete `temp` to `entry`, then prune if due (see the module docstring).

        A file replaces an entry there; a folder does not (another process published it first, as
        good as ours: `temp` is removed). Raises `OSError` when a file cannot be renamed.
        """
        if temp.is_dir():
            try:
                os.rename(temp, entry)
            except OSError:
                shutil.rmtree(temp, ignore_errors=True)
        else:
            os.replace(temp, entry)
        _written(self.root, entry)

    def write(self, entry: Path, data: bytes) -> None:
        """Write a file entry atomically (flushed to disk before the rename); raises `OSError`."""
        temp = self.temp(entry)
        try:
            with open(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            self.publish(temp, entry)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    def discard(self, entry: Path) -> None:
        """Remove `entry` (a file or a folder), moved aside first so no reader sees it half removed."""
        aside = self.folder / f".{entry.name}.{os.getpid()}.{secrets.token_hex(4)}.old{TEMP_SUFFIX}"
        try:
            os.rename(entry, aside)
        except OSError:
            return  # gone already: another process replaced or removed it
        _remove(aside)


def touch(entry: Path) -> None:
    """Mark `entry` as just used: pruning removes the least recently used first."""
    with contextlib.suppress(OSError):  # a read-only cache is still usable
        os.utime(entry)


def _written(root: Path, entry: Path) -> None:
    """Count `entry` as written by this process, and prune the root when that is due."""
    unpruned = _unpruned[0]
    total = (unpruned or 0) + _size(entry)
    if unpruned is not None and total < MAX_BYTES // 64:
        _unpruned[0] = total
        return
    _unpruned[0] = 0
    prune(root, keep=entry)


def prune(root: Path, *, keep: Path | None = None) -> None:
    """Remove the least recently used entries under `root` until they hold at most `MAX_BYTES`.

    Never `keep`, nor an entry used in the last `IN_USE_S`; unfinished writes are not entries.
    """
    try:
        entries = [(path.stat().st_mtime, _size(path), path) for path in _entries(root)]
    except OSError as exc:  # another process pruning at the same time
        logger.info("evaltrace cache: pruning %s: %s", root, exc)
        return
    total = sum(size for _, size, _ in entries)
    recent = time.time() - IN_USE_S
    for mtime, size, path in sorted(entries, key=lambda item: item[0]):
        if total <= MAX_BYTES or mtime > recent:
            break
        if path != keep:
            _remove(path)
            total -= size


def _entries(root: Path, *, unfinished: bool = False) -> Iterator[Path]:
    """The entries of every namespace under `root` (with `unfinished`: the temporary names too)."""
    for name in NAMESPACES:
        folder = root / name
        if folder.is_dir():
            yield from (path for path in folder.iterdir() if unfinished or not path.name.startswith("."))


def _size(entry: Path) -> int:
    """Bytes of an entry: a file, or a folder of files."""
    try:
        if entry.is_dir():
            return sum(path.stat().st_size for path in entry.iterdir())
        return entry.stat().st_size
    except OSError:
        return 0


def _remove(entry: Path) -> None:
    if entry.is_dir():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


@dataclass(frozen=True)
class Removed:
    """What `clear` removed from one namespace."""

    entries: int
    bytes: int


def clear(root: Path | None = None) -> dict[str, Removed]:
    """Remove every entry (and unfinished write) of every namespace under the root: what was removed, by namespace."""
    base = root if root is not None else cache_root()
    removed = {name: Removed(0, 0) for name in NAMESPACES}
    for path in _entries(base, unfinished=True):
        size = _size(path)
        try:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            logger.warning("evaltrace cache: cannot remove %s: %s", path, exc)
            continue
        was = removed[path.parent.name]
        removed[path.parent.name] = Removed(was.entries + (not path.name.startswith(".")), was.bytes + size)
    return removed
