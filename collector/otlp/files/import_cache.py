"""Imported OTLP files: each OTLP file given as a PATH is converted into run files once, in the cache.

`imported_files(path, fmt)` returns the run files holding what the OTLP file holds, importing it
(`otlp_import.py`) the first time. Everything downstream (the reader, sharding, the traces cache)
then reads ordinary run files, and scoring the same file again skips the conversion.

Key. A SHA-256 of the file's identity (`cachedir.file_identity`: resolved path, inode, size,
mtime and ctime), `IMPORT_VERSION`, the run-file schema versions, the evaltrace version and
the size and mtime of the decoder's and the store's source files (an edited checkout imports
again). A file that changes gets a new key, so nothing stale is ever read (a file replaced with
the same size, mtime and inode still has a new ctime); a file that changes while it is being
imported is reported, not cached.

Location. `imports/<key>/` in the cache folder (`cachedir.py`, shared with the traces cache);
`evaltrace clean --cache` removes it (`clear_imports`). A cache folder that is not private
(`cachedir.private_root`) is not used: the file is imported into a temporary folder each time.
Past `MAX_IMPORT_BYTES`, the least recently used imports are removed after each new one, except
those used in the last hour.

Safety. An import is written into a hidden temporary folder and renamed to `<key>` once complete,
so a reader never sees half an import; when two processes import the same file at once, the first
rename wins and the other uses its folder. `fresh=True` (`--no-cache`) imports again even when a
folder exists, once per process, and replaces it. When the cache folder cannot be written, the
import goes to a temporary folder removed when the process ends.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Final

from evaltrace.collector.cachedir import cache_root, file_identity, private_root
from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files.framing import OtlpFormat
from evaltrace.collector.otlp.files.importer import ImportTarget, cut_warning, import_otlp, run_label
from evaltrace.collector.runfiles.layout import writer_version
from evaltrace.collector.runfiles.schema import LOGS_SCHEMA_VERSION, SCHEMA_VERSION

logger = logging.getLogger("evaltrace")

IMPORT_VERSION: Final = 2
"""Bump when what an import writes for the same file changes (2: spans held to the SDK's limits)."""
IMPORTS_FOLDER: Final = "imports"
MAX_IMPORT_BYTES: Final = 8 << 30
"""Past this much of imports, the least recently used are removed (never one used in the last `_IN_USE_S`)."""
_IN_USE_S: Final = 3600.0
_TEMP_SUFFIX: Final = ".tmp"
_WARNING_FILE: Final = ".warning"
"""In an import's folder: the warning its import gave (a cut last record), repeated on every read."""
_fresh_this_process: set[str] = set()


def imports_folder(root: Path | None = None) -> Path:
    """Where imported OTLP files are: `imports/` in the cache folder."""
    return (root if root is not None else cache_root()) / IMPORTS_FOLDER


def imported_files(path: Path, fmt: OtlpFormat, *, fresh: bool = False, root: Path | None = None) -> list[Path]:
    """The run files holding the OTLP file `path`'s spans and log records, imported once (see above).

    Args:
        path: an OTLP file (`otlp_frames.sniff` said `fmt`).
        fmt: its layout.
        fresh: import again even if the cache holds the file (once per process).
        root: the cache folder; `cache_root()` when `None`.

    Raises:
        InputError: the file is unreadable, not OTLP, or changed while it was imported.
    """
    identity = _identity(path)
    key = _key(identity)
    base = private_root(root)
    if base is None:  # a cache folder others could write: import for this process only, never read back
        return _run_files(_imported(path, fmt, _scratch_folder(), identity, key))
    folder = imports_folder(base) / key
    if folder.is_dir() and not (fresh and key not in _fresh_this_process):
        _touch(folder)
        _repeat_warning(folder)
        return _run_files(folder)
    temp = _imported(path, fmt, _temp_folder(folder), identity, key)
    _fresh_this_process.add(key)
    published = _publish(temp, folder, replace=fresh)
    _prune(folder.parent, keep=folder)
    return _run_files(published)


def _imported(path: Path, fmt: OtlpFormat, temp: Path, identity: list[object], key: str) -> Path:
    """Import `path` into the folder `temp`; raises if the file changed meanwhile."""
    done = import_otlp(path, fmt, ImportTarget(temp, run_id=run_label(path), writer_id=key[:16]))
    if done.skipped.cut:  # said again whenever the cached import is read: the loss is the file's
        (temp / _WARNING_FILE).write_text(cut_warning(path, done.skipped), encoding="utf-8")
    if _identity(path) != identity:
        shutil.rmtree(temp, ignore_errors=True)
        raise InputError(f"{path}: the file changed while it was read; read it again once it is complete")
    return temp


def _repeat_warning(folder: Path) -> None:
    try:
        logger.warning("%s", (folder / _WARNING_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        pass


def _identity(path: Path) -> list[object]:
    try:
        return file_identity(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file: {exc.strerror or exc}") from None


def _key(identity: list[object]) -> str:
    described = {
        "file": identity,
        "import": IMPORT_VERSION,
        "schemas": [SCHEMA_VERSION, LOGS_SCHEMA_VERSION],
        "evaltrace": writer_version(),
        "source": _source_fingerprint(),
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest()


@functools.cache
def _source_fingerprint() -> str:
    """Size and mtime of every source file of the OTLP decoder and the store (what an import depends on)."""
    collector = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for source in sorted([*(collector / "otlp").rglob("*.py"), *(collector / "store").rglob("*.py")]):
        stat = source.stat()
        digest.update(f"{source.relative_to(collector)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()


def _run_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".parquet" and not p.name.startswith("."))


def _temp_folder(folder: Path) -> Path:
    """A fresh hidden folder beside `folder` (the cache's), or in the system's temporary folder."""
    try:
        folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # private: imports hold recorded content
        temp = folder.parent / f".{folder.name}.{os.getpid()}.{secrets.token_hex(4)}{_TEMP_SUFFIX}"
        temp.mkdir(mode=0o700)
        return temp
    except OSError as exc:
        logger.info("evaltrace: cannot write OTLP imports in %s (%s); using a temporary folder", folder.parent, exc)
        return _scratch_folder()


def _scratch_folder() -> Path:
    """A private temporary folder, removed when this process ends."""
    temp = Path(tempfile.mkdtemp(prefix="evaltrace-import-"))
    atexit.register(_remove_in, os.getpid(), temp)
    return temp


def _remove_in(pid: int, folder: Path) -> None:
    """Remove `folder` if this is still the process that made it (not a forked scoring worker exiting)."""
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def _publish(temp: Path, folder: Path, *, replace: bool) -> Path:
    """Rename the complete import `temp` to `folder` (`replace`: over an existing one); returns where the files are."""
    if temp.parent != folder.parent:  # the temporary fallback: read it where it is
        return temp
    if replace and folder.is_dir():  # a fresh import replaces the old one
        old = folder.parent / f".{folder.name}.{os.getpid()}.{secrets.token_hex(4)}.old{_TEMP_SUFFIX}"
        try:
            os.rename(folder, old)
            shutil.rmtree(old, ignore_errors=True)
        except OSError:
            pass  # another process replaced or removed it meanwhile
    try:
        os.rename(temp, folder)
    except OSError:  # another process published the same import first: theirs is as good
        shutil.rmtree(temp, ignore_errors=True)
    return folder


def _prune(imports: Path, *, keep: Path) -> None:
    """Remove the least recently used imports until they hold at most `MAX_IMPORT_BYTES`."""
    try:
        entries = [(entry.stat().st_mtime, _size(entry), entry) for entry in imports.iterdir() if entry.is_dir()]
    except OSError:  # another process pruning at the same time
        return
    total = sum(size for _, size, _ in entries)
    recent = time.time() - _IN_USE_S  # a scoring may still be reading these: leave them
    for mtime, size, entry in sorted(entries, key=lambda item: item[0]):
        if total <= MAX_IMPORT_BYTES or mtime > recent:
            break
        if entry != keep and not entry.name.startswith("."):
            shutil.rmtree(entry, ignore_errors=True)
            total -= size


def _size(folder: Path) -> int:
    try:
        return sum(path.stat().st_size for path in folder.iterdir())
    except OSError:
        return 0


def _touch(folder: Path) -> None:
    try:
        os.utime(folder)
    except OSError:
        pass  # a read-only cache is still usable


def clear_imports(root: Path | None = None) -> tuple[int, int]:
    """Remove every imported OTLP file (and unfinished import) from the cache: (files, bytes) removed."""
    folder = imports_folder(root)
    files = size = 0
    if not folder.is_dir():
        return 0, 0
    for entry in folder.iterdir():
        if not entry.is_dir():
            continue
        for path in entry.iterdir():
            try:
                size += path.stat().st_size
                files += 1
            except OSError:
                continue
        shutil.rmtree(entry, ignore_errors=True)
    return files, size
