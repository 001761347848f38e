"""Where the score store is, and the ids of scoring runs.

The store is `--store DIR` when given, else `$EVALTRACE_STORE` when set and not empty, else
`.evaltrace/store` under the current folder (beside the `runs/` folder `evaltrace run` writes).
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from evaltrace.collector.errors import InputError
from evaltrace.collector.settings import Environment

DEFAULT_STORE = Path(".evaltrace") / "store"
"""The store without `--store` or `EVALTRACE_STORE`, relative to the current folder."""

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def store_folder(option: str | os.PathLike[str] | None = None) -> Path:
    """The store folder: `option`, else `EVALTRACE_STORE`, else `DEFAULT_STORE`."""
    given = Path(option) if option is not None and str(option) else None
    return Environment.from_env(store=given).store or DEFAULT_STORE


def new_run_id(now_ns: int | None = None) -> str:
    """A new scoring-run id: a ULID (48-bit milliseconds since the epoch, 80 random bits, Crockford base32).

    Ids sort by time as text, which is what listing runs and "the latest run" rely on; the random
    part keeps two scorings started in the same millisecond apart.
    """
    millis = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def check_writable(folder: Path) -> None:
    """Make the store's folders and write (then remove) a file in each, before any costly work.

    Raises:
        InputError: the store cannot be written (a file in the way, permissions, ...).
    """
    for sub in ("scores", "runs"):
        probe = folder / sub / f".probe.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            probe.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            probe.unlink()
        except OSError as exc:
            raise store_error(folder, exc) from None


def store_error(store: Path, exc: OSError) -> InputError:
    """The one-line error naming the store (and the file, when it is another path)."""
    if isinstance(exc, FileExistsError | NotADirectoryError):
        return InputError(f"{store}: cannot write the score store: a file is in the way of a folder")
    path = Path(os.fsdecode(exc.filename)) if exc.filename else store
    path = path.parent if path.name.startswith(".") else path  # a hidden temporary file: name its folder
    where = f" ({path})" if path != store else ""
    return InputError(f"{store}: cannot write the score store{where}: {exc.strerror or exc}")
