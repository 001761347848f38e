"""Compare tool-call arguments for `Trace.assert_tool_call`: subset or exact, numbers by value."""

from __future__ import annotations

from typing import Any


def same_value(expected: Any, actual: Any, *, exact: bool) -> bool:
    """Equal values, numbers by value (`1 == 1.0`), booleans apart from numbers; dicts as subsets unless `exact`."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return float(expected) == float(actual)
    if isinstance(expected, dict) and isinstance(actual, dict):
        return not argument_differences(expected, actual, exact=exact)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(
            same_value(e, a, exact=exact) for e, a in zip(expected, actual, strict=True)
        )
    return bool(expected == actual)


def argument_differences(expected: dict[str, Any], actual: Any, *, exact: bool) -> list[str]:
    """Readable differences between expected and actual arguments; empty when they match."""
    if not isinstance(actual, dict):
        return [f"arguments are {actual!r}, not an object"]
    found = []
    for key, want in expected.items():
        if key not in actual:
            found.append(f"missing {key!r} (expected {want!r})")
        elif not same_value(want, actual[key], exact=exact):
            found.append(f"{key!r}: expected {want!r}, got {actual[key]!r}")
    if exact:
        found += [f"unexpected {key!r}={actual[key]!r}" for key in actual if key not in expected]
    return found
