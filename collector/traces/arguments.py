"""The one argument matcher: expected tool-call arguments against recorded ones.

Both `Trace.assert_tool_call` and the evaluators' scorers compare arguments here, so a value
matches or differs the same way, with the same message, wherever it is checked.

Values compare structurally with a few deliberate tolerances:

- Numbers compare by value: `1 == 1.0` (JSON widens integers to floats freely). A boolean is
  not a number: `True` never equals `1`.
- Strings compare exactly unless `trim` (strip surrounding whitespace) or `casefold` (case
  insensitive) is switched on; both are opt-in so enabling them never silently changes a verdict.
- Dicts compare key by key with the same key mode at every depth; lists compare element-wise
  in order.

Key modes say how the actual key set relates to the expected one: `exact` (same keys), `subset`
(the expected keys are in the actual arguments, extras allowed; the default), `superset` (the
actual keys are all expected, omissions allowed), `ignore` (callers skip the comparison).

Each difference reads `path: expected X, got Y` (or `path: missing (...)`, `path: unexpected
argument (...)`). The walk is lazy; `arguments_match` is its message-free twin for callers that
only need the yes/no answer (held to the walk by a property test).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

KeyMode = Literal["exact", "subset", "superset", "ignore"]


class ArgumentRules(Protocol):
    """How values compare; the scorers' pydantic `ArgumentMatch` satisfies it as it is."""

    @property
    def mode(self) -> KeyMode:
        """Key mode at every depth."""
        ...

    @property
    def trim(self) -> bool:
        """Strip whitespace around strings before comparing."""
        ...

    @property
    def casefold(self) -> bool:
        """Compare strings case-insensitively."""
        ...


@dataclass(frozen=True)
class Rules:
    """Plain `ArgumentRules` for callers without a config model (`Trace.assert_tool_call`)."""

    mode: KeyMode = "subset"
    trim: bool = False
    casefold: bool = False


def iter_argument_diffs(
    expected: Mapping[str, Any], arguments: Any, truncated: bool, rules: ArgumentRules
) -> Iterator[str]:
    """Lazily, why recorded `arguments` do not satisfy `expected` (nothing: they do).

    Arguments that are not a JSON object (or were cut mid-JSON) give one message saying what
    they are instead; otherwise the keys are walked under `rules`.
    """
    if truncated or not isinstance(arguments, dict):
        yield f"arguments are not a JSON object ({describe_raw(arguments, truncated)})"
        return
    yield from iter_dict_diffs(expected, arguments, rules, "")


def arguments_match(expected: Mapping[str, Any], arguments: Any, truncated: bool, rules: ArgumentRules) -> bool:
    """Whether `iter_argument_diffs` would find nothing, without building any message.

    Alignment asks every expected call about every same-name call and only the answer matters
    there: building the first difference's message (a JSON dump of the values) cost more than
    the comparison. A property test holds this twin to the walk above.
    """
    if rules.mode == "exact" and not rules.trim and not rules.casefold and expected != arguments:
        return False  # these rules accept only values Python finds equal: one comparison in C, no walk
    return not truncated and isinstance(arguments, dict) and _dicts_match(expected, arguments, rules)


def _dicts_match(expected: Mapping[str, Any], actual: Mapping[str, Any], rules: ArgumentRules) -> bool:
    if rules.mode in ("exact", "subset") and any(k not in actual for k in expected):
        return False
    if rules.mode in ("exact", "superset") and any(k not in expected for k in actual):
        return False
    return all(_values_match(value, actual[key], rules) for key, value in expected.items() if key in actual)


def _values_match(expected: Any, actual: Any, rules: ArgumentRules) -> bool:
    kind = type(expected)
    if kind is type(actual) and kind is not dict and kind is not list and expected == actual:
        return True
    if isinstance(expected, dict) and isinstance(actual, dict):
        return _dicts_match(expected, actual, rules)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            _values_match(e, a, rules) for e, a in zip(expected, actual, strict=True)
        )
    return _scalars_equal(expected, actual, rules)


def iter_value_diffs(expected: Any, actual: Any, rules: ArgumentRules, path: str = "") -> Iterator[str]:
    """Lazily, how two values differ, each `path: expected X, got Y` (none: they match; stop at the first)."""
    kind = type(expected)
    if kind is type(actual) and kind is not dict and kind is not list and expected == actual:
        return  # equal values of one type stay equal after trimming and case folding
    if isinstance(expected, dict) and isinstance(actual, dict):
        yield from iter_dict_diffs(expected, actual, rules, path)
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            yield f"{path or '(value)'}: expected {len(expected)} items, got {len(actual)}"
            return
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            yield from iter_value_diffs(e, a, rules, f"{path}[{i}]")
    elif not _scalars_equal(expected, actual, rules):
        yield f"{path or '(value)'}: expected {short(expected)}, got {short(actual)}"


def iter_dict_diffs(
    expected: Mapping[str, Any], actual: Mapping[str, Any], rules: ArgumentRules, path: str
) -> Iterator[str]:
    """Lazily, the differences between two objects: keys under the key mode, then shared values."""
    prefix = f"{path}." if path else ""
    if rules.mode in ("exact", "subset"):
        yield from (f"{prefix}{k}: missing (expected {short(expected[k])})" for k in expected if k not in actual)
    if rules.mode in ("exact", "superset"):
        yield from (f"{prefix}{k}: unexpected argument ({short(actual[k])})" for k in actual if k not in expected)
    for key in expected:
        if key in actual:
            yield from iter_value_diffs(expected[key], actual[key], rules, f"{prefix}{key}")


def is_number(value: Any) -> bool:
    """An int or float that is not a boolean (booleans never compare as numbers)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _norm_str(value: str, rules: ArgumentRules) -> str:
    if rules.trim:
        value = value.strip()
    return value.casefold() if rules.casefold else value


def _scalars_equal(expected: Any, actual: Any, rules: ArgumentRules) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and expected == actual
    if is_number(expected) and is_number(actual):
        return bool(expected == actual)
    if isinstance(expected, str) and isinstance(actual, str):
        return _norm_str(expected, rules) == _norm_str(actual, rules)
    return type(expected) is type(actual) and bool(expected == actual)


def describe_raw(arguments: Any, truncated: bool) -> str:
    """A short description of recorded arguments that are not a JSON object."""
    if arguments is None:
        return "not recorded"
    if truncated:
        return f"truncated: {short(arguments)}"
    return f"got {type(arguments).__name__} {short(arguments)}"


def short(value: Any, limit: int = 60) -> str:
    """A one-line repr of `value`, cut to `limit` characters (recorded content stays one line)."""
    text = repr(value) if not isinstance(value, dict | list) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
