"""Where the score store is, and the ids of scoring runs.

The store is `--store DIR` when given, else `$EVALTRACE_STORE` when set and not empty, else
`.evaltrace/store` under the current folder (beside the `runs/` folder `evaltrace run` writes).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

STORE_ENV = "EVALTRACE_STORE"
"""The environment variable naming the store when `--store` is not given."""
DEFAULT_STORE = Path(".evaltrace") / "store"
"""The store without `--store` or `EVALTRACE_STORE`, relative to the current folder."""

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def store_folder(option: str | os.PathLike[str] | None = None) -> Path:
    """The store folder: `option`, else `EVALTRACE_STORE`, else `DEFAULT_STORE`."""
    if option is not None and str(option):
        return Path(option)
    from_env = os.environ.get(STORE_ENV, "")
    return Path(from_env) if from_env else DEFAULT_STORE


def new_run_id(now_ns: int | None = None) -> str:
    """A new scoring-run id: a ULID (48-bit milliseconds since the epoch, 80 random bits, Crockford base32).

    Ids sort by time as text, which is what listing runs and "the latest run" rely on; the random
    part keeps two scorings started in the same millisecond apart.
    """
    millis = (time.time_ns() if now_ns is None else now_ns) // 1_000_000
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))
