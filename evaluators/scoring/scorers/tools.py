"""Rule scorers for tool use: argument validity against schemas, and tool correctness.

`tool_call_validity` checks each call against the JSON schema of its tool: the one recorded in
the trace (`Trace.tool_schemas`, what the model was offered) or one given in config. It checks
that the tool exists among the offered tools, then validates the arguments with `jsonschema`
(required parameters, types, enums, ...), and in `strict` mode rejects parameters the schema
does not declare. Arguments that are not a JSON object (raw or truncated text) are invalid.

`tool_correctness` compares the tools used with the expected ones: `names` (F1 over the
multisets of names), `order` (longest common subsequence of names, as `2 * LCS / (|E| + |A|)`)
or `arguments` (names and arguments through the argument matcher, calls paired optimally).
"""

from __future__ import annotations

import copy
import difflib
import json
from collections import Counter
from typing import Any, ClassVar, Literal

import jsonschema
from jsonschema.exceptions import SchemaError
from pydantic import Field, field_validator

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring.scorers._schema_regex import has_keyword, safe_validator_class, unsupported_patterns
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCall,
    call_label,
    call_matches,
    describe_raw_arguments,
    lcs_pairs,
    max_bipartite_matching,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import RECORD_HINT
from evaltrace.evaluators.scoring.scorers.registry import register


def check_json_schema(schema: dict[str, Any], what: str) -> dict[str, Any]:
    """Raise `ValueError` naming `what` when `schema` is not a valid JSON schema.

    A schema given in config must also be one evaltrace can check whole: a pattern the
    linear-time regex engine cannot run (backreferences, lookaround) is an error here, where a
    recorded schema's is skipped with a note.
    """
    compiled = _compiled_schema(schema)
    if compiled[1] is not None:
        raise ValueError(f"{what} is not a valid JSON schema: {compiled[1]}")
    if compiled[3]:
        raise ValueError(f"{what}: {compiled[3][0]}; write it without backreferences or lookaround")
    return schema


def schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    """The validation errors of `instance` against `schema`, as `path: message`, in path order."""
    return _errors(_compiled_schema(schema), schema, instance)


def _errors(compiled: _Compiled, schema: dict[str, Any], instance: Any) -> list[str]:
    validator, _, plain, _ = compiled
    if plain is not None and _plainly_valid(plain, instance):
        return []
    if validator is None:  # an invalid schema: validate as before, without the meta-check
        validator = _validator_class(schema)(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}" for e in errors]


def _compiled_schema(schema: Any) -> _Compiled:
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
_Compiled = tuple[Any, str | None, "_Plain | None", tuple[str, ...]]
_COMPILED: dict[str, _Compiled] = {}
_COMPILED_MAX = 512
_BY_IDENTITY: dict[int, tuple[Any, _Compiled]] = {}


def _compile(schema: Any) -> _Compiled:
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


def closest_name(name: str, candidates: list[str]) -> str | None:
    """The most similar candidate to `name` (difflib ratio >= 0.6), if any."""
    found = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
    return found[0] if found else None


@register
class ToolCallValidity(Scorer):
    """Each tool call's arguments conform to its tool's JSON schema; value = fraction of valid calls."""

    name: ClassVar[str] = "tool_call_validity"
    reads_histories: ClassVar[bool] = False

    schemas: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """JSON schemas of tool arguments by tool name; they take precedence over the schemas recorded in the trace."""
    strict: bool = False
    """Reject arguments the schema does not declare (as if it set additionalProperties: false)."""
    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    """Minimum fraction of valid calls to pass."""
    nested: bool = False
    """Also check the calls made by nested agents."""

    @field_validator("schemas")
    @classmethod
    def _valid_schemas(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for tool, schema in value.items():
            check_json_schema(schema, f"schema of tool {tool!r}")
        return value

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Validate every call whose tool has a known schema."""
        offered = {s.name for s in trace.tool_schemas}
        schemas = {s.name: s.parameters for s in trace.tool_schemas if s.parameters is not None}
        schemas.update(self.schemas)
        calls = trace.all_tool_calls(nested=self.nested)
        if not calls:
            if self.spec_check:  # nothing to validate: no call can be invalid
                return self.result(True, 1.0, "The agent made no tool calls, so none was invalid.")
            return self.result(None, reason="The agent made no tool calls to validate.")
        if not offered and not schemas:
            return self.missing(f"No tool schemas were recorded in the trace or given in `schemas`; {RECORD_HINT}.")
        # Existence is only checked against what the model was offered; config schemas alone don't define that.
        known = offered | set(self.schemas) if offered else set()
        compiled: dict[str, _Compiled] = {}  # per tool: a trace calls the same tools many times
        findings = [self._check(i, call, known, schemas, compiled) for i, call in enumerate(calls)]
        checked = [f for f in findings if f is not None]
        if not checked:
            names = sorted({c.name for c in calls})
            return self.missing(
                f"No schema is known for any called tool ({', '.join(names)}), "
                f"or their arguments were not recorded; {RECORD_HINT}."
            )
        invalid = [problem for problem in checked if problem]
        value = (len(checked) - len(invalid)) / len(checked)
        passed = value >= self.threshold
        if invalid:
            reason = f"{len(invalid)} of {len(checked)} calls invalid: " + "; ".join(invalid[:3])
        else:
            reason = f"All {len(checked)} checked calls match their tool schemas."
        skipped = len(findings) - len(checked)
        if skipped:
            reason += f" {skipped} call(s) not checked (no schema, or arguments not recorded)."
            if passed and self.spec_check:  # a check cannot vouch for calls it could not see
                passed = False
                reason += f" A spec check must see every call: {RECORD_HINT}, or give their schemas in `schemas`."
        unchecked = [f"tool {tool!r}: {note}" for tool, entry in compiled.items() for note in entry[3]]
        if unchecked:  # patterns of recorded schemas that RE2 cannot run (see `_schema_regex`)
            reason += " Not checked: " + "; ".join(unchecked[:3]) + "."
            return self.result(
                passed, value, reason, invalid=invalid, checked=len(checked), skipped=skipped, unchecked=unchecked
            )
        return self.result(passed, value, reason, invalid=invalid, checked=len(checked), skipped=skipped)

    def _check(
        self,
        index: int,
        call: ToolCall,
        known: set[str],
        schemas: dict[str, dict[str, Any]],
        compiled: dict[str, _Compiled],
    ) -> str | None:
        """`None`: not checkable; `""`: valid; else the problem."""
        label = call_label(index, call)
        if known and call.name not in known:
            hint = closest_name(call.name, sorted(known))
            return f"{label}: tool was not offered" + (f" (did you mean {hint!r}?)" if hint else "")
        schema = schemas.get(call.name)
        if schema is None:  # no schema (offered with no parameters recorded, or not at all): nothing to check
            return None
        if call.arguments is None and not call.arguments_truncated:
            return None
        if call.arguments_truncated or not isinstance(call.arguments, dict):
            return f"{label}: arguments are not a JSON object ({describe_raw_arguments(call)})"
        entry = compiled.get(call.name)
        if entry is None:
            entry = compiled[call.name] = _compiled_schema(schema)
        if entry[1] is not None:
            return None  # the recorded schema itself is broken: not the agent's fault
        errors = _errors(entry, schema, call.arguments)
        if self.strict and isinstance(schema.get("properties"), dict):
            errors += [f"{k}: unexpected parameter" for k in call.arguments if k not in schema["properties"]]
        return f"{label}: " + "; ".join(errors) if errors else ""


ToolCorrectnessMode = Literal["names", "order", "arguments"]


@register
class ToolCorrectness(Scorer):
    """The agent used the expected tools (by names, names in order, or names and arguments)."""

    name: ClassVar[str] = "tool_correctness"
    reads_histories: ClassVar[bool] = False

    expected: list[ExpectedCall] | None = None
    """Expected calls; `None` means there is nothing to compare (not applicable)."""
    mode: ToolCorrectnessMode = "names"
    """names: F1 over tool names; order: LCS similarity of the name sequences; arguments: F1 over matching calls."""
    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    """Minimum value to pass."""
    arguments: ArgumentMatch = Field(default_factory=ArgumentMatch)
    """How arguments are compared in `arguments` mode."""
    nested: bool = False
    """Also count the calls made by nested agents."""

    def configuration_problem(self) -> str | None:
        """No expected calls configured."""
        return (
            "no expected tool calls are configured: give expected (a case's tool_calls)"
            if self.expected is None
            else None
        )

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Compare the recorded calls with `expected`."""
        if self.expected is None:
            return self.result(None, reason="No expected tool calls are configured.")
        actual = trace.all_tool_calls(nested=self.nested)
        expected_names = [e.name for e in self.expected]
        actual_names = [c.name for c in actual]
        common = _common_count(self.mode, self.expected, actual, self.arguments)
        total = len(expected_names) + len(actual_names)
        value = 1.0 if total == 0 else 2 * common / total
        passed = value >= self.threshold
        reason = correctness_reason(self.mode, expected_names, actual_names, common, value)
        return self.result(passed, value, reason, expected=expected_names, actual=actual_names)


def _common_count(mode: str, expected: list[ExpectedCall], actual: list[ToolCall], match: ArgumentMatch) -> int:
    """How many expected calls are accounted for under `mode`."""
    exp_names = [e.name for e in expected]
    act_names = [c.name for c in actual]
    if mode == "names":
        return sum((Counter(exp_names) & Counter(act_names)).values())
    if mode == "order":
        return len(lcs_pairs(len(exp_names), len(act_names), lambda i, j: exp_names[i] == act_names[j]))
    pairs = max_bipartite_matching(len(expected), len(actual), lambda i, j: call_matches(expected[i], actual[j], match))
    return len(pairs)


def correctness_reason(mode: str, expected: list[str], actual: list[str], common: int, value: float) -> str:
    """The reason text of `tool_correctness` for these names (shared with its columnar form)."""
    missing = list((Counter(expected) - Counter(actual)).elements())
    extra = list((Counter(actual) - Counter(expected)).elements())
    parts = [f"{common} of {len(expected)} expected calls matched ({mode} mode, score {value:.2f})"]
    if missing:
        parts.append(f"missing: {', '.join(missing)}")
    if extra:
        parts.append(f"unexpected: {', '.join(extra)}")
    if mode == "order" and not missing and not extra and common < len(expected):
        parts.append(f"order differs: expected {' > '.join(expected)}, got {' > '.join(actual)}")
    if mode == "arguments" and common < len(expected) and not missing:
        parts.append("some calls have different arguments")
    return "; ".join(parts) + "."
