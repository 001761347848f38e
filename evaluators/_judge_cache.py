"""On-disk judge verdict cache, content-addressed.

A key is the SHA-256 of a canonical JSON document naming everything that can change a verdict:
the model, the request parameters, the prompt template and its version, the rendered messages and
the sample index (majority votes ask the same question several times). The API key and the base
URL are not part of it: the same model behind another proxy gives the same verdicts, and secrets
never reach the disk.

Each verdict is one small JSON file `<folder>/<key[:2]>/<key>.json`, written under a hidden
temporary name in the same folder and renamed into place, so a reader in another process sees
either no file or a complete one. Two processes writing the same key write the same verdict, and
the last rename wins. Only successful verdicts are stored. A file that cannot be read or parsed
is a miss; a write that fails is logged and skipped, never an error of the run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

logger = logging.getLogger(__name__)

CACHE_FORMAT = 1
"""Bumped when the key material or the entry layout changes; old entries then simply miss."""


class CachedVerdict(BaseModel):
    """One stored verdict."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    passed: StrictBool
    reason: StrictStr
    model: str
    template: str
    template_version: int
    sample: int
    prompt_tokens: int = 0
    completion_tokens: int = 0


def cache_key(material: Mapping[str, Any]) -> str:
    """The content address of a judge request."""
    blob = json.dumps({"cache_format": CACHE_FORMAT, **material}, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class VerdictCache:
    """Verdicts stored as one JSON file per key under `folder`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedVerdict | None:
        """The stored verdict, or `None` when absent or unreadable."""
        path = self._path(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("judge cache: cannot read %s: %s", path, exc)
            return None
        try:
            return CachedVerdict.model_validate_json(text)
        except ValidationError:
            logger.warning("judge cache: ignoring malformed entry %s", path)
            return None

    def put(self, key: str, verdict: CachedVerdict) -> None:
        """Store a verdict atomically; failures are logged, never raised."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(path, verdict.model_dump_json(indent=2))
        except OSError as exc:
            logger.warning("judge cache: cannot write %s: %s", path, exc)


def _write_atomic(path: Path, text: str) -> None:
    # The hidden temporary file lives in the target folder so the rename never crosses filesystems.
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
