"""Where evaltrace keeps what it can rebuild: the cache folder shared by the traces cache and OTLP imports.

The store decides the location because both the store (imported OTLP files, `otlp_cache.py`) and
the converter (traces tables, `convert/cache.py`) keep files there, and the converter may import
the store but not the other way round.

Privacy. The caches hold recorded content and are read back as evaltrace wrote them, so the folder
must be the user's alone: `private_root` creates it with mode 0700 and checks an existing one
before each use. A folder owned by another user, or one that group or others may write, is not
used (a warning names it; scoring goes on without the cache). One that group or others may only
read (earlier versions created the folder 0755) is made 0700, with a warning saying so.

Identity. `file_identity` is what both caches key an input file by: its resolved path, inode,
size, mtime and ctime (ns). Nothing can set a file's ctime back: a file replaced in place (tar or
`cp -p` writing over it, `rsync -t`), even with the same size, mtime and inode, gets a new ctime
and so a new key. The device number is left out: the nodes of a Ray cluster share one cache
folder and see the same network file system under different device numbers.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Final

logger = logging.getLogger("evaltrace")

CACHE_DIR_ENV: Final = "EVALTRACE_CACHE_DIR"
_warned: set[str] = set()


def cache_root() -> Path:
    """The cache folder: `EVALTRACE_CACHE_DIR`, else `$XDG_CACHE_HOME/evaltrace`, else `~/.cache/evaltrace`."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "evaltrace"


def private_root(root: Path | None = None) -> Path | None:
    """The cache folder (`root`, else `cache_root()`), created 0700 if missing; `None` when it must not be used.

    `None` (with a one-line warning, once per process) when the folder belongs to another user or
    group or others may write it: whoever can write it decides what is scored. A folder only
    group or others may read is made 0700 (a warning says so). A folder that cannot be created is
    returned all the same: the caches log that they cannot write there and go on without it.
    """
    folder = root if root is not None else cache_root()
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        found = folder.stat()
    except OSError:
        return folder  # unwritable: each cache says so (at info level) and works without it
    mode = stat.S_IMODE(found.st_mode)
    if found.st_uid != os.getuid() or mode & 0o022:
        _warn_once(
            folder,
            f"evaltrace: cache folder {folder} is not private (mode {mode:o}, owner uid {found.st_uid}); "
            f"scoring without the cache (make it yours and `chmod 700` it, or set {CACHE_DIR_ENV})",
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
    """What the caches key an input file by (see the module docstring); raises `OSError` if it cannot be read."""
    found = path.stat()
    return [
        os.path.realpath(path),
        found.st_ino,
        found.st_size,
        found.st_mtime_ns,
        found.st_ctime_ns,
    ]
