"""Scorers by name: `register` adds a class, `create_scorer` builds one from spec config.

The built-in scorers and those of installed plugins (entry-point group `evaltrace.scorers`, see
`plugins.py`) are loaded the first time the registry is consulted; `load_plugins` adds the
`--plugin` modules of a run.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.errors import UnknownScorerError, did_you_mean
from evaltrace.evaluators.scorers.base import Scorer

_SCORERS: dict[str, type[Scorer]] = {}
_loaded = False

S = TypeVar("S", bound=type[Scorer])


def register(cls: S) -> S:
    """Class decorator adding a scorer under its `name`.

    Raises:
        ValueError: the class has no `name`, leaves `score` unimplemented, or takes a name
            another class holds (plugins report it as a load error naming the plugin).
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"scorer class {cls.__qualname__} has no `name` (a ClassVar[str])")
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
        raise ValueError(f"scorer class {cls.__qualname__} does not implement {missing}")
    if name in _SCORERS and _SCORERS[name] is not cls:
        raise ValueError(
            f"scorer name {name!r} is registered twice ({_SCORERS[name].__qualname__}, {cls.__qualname__})"
        )
    _SCORERS[name] = cls
    return cls


def registered() -> dict[str, type[Scorer]]:
    """A copy of the registry as it stands (nothing is loaded on the way)."""
    return dict(_SCORERS)


def load_plugins(refs: Iterable[str]) -> None:
    """Import `--plugin` references (files, modules, `MODULE:CLASS`) and register their scorers.

    Raises:
        InputError: a reference does not load or defines no scorer (see `plugins.import_plugin`).
    """
    from evaltrace.evaluators.scorers.plugins import import_plugin

    _ensure_loaded()
    for ref in refs:
        before = len(_SCORERS)
        where, module, named = import_plugin(ref)
        if named is not None:
            _register_plugin(named, where)
        # A module imported before (twice on the command line, or by an entry point) registers
        # nothing new, yet it is a plugin if scorers of its own are in the registry.
        elif len(_SCORERS) == before and not any(c.__module__ == module.__name__ for c in _SCORERS.values()):
            raise InputError(
                f"{where}: the module registers no scorer (decorate a Scorer subclass with "
                "@evaltrace.evaluators.register, or name the class as MODULE:CLASS)"
            )


def _register_plugin(loaded: object, where: str) -> None:
    from evaltrace.evaluators.scorers.plugins import scorer_class_of

    cls = scorer_class_of(loaded, where)
    if cls is not None:
        try:
            register(cls)
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None


def scorer_names() -> list[str]:
    """Every registered name, sorted."""
    _ensure_loaded()
    return sorted(_SCORERS)


def scorer_class(name: str) -> type[Scorer]:
    """The class registered as `name`; the error lists the valid choices."""
    _ensure_loaded()
    try:
        return _SCORERS[name]
    except KeyError:
        raise UnknownScorerError(
            f"Unknown scorer {name!r}{did_you_mean(name, _SCORERS)}. Valid choices: {', '.join(sorted(_SCORERS))} "
            "(custom scorers load with --plugin FILE.py or as installed evaltrace.scorers plugins)"
        ) from None


def create_scorer(name: str, config: Mapping[str, Any] | None = None, *, where: str = "") -> Scorer:
    """Build scorer `name` from its config; `where` prefixes errors (file, case, key)."""
    cls = scorer_class(name)
    try:
        return cls.model_validate(dict(config or {}))
    except ValidationError as exc:
        prefix = f"{where}: " if where else ""
        raise InputError(f"{prefix}scorer {name!r}: {render_validation_errors(exc)}") from None


def render_validation_errors(exc: ValidationError) -> str:
    """Pydantic errors as `field: message` pieces on one line."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(config)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _ensure_loaded() -> None:
    # Importing the built-in modules runs their @register decorators; lazily, to keep import cheap.
    global _loaded
    if _loaded:
        return
    from evaltrace.evaluators.scorers import builtin  # noqa: F401
    from evaltrace.evaluators.scorers.plugins import entry_point_objects

    # Set first: a plugin module that looks the registry up while importing must not recurse.
    # A failed plugin resets it, so every later lookup reports the failure again.
    _loaded = True
    try:
        for where, loaded in entry_point_objects():
            _register_plugin(loaded, where)
    except BaseException:
        _loaded = False
        raise
