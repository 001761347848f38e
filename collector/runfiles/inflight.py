"""Find and remove temporary span files left behind by writers that died.

The exporter writes each file as `.inflight-<host>-<pid>-<random>.parquet.tmp` and renames it
when complete, so a temporary file only outlives its write when the process was killed mid-write.
A file is stale when its writer cannot be running any more:

- written on this host by a pid that is not alive;
- written on another host sharing the folder, or under a name we cannot parse: once it is
  older than `max_age_s` (default one hour). A single file write takes seconds, so a live
  writer never keeps a temporary file that long.

A file of a live pid on this host is never removed, whatever its age.
"""

from __future__ import annotations

import os
import secrets
import socket
import time
from pathlib import Path

from evaltrace.collector.runfiles.schema import HOST_NAME_LIMIT, INFLIGHT_PREFIX, INFLIGHT_SUFFIX, safe_file_part

DEFAULT_MAX_AGE_S = 3600.0


def inflight_path(folder: Path, host: str) -> Path:
    """A fresh temporary name in `folder` for a file this process is writing (see `_writer`)."""
    return folder / f"{INFLIGHT_PREFIX}{host}-{os.getpid()}-{secrets.token_hex(4)}{INFLIGHT_SUFFIX}"


def is_inflight(path: Path) -> bool:
    """Whether `path` is an in-flight temporary file (by its name)."""
    return path.name.startswith(INFLIGHT_PREFIX) and path.name.endswith(INFLIGHT_SUFFIX)


def _writer(name: str) -> tuple[str, int] | None:
    """`(host, pid)` from an in-flight file name, or None when the name has another shape."""
    core = name[len(INFLIGHT_PREFIX) : -len(INFLIGHT_SUFFIX)]
    parts = core.rsplit("-", 2)  # the host name may itself contain dashes
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def _this_host_names() -> frozenset[str]:
    # The exporter writes the host name made file-name safe; accept that form and the raw one.
    host = socket.gethostname()
    return frozenset({host, safe_file_part(host, HOST_NAME_LIMIT)})


def _is_stale(path: Path, hosts: frozenset[str], now: float, max_age_s: float) -> bool:
    writer = _writer(path.name)
    if writer is not None and writer[0] in hosts:
        # Our own host: the pid answers exactly. A live pid may be a reused one, but removing a
        # live writer's file would lose its spans, so such a file is kept.
        return not _pid_alive(writer[1])
    try:
        age = now - path.stat().st_mtime
    except FileNotFoundError:  # renamed or removed meanwhile: its writer finished
        return False
    return age > max_age_s


def find_stale_inflight(folder: str | os.PathLike[str], max_age_s: float = DEFAULT_MAX_AGE_S) -> list[Path]:
    """List the stale in-flight temporary files directly in `folder` (see the module docstring).

    Args:
        folder: a runs folder; a missing folder has none.
        max_age_s: age after which a file whose writer cannot be checked counts as stale.

    Returns:
        The stale files, sorted by name.
    """
    base = Path(folder)
    if not base.is_dir():
        return []
    hosts, now = _this_host_names(), time.time()
    stale = (p for p in base.iterdir() if is_inflight(p) and _is_stale(p, hosts, now, max_age_s))
    return sorted(stale, key=lambda p: p.name)


def clean_stale_inflight(folder: str | os.PathLike[str], max_age_s: float = DEFAULT_MAX_AGE_S) -> list[Path]:
    """Remove the stale in-flight temporary files directly in `folder`.

    Args:
        folder: a runs folder.
        max_age_s: age after which a file whose writer cannot be checked counts as stale.

    Returns:
        The files removed, sorted by name (files that vanished meanwhile are left out).
    """
    removed: list[Path] = []
    for path in find_stale_inflight(folder, max_age_s):
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed
