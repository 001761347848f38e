"""Loading a spec file: parse YAML/JSON, validate against the shipped JSON Schema and the models, build scorers.

Validation happens in three layers, each error one line naming the file, the case and the key:
the JSON Schema (structure, unknown keys, types), the pydantic models (regular expressions, the
shape of a case, duplicate ids) and the scorers' own config models. YAML is parsed with the safe
loader (no Python objects) and duplicate keys are rejected rather than silently overwritten.

A valid spec is validated once: the models in strict mode (no coercion, field names only by
their alias) accept nothing the JSON Schema rejects, so a spec they accept is valid. Only when they
reject it does the JSON Schema walk run, followed by the models in their usual mode, to find the
message; that second pass also decides, so the few inputs the strict pass is stricter about than
the schema (`k: 2.0`) load as they always did. A spec compiled once is read back from the cache
(`cache.py`) until its text or evaltrace changes: no validation at all. Loading pauses the cyclic garbage collector: the
spec's data is a large tree of new objects with no cycle to find, and scanning it again and again
as it grows cost more than the rest of a large spec's validation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from evaltrace.collector.gc_policy import collections_paused
from evaltrace.evaluators.errors import SpecError
from evaltrace.evaluators.scoring.columns import prepare
from evaltrace.evaluators.scoring.scorers.base import Scorer, is_builtin
from evaltrace.evaluators.scoring.spec._errors import locate, render_pydantic_error, render_schema_error
from evaltrace.evaluators.scoring.spec._expect import (
    ScorerBuilder,
    ScorerRequest,
    expect_requests,
    scorer_ref_request,
    undeclared_expect_key,
)
from evaltrace.evaluators.scoring.spec.cache import SpecEntry
from evaltrace.evaluators.scoring.spec.model import Case, Expect, ExpectedToolCall, Spec, normalize_input
from evaltrace.evaluators.scoring.spec.scorer_infos import ScorerList, ScorerRow, scorer_row


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with its scorers built."""

    path: str
    """The spec file as the user named it."""
    spec: Spec
    global_scorers: tuple[Scorer, ...]
    """The spec's `scorers:`, applied to every entry."""
    case_scorers: dict[str, tuple[tuple[Scorer, ...], ...]]
    """Per case id, the scorers of each turn (one tuple for a single-turn case), globals first."""
    scorer_rows: list[ScorerRow]
    """The report's scorer list, made when compiled (`scorer_infos.py`): each (name, hash) once, first seen first."""
    case_rows: dict[str, tuple[int, ...]]
    """Per case id, its scorers' (all turns', in order) rows in `scorer_rows`."""
    by_input: dict[str, list[Case]]
    """Per whitespace-normalised input (a multi-turn case's first turn's), its cases in file order."""

    @property
    def cases(self) -> list[Case]:
        """The spec's cases, in file order."""
        return list(self.spec.cases)

    def scorer_infos(self, cases: Iterable[Case]) -> ScorerList:
        """The report's scorer list for these cases: their scorers, each (name, hash) once, first seen first."""
        rows = self.scorer_rows
        return ScorerList([rows[i] for i in dict.fromkeys(i for case in cases for i in self.case_rows[case.id])])


def load_spec(path: str | Path, *, cache: bool = True) -> LoadedSpec:
    """Read, validate and compile a spec file, or read it back compiled from the cache.

    Args:
        path: a `.yaml`/`.yml` or `.json` file.
        cache: read and keep the compiled spec in the cache (`cache.py`).

    Returns:
        The spec with every scorer instantiated.

    Raises:
        SpecError: the file is missing, malformed, or invalid; the message names the file, case and key.
    """
    label = str(path)
    data = _read(Path(path), label)
    json_syntax = label.endswith(".json")
    with collections_paused(settle=True):  # the spec lives as long as the run
        entry = SpecEntry.open(data, json_syntax=json_syntax) if cache else None
        known = _read_back(entry)
        if known is not None:
            return replace(known, path=label)
        # The parsed data is freed as soon as it is validated: the collector, once back, has only
        # the spec's models and scorers left to look at.
        spec = validate_spec_data(parse_spec_text(_decode(data, label), label, json_syntax=json_syntax), label)
        loaded = compile_spec(spec, label)
        # A plugin's scorer is not kept: its class may change, or be gone, with no key changing.
        if entry is not None and all(
            is_builtin(type(s)) for turns in loaded.case_scorers.values() for s in _flat(turns)
        ):
            entry.write(loaded)
        return loaded


def _read_back(entry: SpecEntry | None) -> LoadedSpec | None:
    """The compiled spec `entry` holds (its scorers' hashes kept with them); `None` on a miss."""
    known = entry.read() if entry is not None else None
    return known if isinstance(known, LoadedSpec) else None


def _read(path: Path, label: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"{label}: spec file not found") from None
    except OSError as exc:
        raise SpecError(f"{label}: cannot read spec file: {exc}") from None


def _decode(data: bytes, label: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"{label}: cannot read spec file: {exc}") from None


def parse_spec_text(text: str, label: str, *, json_syntax: bool = False) -> Any:
    """Parse spec text (YAML, or JSON when `json_syntax`); syntax errors name the line."""
    if json_syntax:
        try:
            return json.loads(text, object_pairs_hook=_no_duplicate_pairs)
        except json.JSONDecodeError as exc:
            raise SpecError(f"{label}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from None
        except _DuplicateKeyError as exc:
            raise SpecError(f"{label}: duplicate key {exc.key!r}") from None
    return _parse_yaml(text, label)


def _parse_yaml(text: str, label: str) -> Any:
    # Imported here: a JSON spec (the large ones) needs no YAML parser.
    import yaml

    from evaltrace.evaluators.scoring.spec._yaml import load_yaml

    try:
        # Only PyYAML's safe constructors: no Python object is ever constructed from a spec.
        return load_yaml(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = exc.problem or exc.context or "malformed YAML"
        raise SpecError(f"{label}: {where}invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"{label}: invalid YAML: {exc}") from None


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # the usual case costs one dict; looking for the culprit only on error
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return out


@cache
def shipped_schema() -> dict[str, Any]:
    """The JSON Schema shipped with evaltrace (`evaluators/scoring/spec/spec_schema.json`)."""
    text = resources.files("evaltrace.evaluators.scoring.spec").joinpath("spec_schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_spec_data(data: Any, label: str) -> Spec:
    """Validate parsed spec data: once, strictly, when it is valid; fully, for the message, when not.

    Raises:
        SpecError: naming the file, the case and the key path.
    """
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise SpecError(f"{label}: a spec is a mapping with a 'cases' list, got {got}")
    try:
        return validate_strictly(data)
    except ValidationError:
        return validate_with_messages(data, label)  # finds the message, or accepts what only strict mode refused


def validate_with_messages(data: dict[str, Any], label: str) -> Spec:
    """The full validation: the JSON Schema walk, unique case ids, then the models in their usual mode.

    Raises:
        SpecError: the first error, naming the file, the case and the key path.
    """
    # Imported here: a valid spec is never walked by the JSON Schema validator (see the module docstring).
    from jsonschema import Draft202012Validator

    errors = Draft202012Validator(shipped_schema()).iter_errors(data)
    # `expect` is the one object whose undeclared keys (scorers' names) the schema admits by type.
    message = render_schema_error(label, data, errors, undeclared_expect_key)
    if message is not None:
        raise SpecError(message)
    _check_unique_ids(data, label)
    try:
        return Spec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(render_pydantic_error(label, data, exc)) from None


def validate_strictly(data: dict[str, Any]) -> Spec:
    """The one validation of a valid spec: the models in strict mode, keys only by their alias.

    Strict mode takes no string for a number or boolean and no number for a string, as the JSON
    Schema; `by_name=False` refuses `schema_ref`, which the schema knows only as `$schema`. So
    whatever this accepts, the schema accepts too (tests/evaluators/scoring/test_spec_fast_path.py holds
    the two against each other).

    Raises:
        ValidationError: the spec is invalid, or uses a form only the full validation accepts.
    """
    return Spec.model_validate(data, strict=True, by_name=False)


def _check_unique_ids(data: dict[str, Any], label: str) -> None:
    # Done on the raw data so the message can point at the second case carrying the id.
    seen: set[str] = set()
    for index, case in enumerate(data["cases"]):
        case_id = case["id"]
        if case_id in seen:
            raise SpecError(f"{label}: case #{index + 1}: id: duplicate case id {case_id!r} (case ids must be unique)")
        seen.add(case_id)


def compile_spec(spec: Spec, label: str) -> LoadedSpec:
    """Build every scorer of the spec; errors name the file, case and key.

    Cases asking for the same scorer with the same config share one (immutable) instance.
    """
    _share_equal_parts(spec)
    builder = ScorerBuilder()
    globals_ = tuple(builder.build(scorer_ref_request(ref, i), label) for i, ref in enumerate(spec.scorers))
    per_case: dict[str, tuple[tuple[Scorer, ...], ...]] = {}
    for case in spec.cases:
        where = f"{label}: case {case.id!r}"
        if case.turns is not None:
            expects = [(turn.expect, f"turns[{i}].expect") for i, turn in enumerate(case.turns)]
        else:
            expects = [(case.expect, "expect")]
        per_case[case.id] = tuple(globals_ + _build(builder, expect, prefix, where) for expect, prefix in expects)
    rows = _ScorerRows()
    return LoadedSpec(
        path=label,
        spec=spec,
        global_scorers=globals_,
        case_scorers=per_case,
        case_rows={case_id: tuple(rows.index(s) for s in _flat(turns)) for case_id, turns in per_case.items()},
        scorer_rows=rows.rows,
        by_input=_by_input(spec.cases),
    )


def _by_input(cases: list[Case]) -> dict[str, list[Case]]:
    index: dict[str, list[Case]] = {}
    for case in cases:
        text = case.input if case.turns is None else case.turns[0].input
        key = normalize_input(text)
        if key is not None:  # the input itself where it is normal already: one string in the cache entry
            index.setdefault(text if key == text else key, []).append(case)
    return index


def _share_equal_parts(spec: Spec) -> None:
    """Make equal expected calls, trajectory options and output checks one object each, in place.

    The peer spec's 10,000 cases expect 48,066 calls, 3,330 distinct: shared, its cache entry holds a
    third of the models and is read back in about half the time. Equal as `ScorerBuilder`'s configs
    (`repr`s: every type and value told apart, key order kept), with the same keys set. What is
    replaced was just validated and is frozen: no holder can tell.
    """
    calls: dict[tuple[str, str, int], ExpectedToolCall] = {}  # the name is always set: the count tells the rest
    parts: dict[tuple[type, str, frozenset[str]], Any] = {}
    for case in spec.cases:
        for expect in [turn.expect for turn in case.turns] if case.turns is not None else [case.expect]:
            if expect is None:
                continue
            if expect.tool_calls:
                expect.tool_calls[:] = [
                    calls.setdefault((call.name, repr(call.arguments), len(call.__pydantic_fields_set__)), call)
                    for call in expect.tool_calls
                ]
            for key in ("trajectory", "output"):
                if isinstance(part := expect.__dict__[key], BaseModel):
                    found = (type(part), repr(part.__dict__), frozenset(part.__pydantic_fields_set__))
                    expect.__dict__[key] = parts.setdefault(found, part)


class _ScorerRows:
    """The spec's distinct scorers' rows (`scorer_row`), in the order first met."""

    def __init__(self) -> None:
        self.rows: list[ScorerRow] = []
        self._by_object: dict[int, int] = {}  # shared scorers (the globals) are dumped and hashed once
        self._by_key: dict[tuple[str, str], int] = {}

    def index(self, scorer: Scorer) -> int:
        """`scorer`'s row; its columnar form's plan made too (kept in the cache)."""
        known = self._by_object.get(id(scorer))
        if known is None:
            prepare(scorer)
            row = scorer_row(scorer)
            known = self._by_object[id(scorer)] = self._by_key.setdefault((row[0], row[2]), len(self.rows))
            if known == len(self.rows):
                self.rows.append(row)
        return known


def _flat(turns: tuple[tuple[Scorer, ...], ...]) -> list[Scorer]:
    return [scorer for turn in turns for scorer in turn]


def _build(builder: ScorerBuilder, expect: Expect | None, prefix: str, where: str) -> tuple[Scorer, ...]:
    if expect is None:
        return ()
    try:
        requests: list[ScorerRequest] = expect_requests(expect, prefix)
    except ValueError as exc:
        raise SpecError(f"{where}: {exc}") from None
    return tuple(builder.build(request, where) for request in requests)


def split_spec_arg(value: str) -> tuple[str, str | None]:
    """Split `file.yaml::case_id` into the file and the case id (`None` without `::`).

    A value naming an existing file is taken whole, so a file name containing `::` still works.
    """
    if "::" not in value or Path(value).is_file():
        return value, None
    file, _, case_id = value.partition("::")
    return file, case_id or None


__all__ = ["LoadedSpec", "compile_spec", "load_spec", "locate", "parse_spec_text", "split_spec_arg"]
