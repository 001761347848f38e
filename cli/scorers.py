"""`evaltrace scorers`: every registered scorer with its options, types and defaults."""

from __future__ import annotations

import json
import re
import types
import typing
from typing import Any

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from evaltrace.cli import _options as opt
from evaltrace.evaluators.scoring.scorers.base import is_builtin
from evaltrace.evaluators.scoring.scorers.plugins import origin
from evaltrace.evaluators.scoring.scorers.registry import scorer_class, scorer_names


def type_label(annotation: Any) -> str:
    """A short, readable rendering of a field's type (`list[ExpectedCall] | None`)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_label(a) for a in args)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in args)
    if origin is not None:
        inner = ", ".join(type_label(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return annotation.__name__
    return re.sub(r"\b(typing|[a-z_]+(\.[a-z_]+)*)\.", "", str(annotation))


def default_value(field: FieldInfo) -> tuple[bool, Any]:
    """Whether the field is required, and its default as JSON-compatible data."""
    if field.default_factory is not None:
        return False, to_jsonable_python(field.default_factory())  # type: ignore[call-arg]
    if field.default is PydanticUndefined:
        return True, None
    return False, to_jsonable_python(field.default)


def describe_scorer(name: str) -> dict[str, Any]:
    """The listing of one scorer: name, summary, kind and options."""
    cls = scorer_class(name)
    summary = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    kind = "judge" if cls.uses_judge else "async" if "ascore" in _own_methods(cls) else "rule"
    return {
        "name": name,
        "kind": kind,
        "summary": summary,
        "builtin": is_builtin(cls),
        "module": origin(cls),
        "options": _options(cls),
    }


def _own_methods(cls: type) -> set[str]:
    # A judge overrides `ascore` somewhere below the base Scorer class.
    found: set[str] = set()
    for klass in cls.__mro__:
        if klass.__name__ == "Scorer":
            break
        found.update(vars(klass))
    return found


def _options(cls: type[BaseModel]) -> list[dict[str, Any]]:
    options = []
    for field_name, field in cls.model_fields.items():
        required, default = default_value(field)
        options.append(
            {
                "name": field.alias or field_name,
                "type": type_label(field.annotation),
                "required": required,
                "default": default,
                "description": " ".join((field.description or "").split()),
            }
        )
    return options


def _render_text(listing: list[dict[str, Any]]) -> str:
    lines: list[str] = []
    for scorer in listing:
        source = "" if scorer["builtin"] else f", from {scorer['module']}"
        lines.append(f"{scorer['name']} ({scorer['kind']}{source}): {scorer['summary']}")
        for option in scorer["options"]:
            default = "required" if option["required"] else f"default {json.dumps(option['default'])}"
            lines.append(f"  {option['name']}: {option['type']} ({default})")
            if option["description"]:
                lines.append(f"      {option['description']}")
        if not scorer["options"]:
            lines.append("  (no options)")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def scorers(
    as_json: bool = typer.Option(False, "--json", metavar="", help="Print the listing as one JSON document."),
    plugin: opt.Plugins = None,
) -> None:
    """List every registered scorer with its options, their types and defaults."""
    opt.load_plugins(plugin)
    listing = [describe_scorer(name) for name in scorer_names()]
    if as_json:
        typer.echo(json.dumps({"scorers": listing}, indent=2))
    else:
        typer.echo(_render_text(listing), nl=False)
