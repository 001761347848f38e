r"""JSON Schema validation whose `pattern` rules run on a linear-time regex engine (RE2).

Tool schemas are recorded in the trace, so their `pattern` and `patternProperties` rules are
untrusted input. jsonschema runs them with Python's backtracking `re`, where a pattern such as
`^(a+)+$` against 28 characters takes seconds and each two more characters four times as long.
The validator classes built here replace every keyword that runs a pattern (`pattern`,
`patternProperties`, `additionalProperties`, which skips properties matching a pattern, and
`unevaluatedProperties`) with versions that match through `google-re2`, whose time is linear in
the input whatever the pattern.

RE2 has no backreferences and no lookaround. A pattern it cannot compile is not run at all:
`unsupported_patterns` names it (with RE2's reason) so the scorer can say what it did not check,
and the keywords treat it as unknown: `pattern` then reports nothing, `patternProperties` checks
nothing under it, and `additionalProperties` flags no property it might have matched.
`unevaluatedProperties` in a schema that also has `patternProperties` is not checked either
(deciding which properties a pattern evaluated is jsonschema's own, `re`-based, code).

JSON Schema patterns are ECMA-262 regexes; RE2's syntax agrees on what tool schemas use (`\d`
and `\w` are ASCII, `$` only matches at the very end), and `\uXXXX` escapes are rewritten to
RE2's `\x{XXXX}`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonschema
import re2  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # else RE2 logs every rejected (trace-chosen) pattern to stderr
_PATTERNS: dict[str, Any] = {}
"""Compiled patterns, or the reason RE2 rejects them (a `str`), by pattern text."""
_PATTERNS_MAX = 4096
_CLASSES: dict[tuple[type[Any], bool], type[Any]] = {}


def compile_pattern(pattern: str) -> Any:
    """The RE2 regex of a JSON Schema `pattern`, or the reason (a `str`) RE2 cannot run it."""
    found = _PATTERNS.get(pattern)
    if found is None:
        if len(_PATTERNS) >= _PATTERNS_MAX:
            _PATTERNS.clear()
        try:
            found = re2.compile(_ecma_escapes(pattern), _OPTIONS)
        except re2.error as exc:
            found = _reason(exc)
        _PATTERNS[pattern] = found
    return found


def _reason(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
    return text or "not supported"


def _ecma_escapes(pattern: str) -> str:
    r"""`pattern` with ECMA's `\uXXXX` escapes written as RE2's `\x{XXXX}` (other escapes kept)."""
    if "\\u" not in pattern:
        return pattern
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char != "\\" or index + 1 == len(pattern):
            out.append(char)
            index += 1
            continue
        code = pattern[index + 2 : index + 6]
        if pattern[index + 1] == "u" and len(code) == 4 and all(c in "0123456789abcdefABCDEF" for c in code):
            out.append(f"\\x{{{code}}}")
            index += 6
        else:
            out.append(pattern[index : index + 2])  # an escaped character, possibly a backslash
            index += 2
    return "".join(out)


def unsupported_patterns(schema: Any) -> list[tuple[str, str]]:
    """Every `pattern` / `patternProperties` pattern in `schema` that RE2 cannot run, with its reason.

    The walk is iterative: a recorded schema may be nested deeper than Python's recursion limit.
    """
    found: dict[str, str] = {}
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for pattern in _patterns_of(node):
            problem = compile_pattern(pattern)
            if isinstance(problem, str):
                found.setdefault(pattern, problem)
        stack.extend(node.values())
    return list(found.items())


def _patterns_of(node: dict[str, Any]) -> Iterator[str]:
    if isinstance(node.get("pattern"), str):
        yield node["pattern"]
    if isinstance(node.get("patternProperties"), dict):
        yield from (key for key in node["patternProperties"] if isinstance(key, str))


def has_keyword(schema: Any, keyword: str) -> bool:
    """Whether any object inside `schema` (or `schema` itself) has the key `keyword`."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if keyword in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def safe_validator_class(base: type[Any], *, check_unevaluated: bool = True) -> type[Any]:
    """`base` (a jsonschema validator class) with every pattern-running keyword on RE2.

    `check_unevaluated=False` turns `unevaluatedProperties` off: pass it for schemas that also
    use `patternProperties` (see the module docstring).
    """
    key = (base, check_unevaluated)
    found = _CLASSES.get(key)
    if found is None:
        keywords: dict[str, Any] = {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        }
        if not check_unevaluated and "unevaluatedProperties" in base.VALIDATORS:
            keywords["unevaluatedProperties"] = _not_checked
        found = _CLASSES[key] = jsonschema.validators.extend(base, keywords)  # type: ignore[no-untyped-call]
    return found


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string") or not isinstance(pattern, str):
        return
    regex = compile_pattern(pattern)
    if not isinstance(regex, str) and regex.search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        regex = compile_pattern(pattern)
        if isinstance(regex, str):
            continue  # not run: named by `unsupported_patterns`
        for key, value in instance.items():
            if regex.search(key) is not None:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    # jsonschema's `additionalProperties`, with the property/pattern test on RE2.
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(allowed, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], allowed, path=extra)
    elif not allowed and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            joined = ", ".join(repr(each) for each in sorted(extras, key=str))
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")


def _additional(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The properties neither declared nor matched by a pattern (none when a pattern cannot be run)."""
    properties = schema.get("properties", {})
    regexes = [compile_pattern(p) for p in schema.get("patternProperties", {})]
    if any(isinstance(regex, str) for regex in regexes):
        return []  # any undeclared property might match the pattern that was not run
    return [
        key for key in instance if key not in properties and not any(regex.search(key) is not None for regex in regexes)
    ]


def _not_checked(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    return iter(())
