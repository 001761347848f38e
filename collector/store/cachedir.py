"""Where evaltrace keeps what it can rebuild: the cache folder shared by the traces cache and OTLP imports.

The store decides the location because both the store (imported OTLP files, `otlp_cache.py`) and
the converter (traces tables, `convert/cache.py`) keep files there, and the converter may import
the store but not the other way round.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

CACHE_DIR_ENV: Final = "EVALTRACE_CACHE_DIR"


def cache_root() -> Path:
    """The cache folder: `EVALTRACE_CACHE_DIR`, else `$XDG_CACHE_HOME/evaltrace`, else `~/.cache/evaltrace`."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "evaltrace"
