"""Scorers by name: `register` adds a class, `create_scorer` builds one from spec config.

`SCORERS` is a `collector.registry.Registry`: installed plugins (entry-point group
`evaltrace.scorers`) are loaded the first time it is consulted; `load_plugins` adds the `--plugin`
modules of a run (see `plugins.py`). A built-in scorer is declared lazily, its module imported when
the scorer is first asked for by name: a run imports the modules of the scorers it uses, not the
judge stack or jsonschema of the others (a tenth of a rule-only run's start-up). Its name is a
valid choice all the same.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from evaltrace.collector.errors import InputError
from evaltrace.collector.registry import Registry
from evaltrace.evaluators.errors import UnknownScorerError
from evaltrace.evaluators.scoring.scorers.base import Scorer

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

S = TypeVar("S", bound=type[Scorer])


def _adopt_entry(registry: Registry[Any], entry: EntryPoint, loaded: Any, where: str) -> None:
    # An entry point names a Scorer subclass, or a module whose classes `@register` themselves.
    _register_plugin(loaded, where)


SCORERS: Registry[type[Scorer]] = Registry(
    "scorer",
    group="evaltrace.scorers",
    hint=" (custom scorers load with --plugin FILE.py or as installed evaltrace.scorers plugins)",
    error=UnknownScorerError,
    adopt=_adopt_entry,
)
"""Every scorer by its `name`. The built-ins below: `name`, then `module:Class` in this package
(tests/cli/test_score_imports.py checks that each module registers exactly these)."""

for _name, _ref in {
    "answer_match": "judges:AnswerMatch",
    "answer_quality": "answer:AnswerQuality",
    "argument_hallucination": "judges:ArgumentHallucination",
    "budget": "calls:Budget",
    "completeness": "answer:Completeness",
    "correctness": "answer:Correctness",
    "cost": "limits:Cost",
    "groundedness": "answer:Groundedness",
    "latency": "limits:Latency",
    "outcome": "output:Outcome",
    "output": "output:Output",
    "reasoning_quality": "judges:ReasoningQuality",
    "semantic_output": "judges:SemanticOutput",
    "semantic_steps": "judges:SemanticSteps",
    "steps": "steps:Steps",
    "task_completion": "judges:TaskCompletion",
    "tool_call_validity": "tools:ToolCallValidity",
    "tool_correctness": "tools:ToolCorrectness",
    "tool_description_quality": "judges:ToolDescriptionQuality",
    "tool_description_reliability": "reliability:ToolDescriptionReliability",
    "tool_efficiency": "calls:ToolEfficiency",
    "tool_errors": "calls:ToolErrors",
    "tool_name_reliability": "reliability:ToolNameReliability",
    "trajectory": "trajectory:Trajectory",
    "usage": "limits:UsageLimits",
}.items():
    SCORERS.lazy(_name, f"{__package__}.{_ref}")


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
    SCORERS.add(name, cls)
    return cls


def registered() -> dict[str, type[Scorer]]:
    """The scorers registered or imported so far (nothing is loaded on the way)."""
    return SCORERS.loaded()


def load_plugins(refs: Iterable[str]) -> None:
    """Import `--plugin` references (files, modules, `MODULE:CLASS`) and register their scorers.

    Raises:
        InputError: a reference does not load or defines no scorer (see `plugins.import_plugin`).
    """
    from evaltrace.evaluators.scoring.scorers.plugins import import_plugin

    SCORERS.load_plugins()
    for ref in refs:
        where, module, named = import_plugin(ref)
        if named is not None:
            _register_plugin(named, where)
        # A module imported before (twice on the command line, or by an entry point) registers
        # nothing new, yet it is a plugin if scorers of its own are in the registry.
        elif not any(cls.__module__ == module.__name__ for cls in SCORERS.loaded().values()):
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
    return SCORERS.names()


def scorer_class(name: str) -> type[Scorer]:
    """The class registered as `name`; the error lists the valid choices."""
    return SCORERS.get(name)


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
