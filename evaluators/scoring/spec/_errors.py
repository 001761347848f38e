"""Turning JSON Schema and pydantic errors into one line naming the file, the case and the key path.

Every message has the shape `FILE: case 'ID': KEY.PATH: what is wrong`, e.g.
`evals.yaml: case 'paris-weather': expect.output.regex: invalid regular expression '(': ...`.
A case without a usable id is named by its position (`case #3`, counting from 1).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evaltrace.collector.registry import did_you_mean

if TYPE_CHECKING:  # jsonschema is imported only when an invalid spec's message is looked for
    from jsonschema import ValidationError as SchemaError

PathPart = str | int

# Pydantic puts union members and validator wrappers into `loc`; they are not keys the user wrote.
_MODEL_TAGS = frozenset(
    {"ExpectedToolCall", "TrajectoryOptions", "OutputExpect", "Expect", "RepeatPolicy", "Turn", "Case", "Spec"}
)


def locate(file: str, data: Any, path: Sequence[PathPart]) -> str:
    """`FILE: case 'ID': key.path` for an error at `path` of the parsed spec `data`."""
    parts = [file]
    rest: Sequence[PathPart] = path
    if len(path) >= 2 and path[0] == "cases" and isinstance(path[1], int):
        parts.append(case_label(data, path[1]))
        rest = path[2:]
    dotted = dotted_path(rest)
    if dotted:
        parts.append(dotted)
    return ": ".join(parts)


def case_label(data: Any, index: int) -> str:
    """`case 'ID'`, or `case #N` when the case has no string id."""
    cases = data.get("cases") if isinstance(data, dict) else None
    if isinstance(cases, list) and 0 <= index < len(cases):
        case = cases[index]
        case_id = case.get("id") if isinstance(case, dict) else None
        if isinstance(case_id, str) and case_id:
            return f"case {case_id!r}"
    return f"case #{index + 1}"


def dotted_path(path: Iterable[PathPart]) -> str:
    """`expect.tool_calls[0].name` from `("expect", "tool_calls", 0, "name")`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


UnknownKey = Callable[[str], str | None]
"""Given a key an object does not declare (one its `additionalProperties` schema admits), the
message calling it unknown, or `None` when the key is a valid one there (a scorer's name)."""


def render_schema_error(
    file: str, data: Any, errors: Iterable[SchemaError], unknown_key: UnknownKey | None = None
) -> str | None:
    """The message for the most relevant JSON Schema error, or `None` when there is none.

    An undeclared key is named unknown (with a did-you-mean) whatever its value: with `unknown_key`,
    a value of the wrong type under an undeclared key gets `unknown_key`'s message, as a value of
    the right type gets it later, rather than the type error the `additionalProperties` schema gives.
    """
    from jsonschema.exceptions import best_match

    error = best_match(errors)
    if error is None:
        return None
    parent = error.parent
    same_place = parent is not None and parent.absolute_path == error.absolute_path
    if parent is not None and same_place and parent.validator == "anyOf" and error.validator == "type":
        # No branch of `str | list[str] | None` fits: name them all rather than one arbitrary branch.
        error = parent
    path = list(error.absolute_path)
    key = _undeclared_key(error, path)
    message = unknown_key(key) if key is not None and unknown_key is not None else None
    message = message or _schema_message(error, path)  # may name the unknown key in `path`: before `locate`
    return f"{locate(file, data, path)}: {message}"


_DESCENDING = frozenset({"properties", "items", "prefixItems", "additionalProperties"})


def _undeclared_key(error: SchemaError, path: list[PathPart]) -> str | None:
    """The key whose value `error` is about, when the object does not declare it (else `None`)."""
    if error.validator == "additionalProperties" or not path or not isinstance(path[-1], str):
        return None
    schema_path = list(error.absolute_schema_path)
    if "additionalProperties" not in schema_path:
        return None
    last = len(schema_path) - 1 - schema_path[::-1].index("additionalProperties")
    # Only an error about that value itself, not about something inside it.
    return path[-1] if _DESCENDING.isdisjoint(p for p in schema_path[last + 1 :] if isinstance(p, str)) else None


def _schema_message(error: SchemaError, path: list[PathPart]) -> str:
    instance, schema = error.instance, error.schema
    if error.validator == "additionalProperties" and isinstance(instance, dict) and isinstance(schema, dict):
        known = list(schema.get("properties", {}))
        extra = sorted(str(k) for k in instance if k not in known)
        path.append(extra[0])
        return f"unknown key{did_you_mean(extra[0], known)}; valid keys: {', '.join(known)}"
    if error.validator == "required" and isinstance(instance, dict) and isinstance(error.validator_value, list):
        missing = [k for k in error.validator_value if k not in instance]
        return f"missing required key {missing[0]!r}"
    if error.validator == "type":
        return f"expected {error.validator_value}, got {json_type(instance)} {short_repr(instance)}"
    if error.validator == "anyOf" and isinstance(error.validator_value, list):
        return f"expected {_branch_names(error.validator_value)}, got {json_type(instance)} {short_repr(instance)}"
    if error.validator == "enum" and isinstance(error.validator_value, list):
        return f"{short_repr(instance)} is not one of {', '.join(repr(v) for v in error.validator_value)}"
    if error.validator == "pattern":
        return f"{short_repr(instance)} does not match {error.validator_value!r}"
    return error.message


def _branch_names(branches: list[Any]) -> str:
    names: list[str] = []
    for branch in branches:
        if not isinstance(branch, dict):
            continue
        if "enum" in branch:
            names.append("one of " + "/".join(str(v) for v in branch["enum"]))
        elif "$ref" in branch:
            names.append("object")
        else:
            names.append(str(branch.get("type", "value")))
    return " or ".join(dict.fromkeys(names))


def render_pydantic_error(file: str, data: Any, exc: ValidationError) -> str:
    """The message for the first pydantic error (after schema validation, only semantic checks remain)."""
    err = exc.errors()[0]
    path = [p for p in err["loc"] if not (isinstance(p, str) and _is_tag(p))]
    message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{locate(file, data, path)}: {message}"


def _is_tag(part: str) -> bool:
    return part in _MODEL_TAGS or "[" in part or part in {"str", "int", "float", "bool", "list", "dict"}


def json_type(value: Any) -> str:
    """The JSON (or YAML) type name of a parsed value, as users know them."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, dt.date | dt.datetime):
        return "date (quote it to make it a string)"
    return type(value).__name__


def short_repr(value: Any, limit: int = 40) -> str:
    """`repr` cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
