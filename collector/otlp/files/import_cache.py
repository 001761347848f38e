"""Imported OTLP files: each OTLP file given as a PATH is converted into run files once, in the cache.

`imported_files(path, fmt)` returns the run files holding what the OTLP file holds, importing it
(`otlp_import.py`) the first time. Everything downstream (the reader, sharding, the traces cache)
then reads ordinary run files, and scoring the same file again skips the conversion.

Key and place: the cache's (`collector/cachedir.py`): an import is the folder `imports/<key>/`
under the cache root, its key (`cachedir.entry_key`) made of the file's identity,
`IMPORT_VERSION` and a digest of the run-file schema versions, the evaltrace version and the
decoder's and reader's sources (an edited checkout imports again). A file that changes gets a new
key, so nothing stale is ever read; a file that changes while it is being imported is reported,
not cached. The cache prunes and clears imports with its other entries. A cache root that is not
private is not used: the file is imported into a temporary folder each time.

Safety. An import is written into a hidden temporary folder and published (renamed to `<key>`)
once complete, so a reader never sees half an import; when two processes import the same file at
once, the first rename wins and the other uses its folder. `fresh=True` (`--no-cache`) imports
again even when a folder exists, once per process, and replaces it. When the cache folder cannot
be written, the import goes to a temporary folder removed when the process ends.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Final

from evaltrace.collector.cachedir import Namespace, entry_key, source_digest, touch
from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.files.framing import OtlpFormat
from evaltrace.collector.otlp.files.importer import ImportTarget, cut_warning, import_otlp, run_label
from evaltrace.collector.runfiles.layout import writer_version
from evaltrace.collector.runfiles.reader import folder_span_files
from evaltrace.collector.runfiles.schema import LOGS_SCHEMA_VERSION, SCHEMA_VERSION

logger = logging.getLogger("evaltrace")

IMPORT_VERSION: Final = 2
"""Bump when what an import writes for the same file changes (2: spans held to the SDK's limits)."""
IMPORTS: Final = "imports"
"""The cache's namespace of imports."""
_WARNING_FILE: Final = ".warning"
"""In an import's folder: the warning its import gave (a cut last record), repeated on every read."""
_fresh_this_process: set[str] = set()


def imported_files(path: Path, fmt: OtlpFormat, *, fresh: bool = False, root: Path | None = None) -> list[Path]:
    """The run files holding the OTLP file `path`'s spans and log records, imported once (see above).

    Args:
        path: an OTLP file (`otlp_frames.sniff` said `fmt`).
        fmt: its layout.
        fresh: import again even if the cache holds the file (once per process).
        root: the cache root; `cachedir.cache_root()` when `None`.

    Raises:
        InputError: the file is unreadable, not OTLP, or changed while it was imported.
    """
    key = _key(path)
    space = Namespace.open(IMPORTS, root)
    if space is None:  # a cache root others could write: import for this process only, never read back
        return _run_files(_imported(path, fmt, _scratch_folder(), key))
    folder = space.entry(key)
    if folder.is_dir() and not (fresh and key not in _fresh_this_process):
        touch(folder)
        _repeat_warning(folder)
        return _run_files(folder)
    temp = _imported(path, fmt, _temp_folder(space, folder), key)
    _fresh_this_process.add(key)
    if temp.parent != space.folder:  # the temporary fallback: read it where it is
        return _run_files(temp)
    if fresh:  # a fresh import replaces the old one
        space.discard(folder)
    space.publish(temp, folder)
    return _run_files(folder)


def _imported(path: Path, fmt: OtlpFormat, temp: Path, key: str) -> Path:
    """Import `path` into the folder `temp`; raises if the file changed meanwhile."""
    done = import_otlp(path, fmt, ImportTarget(temp, run_id=run_label(path), writer_id=key[:16]))
    if done.skipped.cut:  # said again whenever the cached import is read: the loss is the file's
        (temp / _WARNING_FILE).write_text(cut_warning(path, done.skipped), encoding="utf-8")
    if _key(path) != key:
        shutil.rmtree(temp, ignore_errors=True)
        raise InputError(f"{path}: the file changed while it was read; read it again once it is complete")
    return temp


def _repeat_warning(folder: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        logger.warning("%s", (folder / _WARNING_FILE).read_text(encoding="utf-8"))


def _key(path: Path) -> str:
    """The key of `path`'s import (see the module docstring); raises `InputError` if it cannot be read."""
    digest = {
        "schemas": [SCHEMA_VERSION, LOGS_SCHEMA_VERSION],
        "evaltrace": writer_version(),
        "source": source_digest("otlp", "runfiles"),
    }
    try:
        return entry_key(version=IMPORT_VERSION, digest=digest, files=[path])
    except OSError as exc:
        raise InputError(f"{path}: cannot read the file: {exc.strerror or exc}") from None


def _run_files(folder: Path) -> list[Path]:
    return sorted(folder_span_files(folder))


def _temp_folder(space: Namespace, folder: Path) -> Path:
    """A fresh hidden folder beside `folder` (the cache's), or in the system's temporary folder."""
    try:
        temp = space.temp(folder)
        temp.mkdir(mode=0o700)  # private: imports hold recorded content
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
