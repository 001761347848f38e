"""The judge verdict cache: the `judge/` namespace of evaltrace's cache (`collector/cachedir.py`).

A key (`cachedir.entry_key`, no files) is made of `CACHE_FORMAT` and a canonical JSON document
naming everything that can change a verdict: the model, the request parameters, the prompt
template and its version, the rendered messages and the sample index (majority votes ask the same
question several times). The API key and the base URL are not part of it (the session's
`_key_material` leaves them out): the same model behind another proxy gives the same verdicts,
and secrets never reach the disk.

Each verdict is one small JSON file `judge/<key>.json` under the cache root (`cache_root()`, or
the root `EVALTRACE_JUDGE_CACHE_DIR` / `--judge-cache-dir` names), written atomically by the
cache, so a reader in another process sees either no file or a complete one. Two processes
writing the same key write the same verdict, and the last rename wins. Only successful verdicts
are stored. A write that fails is logged and skipped, never an error of the run. A root that is
not private is not used (no verdict read or written), a hit touches its entry, and the cache
prunes and clears verdicts with its other entries.

Trust. A cached verdict is used in place of asking the judge, so whoever can write the cache
root decides those verdicts: keep it out of reach of untrusted changes (outside the repository;
not restored from an untrusted branch's CI cache). What is checked on read: an entry is used
only when it is a small file of exactly the verdict's shape (a boolean `passed`, a string
`reason`), written in this cache format, for this key (the entry names it), and for the same
model, template, version and sample as the question asked. Anything else (truncated,
oversized, foreign, copied from another key) is a miss, and the question is asked again. These
checks stop corruption and mix-ups; they cannot stop a deliberate forgery by someone who can
write the folder, since the key material is not secret.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from evaltrace.collector.cachedir import Namespace, entry_key, touch

logger = logging.getLogger(__name__)

CACHE_FORMAT = 3
"""Bumped when the key material or the entry layout changes; old entries then simply miss (3: the cache's keys)."""
JUDGE = "judge"
"""The cache's namespace of verdicts."""

_MAX_ENTRY_BYTES = 64 * 1024
"""Larger files are not verdicts this cache wrote (a reason is a sentence or two): a miss, unread."""


class CachedVerdict(BaseModel):
    """One stored verdict."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    cache_format: StrictInt = CACHE_FORMAT
    key: StrictStr
    """The key the entry was stored under: an entry copied or renamed to another key is a miss."""
    passed: StrictBool
    reason: StrictStr
    model: StrictStr
    template: StrictStr
    template_version: StrictInt
    sample: StrictInt
    prompt_tokens: StrictInt = 0
    completion_tokens: StrictInt = 0

    def identity(self) -> dict[str, Any]:
        """What question the verdict answers, compared on read with the question being asked."""
        return question_identity(self.model, self.template, self.template_version, self.sample)


def question_identity(model: str, template: str, template_version: int, sample: int) -> dict[str, Any]:
    """What identifies a question beside its key: the model, the template and its version, the sample."""
    return {"model": model, "template": template, "template_version": template_version, "sample": sample}


def cache_key(material: Mapping[str, Any]) -> str:
    """The content address of a judge request."""
    return entry_key(version=CACHE_FORMAT, digest=dict(material))


class VerdictCache:
    """Verdicts stored as one JSON file per key in the `judge/` namespace under `root`."""

    def __init__(self, root: Path | None = None) -> None:
        self._space = Namespace.open(JUDGE, root)

    def get(self, key: str, identity: Mapping[str, Any] | None = None) -> CachedVerdict | None:
        """The stored verdict for `key`, or `None` when absent, unreadable or not a valid entry for it.

        Args:
            key: The question's content address.
            identity: When given, the entry's `identity()` must equal it (model, template, version, sample).
        """
        if self._space is None:  # a root others could write: no verdict is read from it
            return None
        path = self._space.entry(key, ".json")
        try:
            with path.open("rb") as handle:
                data = handle.read(_MAX_ENTRY_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            logger.warning("judge cache: cannot read %s: %s", path, exc)
            return None
        if len(data) > _MAX_ENTRY_BYTES:
            logger.warning("judge cache: ignoring oversized entry %s", path)
            return None
        try:
            entry = CachedVerdict.model_validate_json(data)
        except (ValidationError, ValueError, RecursionError):
            logger.warning("judge cache: ignoring malformed entry %s", path)
            return None
        if (
            entry.cache_format != CACHE_FORMAT
            or entry.key != key
            or (identity is not None and entry.identity() != dict(identity))
        ):
            logger.warning("judge cache: ignoring entry %s written for another question", path)
            return None
        touch(path)
        return entry

    def put(self, key: str, verdict: CachedVerdict) -> None:
        """Store a verdict atomically; failures are logged, never raised.

        Raises:
            ValueError: The verdict names another key (a programming error).
        """
        if verdict.key != key:
            raise ValueError(f"verdict for key {verdict.key} stored under {key}")
        if self._space is None:
            return
        path = self._space.entry(key, ".json")
        try:
            self._space.write(path, verdict.model_dump_json(indent=2).encode())
        except OSError as exc:
            logger.warning("judge cache: cannot write %s: %s", path, exc)
