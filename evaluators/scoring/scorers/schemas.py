"""JSON schemas of tool arguments: checked once, validators cached, the common shape checked fast.

Used by `tool_call_validity` (recorded or configured schemas), `output` (`json_schema`) and their
columnar forms; patterns run by RE2 (`_schema_regex`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError

from evaltrace.evaluators.scoring.scorers._schema_regex import has_keyword, safe_validator_class, unsupported_patterns


def check_json_schema(schema: dict[str, Any], what: str) -> dict[str, Any]:
    """Raise `ValueError` naming `what` when `schema` is not a valid JSON schema.

    A schema given in config must also be one evaltrace can check whole: a pattern the
    linear-time regex engine cannot run (backreferences, lookaround) is an error here, where a
    recorded schema's is skipped with a note.
    """
    compiled = compiled_schema(schema)
    if compiled[1] is not None:
        raise ValueError(f"{what} is not a valid JSON schema: {compiled[1]}")
    if compiled[3]:
        raise ValueError(f"{what}: {compiled[3][0]}; write it without backreferences or lookaround")
    return schema


def schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    """The validation errors of `instance` against `schema`, as `path: message`, in path order."""
    return compiled_errors(compiled_schema(schema), schema, instance)


def compiled_errors(compiled: Compiled, schema: dict[str, Any], instance: Any) -> list[str]:
    """`schema_errors` with the schema's `compiled_schema` at hand."""
    validator, _, plain, _ = compiled
    if plain is not None and _plainly_valid(plain, instance):
        return []
    if validator is None:  # an invalid schema: validate as before, without the meta-check
        validator = _validator_class(schema)(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors]


def compiled_schema(schema: Any) -> Compiled:
    """`(validator, None, plain)` for a valid schema, `(None, problem, None)` for an invalid one.

    Checking a schema against its meta-schema costs ~4 ms; every call of a tool, in every trace,
    carries the same recorded schema, so results are cached by the schema's JSON text (key order
    kept, since it decides the order of the errors). The converter hands every trace the same
    schema object for the same recorded definitions (records are read-only once built), so that
    object is looked up first, which spares encoding the schema once per tool per trace.
    """
    same = _BY_IDENTITY.get(id(schema))
    if same is not None and same[0] is schema:
        return same[1]
    try:
        key = json.dumps(schema)
    except (TypeError, ValueError):  # not JSON data: check it uncached
        return _compile(schema)
    found = _COMPILED.get(key)
    if found is None:
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        # A private copy: the caller's dict may change later, the cached validator must not.
        found = _COMPILED[key] = _compile(copy.deepcopy(schema))
    if len(_BY_IDENTITY) >= _COMPILED_MAX:
        _BY_IDENTITY.clear()
    _BY_IDENTITY[id(schema)] = (schema, found)  # the reference keeps the id from being reused
    return found


# (validator, meta-schema problem, the `_plain_shape` of the schema, what is not checked).
Compiled = tuple[Any, str | None, "_Plain | None", tuple[str, ...]]
_COMPILED: dict[str, Compiled] = {}
_COMPILED_MAX = 512
_BY_IDENTITY: dict[int, tuple[Any, Compiled]] = {}


def _compile(schema: Any) -> Compiled:
    validator_cls = _validator_class(schema)
    try:
        validator_cls.check_schema(schema)
    except SchemaError as exc:
        return None, exc.message, None, ()
    return validator_cls(schema), None, _plain_shape(schema), _unchecked(schema)


def _validator_class(schema: Any) -> Any:
    """The schema's jsonschema validator class, its patterns run by RE2 (see `_schema_regex`)."""
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    mixed = has_keyword(schema, "patternProperties") and has_keyword(schema, "unevaluatedProperties")
    return safe_validator_class(base, check_unevaluated=not mixed)


def _unchecked(schema: Any) -> tuple[str, ...]:
    """What the validator of `schema` leaves unchecked, one phrase each."""
    notes = [
        f"pattern {pattern!r} not checked (the linear-time regex engine cannot run it: {why})"
        for pattern, why in unsupported_patterns(schema)
    ]
    if has_keyword(schema, "patternProperties") and has_keyword(schema, "unevaluatedProperties"):
        notes.append("unevaluatedProperties not checked (the schema also has patternProperties)")
    return tuple(notes)


# The common tool schema, `{type: object, properties: {name: {type: T, description}}, required}`
# with scalar types, is checked by a few `isinstance` calls (jsonschema takes ~100 us per call).
# The fast check only ever answers "valid" when jsonschema would; anything else (a failure, a
# keyword it does not model, a float where an integer is expected) goes to jsonschema, so the
# error messages are jsonschema's own.
_Plain = tuple[dict[str, tuple[type, ...]], tuple[str, ...]]
_SCHEMA_WORDS = frozenset({"type", "properties", "required", "description", "title"})
_PROPERTY_WORDS = frozenset({"type", "description", "title"})
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _plain_shape(schema: Any) -> _Plain | None:
    """Property types and required names of a plain object schema, else `None`."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or not _SCHEMA_WORDS.issuperset(schema):
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(properties, dict) or not isinstance(required, list):
        return None
    if not all(isinstance(name, str) for name in required):
        return None
    types: dict[str, tuple[type, ...]] = {}
    for name, prop in properties.items():
        if not isinstance(prop, dict) or not _PROPERTY_WORDS.issuperset(prop) or "type" not in prop:
            return None
        kind = prop["type"]
        if not isinstance(kind, str) or kind not in _PLAIN_TYPES:
            return None
        types[name] = _PLAIN_TYPES[kind]
    return types, tuple(required)


def _plainly_valid(plain: _Plain, instance: Any) -> bool:
    types, required = plain
    if type(instance) is not dict or any(name not in instance for name in required):
        return False
    for name, value in instance.items():
        allowed = types.get(name)
        # Exact types: a bool is never a JSON number, and floats such as 2.0 go to jsonschema.
        if allowed is not None and type(value) not in allowed:
            return False
    return True


# Every row of a run offers the same few tools: one decoded object per schema text spares a parse
# per row and lets the validator cache (keyed first by the schema object) find it at once.
_PARAMETERS: dict[str, Any] = {}
_PARAMETERS_MAX = 512


def schema_parameters(text: str | None) -> Any:
    """A tool schema's parameters decoded from the table's JSON text (`None`: not recorded)."""
    if text is None:
        return None
    found = _PARAMETERS.get(text)
    if found is None:
        if len(_PARAMETERS) >= _PARAMETERS_MAX:
            _PARAMETERS.clear()
        found = _PARAMETERS[text] = json.loads(text)
    return found
