"""Scorers by name: `register` adds a class, `create_scorer` builds one from spec config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from evaltrace.evaluators.base import Scorer
from evaltrace.evaluators.errors import InputError, UnknownScorerError

_SCORERS: dict[str, type[Scorer]] = {}

S = TypeVar("S", bound=type[Scorer])


def register(cls: S) -> S:
    """Class decorator adding a scorer under its `name`; duplicate names are a bug."""
    name = cls.name
    if name in _SCORERS and _SCORERS[name] is not cls:
        raise ValueError(
            f"scorer name {name!r} is registered twice ({_SCORERS[name].__qualname__}, {cls.__qualname__})"
        )
    _SCORERS[name] = cls
    return cls


def scorer_names() -> list[str]:
    """Every registered name, sorted."""
    _load_builtins()
    return sorted(_SCORERS)


def scorer_class(name: str) -> type[Scorer]:
    """The class registered as `name`; the error lists the valid choices."""
    _load_builtins()
    try:
        return _SCORERS[name]
    except KeyError:
        raise UnknownScorerError(f"Unknown scorer {name!r}. Valid choices: {', '.join(sorted(_SCORERS))}") from None


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


def _load_builtins() -> None:
    # Importing the modules runs their @register decorators; done lazily to keep import cheap.
    from evaltrace.evaluators import builtin  # noqa: F401
