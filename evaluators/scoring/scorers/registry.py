"""Scorers by name: `register` adds a class, `create_scorer` builds one from spec config.

Installed plugins (entry-point group `evaltrace.scorers`, see `plugins.py`) are loaded the first
time the registry is consulted; `load_plugins` adds the `--plugin` modules of a run. A built-in
scorer's module is imported when the scorer is first asked for by name (`_BUILTINS` says where each
is): a run imports the modules of the scorers it uses, not the judge stack or jsonschema of the
others (a tenth of a rule-only run's start-up). Its name is a valid choice all the same.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.errors import UnknownScorerError, did_you_mean
from evaltrace.evaluators.scoring.scorers.base import Scorer

_SCORERS: dict[str, type[Scorer]] = {}
_loaded = False

_BUILTINS: dict[str, tuple[str, str]] = {
    "answer_match": ("judges", "AnswerMatch"),
    "answer_quality": ("answer", "AnswerQuality"),
    "argument_hallucination": ("judges", "ArgumentHallucination"),
    "budget": ("calls", "Budget"),
    "completeness": ("answer", "Completeness"),
    "correctness": ("answer", "Correctness"),
    "cost": ("limits", "Cost"),
    "groundedness": ("answer", "Groundedness"),
    "latency": ("limits", "Latency"),
    "outcome": ("output", "Outcome"),
    "output": ("output", "Output"),
    "reasoning_quality": ("judges", "ReasoningQuality"),
    "semantic_output": ("judges", "SemanticOutput"),
    "semantic_steps": ("judges", "SemanticSteps"),
    "steps": ("output", "Steps"),
    "task_completion": ("judges", "TaskCompletion"),
    "tool_call_validity": ("tools", "ToolCallValidity"),
    "tool_correctness": ("tools", "ToolCorrectness"),
    "tool_description_quality": ("judges", "ToolDescriptionQuality"),
    "tool_description_reliability": ("reliability", "ToolDescriptionReliability"),
    "tool_efficiency": ("calls", "ToolEfficiency"),
    "tool_errors": ("calls", "ToolErrors"),
    "tool_name_reliability": ("reliability", "ToolNameReliability"),
    "trajectory": ("trajectory", "Trajectory"),
    "usage": ("limits", "UsageLimits"),
}
"""The built-in scorers by name: their module (in `evaltrace.evaluators.scoring.scorers`) and class. The
modules listed in `builtin.py` register exactly these (tests/evaluators/test_rules_registry.py)."""

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
    holder = _SCORERS.get(name) or (None if _is_the_builtin(name, cls) else _builtin(name))
    if holder is not None and holder is not cls:
        raise ValueError(f"scorer name {name!r} is registered twice ({holder.__qualname__}, {cls.__qualname__})")
    _SCORERS[name] = cls
    return cls


def _is_the_builtin(name: str, cls: type[Scorer]) -> bool:
    # Read from the class, not the module: its decorator runs before the module binds the name.
    module, qualname = _BUILTINS.get(name, ("", ""))
    return cls.__module__ == f"evaltrace.evaluators.scoring.scorers.{module}" and cls.__qualname__ == qualname


def _builtin(name: str) -> type[Scorer] | None:
    """The built-in scorer `name`, its module imported on the way; `None` when no built-in has that name."""
    where = _BUILTINS.get(name)
    if where is None:
        return None
    module = importlib.import_module(f"evaltrace.evaluators.scoring.scorers.{where[0]}")
    cls: type[Scorer] = getattr(module, where[1])
    return _SCORERS.setdefault(name, cls)


def registered() -> dict[str, type[Scorer]]:
    """A copy of the registry as it stands (nothing is loaded on the way)."""
    return dict(_SCORERS)


def load_plugins(refs: Iterable[str]) -> None:
    """Import `--plugin` references (files, modules, `MODULE:CLASS`) and register their scorers.

    Raises:
        InputError: a reference does not load or defines no scorer (see `plugins.import_plugin`).
    """
    from evaltrace.evaluators.scoring.scorers.plugins import import_plugin

    _ensure_loaded()
    for ref in refs:
        before = set(_SCORERS)
        where, module, named = import_plugin(ref)
        if named is not None:
            _register_plugin(named, where)
        # A module imported before (twice on the command line, or by an entry point) registers
        # nothing new, yet it is a plugin if scorers of its own are in the registry. Built-ins the
        # module imported on its way (to subclass one, say) are not its scorers.
        elif not (set(_SCORERS) - before - set(_BUILTINS)) and not any(
            c.__module__ == module.__name__ for c in _SCORERS.values()
        ):
            raise InputError(
                f"{where}: the module registers no scorer (decorate a Scorer subclass with "
                "@evaltrace.evaluators.register, or name the class as MODULE:CLASS)"
            )


def _register_plugin(loaded: object, where: str) -> None:
    from evaltrace.evaluators.scoring.scorers.plugins import scorer_class_of

    cls = scorer_class_of(loaded, where)
    if cls is not None:
        try:
            register(cls)
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None


def scorer_names() -> list[str]:
    """Every registered name, the built-ins' included (whose modules are not imported for it), sorted."""
    _ensure_loaded()
    return sorted(_SCORERS.keys() | _BUILTINS.keys())


def scorer_class(name: str) -> type[Scorer]:
    """The class registered as `name`; the error lists the valid choices."""
    _ensure_loaded()
    cls = _SCORERS.get(name) or _builtin(name)
    if cls is None:
        names = scorer_names()
        raise UnknownScorerError(
            f"Unknown scorer {name!r}{did_you_mean(name, names)}. Valid choices: {', '.join(names)} "
            "(custom scorers load with --plugin FILE.py or as installed evaltrace.scorers plugins)"
        )
    return cls


def create_scorer(name: str, config: Mapping[str, Any] | None = None, *, where: str = "") -> Scorer:
    """Build scorer `name` from its config; `where` prefixes errors (file, case, key)."""
    cls = scorer_class(name)
    try:
        return cls.model_validate(dict(config or {}))
    except ValidationError as exc:
        prefix = f"{where}: " if where else ""
        raise InputError(f"{prefix}scorer {name!r}: {render_validation_errors(exc)}") from None


DEFAULT_SCORERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("tool_errors", {}),
    ("tool_call_validity", {}),
    ("tool_efficiency", {}),
    ("outcome", {"expected": "success"}),
)
"""The reference-free scorers applied to every trace when there is no spec."""


def default_scorers() -> tuple[Scorer, ...]:
    """The reference-free scorers used without a spec."""
    return tuple(create_scorer(name, config) for name, config in DEFAULT_SCORERS)


def render_validation_errors(exc: ValidationError) -> str:
    """Pydantic errors as `field: message` pieces on one line."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(config)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _ensure_loaded() -> None:
    # The installed plugins, the first time the registry is consulted (the built-ins come by name).
    global _loaded
    if _loaded:
        return
    from evaltrace.evaluators.scoring.scorers.plugins import entry_point_objects

    # Set first: a plugin module that looks the registry up while importing must not recurse.
    # A failed plugin resets it, so every later lookup reports the failure again.
    _loaded = True
    try:
        for where, loaded in entry_point_objects():
            _register_plugin(loaded, where)
    except BaseException:
        _loaded = False
        raise
