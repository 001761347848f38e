"""The compiled-spec cache: a spec validated and compiled once per content, then read back whole.

Key and place: the cache's (`collector/cachedir.py`): an entry is `specs/<key>.pickle` under the
cache root, its key (`cachedir.entry_key`, the rule the traces cache keys its tables by) made of no
file's identity but a digest of the spec's bytes and syntax (JSON or YAML), pydantic's version
and the sources of `evaluators/scoring/` (`source_digest`: the models, the scorers and their
configurations; installing another evaltrace rewrites them too), so an edited spec, checkout or
install misses. Only a spec whose scorers
all ship with evaltrace is kept: a plugin's classes can change, or be gone, with none of that changing.

Format: the SHA-256 of the payload, then the payload: a pickle of the `LoadedSpec`, its frozen
pydantic models pickled as their fields (`_Pickler`). Of what was measured on the 10,000-case peer
spec (benchmarks/RESULTS.md, "Compiled spec"), it loaded fastest:
pydantic's `model_validate_json` of a dump validates again (slower than loading the spec), and a
table of cases with `Case` objects built when asked moves the same work to the first use of each case.

Safety. Unpickling runs what the pickle names, so an entry is read only from a root
`cachedir.private_root` accepts: the user's own folder, mode 0700, the trust boundary of the
whole cache (whoever can write there can already change the traces tables that decide verdicts,
and is the user or root). The digest is checked before anything is unpickled: a damaged entry,
one that does not unpickle, or one that holds something else is a miss (discarded, the spec
compiled again), never an error or a wrong spec. A spec that fails validation is never written,
so its errors are always the loader's. A cache that cannot be read or written is logged at info
level and loading goes on without it.
"""

from __future__ import annotations

import hashlib
import io
import logging
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pydantic
from pydantic import BaseModel

from evaltrace.collector.cachedir import Namespace, entry_key, source_digest, touch

logger = logging.getLogger("evaltrace")

SPECS: Final = "specs"
"""The cache's namespace of compiled specs."""
FORMAT_VERSION: Final = 2
"""Bumped when what an entry holds changes in a way the source digest does not see."""
_DIGEST_BYTES: Final = 32


class SpecEntry:
    """Where the compiled spec of one spec text is (or goes) in the cache."""

    def __init__(self, space: Namespace, key: str) -> None:
        self._space = space
        self.path: Path = space.entry(key, ".pickle")

    @classmethod
    def open(cls, data: bytes, *, json_syntax: bool, root: Path | None = None) -> SpecEntry | None:
        """The entry of the spec text `data`; `None` when the cache root is not private."""
        space = Namespace.open(SPECS, root)
        if space is None:
            return None
        digest = {
            "spec": hashlib.sha256(data).hexdigest(),
            "json": json_syntax,
            "pydantic": pydantic.VERSION,
            "source": source_digest("scoring", package="evaluators"),
        }
        return cls(space, entry_key(version=FORMAT_VERSION, digest=digest))

    def read(self) -> object | None:
        """What the entry holds, or `None` when there is none or it is unusable (then discarded)."""
        try:
            blob = self.path.read_bytes()
        except OSError:
            return None  # no entry (the usual miss), or one that cannot be read: compiled as if absent
        payload = memoryview(blob)[_DIGEST_BYTES:]
        try:
            if hashlib.sha256(payload).digest() != blob[:_DIGEST_BYTES]:
                raise ValueError("its digest does not match its content")
            # Safe to unpickle: the root is the user's own 0700 folder (see the module docstring).
            found: object = pickle.loads(payload)
        except Exception as exc:  # any fault in our own entry: compiling again is always right
            logger.info("spec cache %s is unusable (%s: %s); compiling the spec", self.path, type(exc).__name__, exc)
            self._space.discard(self.path)
            return None
        touch(self.path)
        return found

    def write(self, compiled: object) -> None:
        """Keep `compiled`; a value that cannot be pickled or a cache that cannot be written is only logged."""
        try:
            buffer = io.BytesIO()
            _Pickler(buffer).dump(compiled)
            payload = buffer.getvalue()
            self._space.write(self.path, hashlib.sha256(payload).digest() + payload)
        except Exception as exc:  # the cache never fails a run
            logger.info("spec cache %s not written (%s: %s)", self.path, type(exc).__name__, exc)


class _Pickler(pickle.Pickler):
    """Pickles a frozen pydantic model as `_model(cls, fields...)`, models with the same fields set sharing one set.

    Pydantic's own `__getstate__`/`__setstate__` make and read a state dict per model, and each
    model's set of fields set is its own object: for the peer spec's 88k models, writing took a
    quarter and reading a third longer. Only frozen models share a set: nothing adds to it.
    A model class with its own `__getstate__` is pickled the usual way.
    """

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self._sets: dict[tuple[type, frozenset[str]], set[str]] = {}

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        if isinstance(obj, tuple) and hasattr(cls, "_fields") and not hasattr(obj, "__dict__"):
            # A named tuple (a form's plan) made by `tuple.__new__`: its own `__new__` is Python, a call per plan.
            return tuple.__new__, (cls, tuple(obj))
        if not isinstance(obj, BaseModel) or not cls.model_config.get("frozen"):
            return NotImplemented
        if cls.__getstate__ is not BaseModel.__getstate__:  # type: ignore[comparison-overlap]  # overridden
            return NotImplemented
        fields = self._sets.setdefault((cls, frozenset(obj.__pydantic_fields_set__)), obj.__pydantic_fields_set__)
        return _model, (cls, obj.__dict__, fields, obj.__pydantic_private__, obj.__pydantic_extra__)


def _model(
    cls: type[BaseModel],
    values: dict[str, Any],
    fields: set[str],
    private: dict[str, Any] | None,
    extra: dict[str, Any] | None,
    _set: Callable[[object, str, object], None] = object.__setattr__,  # a local: called 4 times per model
) -> BaseModel:
    """A model `_Pickler` wrote, rebuilt as pydantic's `__setstate__` does (no validation: it was validated)."""
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields)
    _set(model, "__pydantic_extra__", extra)
    _set(model, "__pydantic_private__", private)
    return model
