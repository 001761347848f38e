"""The fast paths of spec loading agree with the full ones they stand in for.

- Validation: the models in strict mode (`validate_strictly`) must accept nothing the JSON Schema
  (and the full validation, `validate_with_messages`) rejects, and give the same spec when both
  accept. Fed the invalid specs of test_spec.py, more hand-picked ones, and random mutations of a
  valid spec.
- YAML: libyaml with the tree builder (`load_yaml`) must give the reference loader's data, type
  for type, or the reference's error.
- Loading leaves the garbage collector as it found it, and equal scorer configs share one scorer.
"""

from __future__ import annotations

import copy
import datetime as dt
import gc
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from evaltrace.evaluators.errors import SpecError
from evaltrace.evaluators.scoring.spec import _yaml
from evaltrace.evaluators.scoring.spec.loader import (
    load_spec,
    parse_spec_text,
    shipped_schema,
    validate_spec_data,
    validate_strictly,
    validate_with_messages,
)

ROOT = Path(__file__).resolve().parents[3]

# The invalid specs of test_spec.py's error tests, then more aimed at where strict pydantic and the
# JSON Schema could part: coercions, aliases, keys that are not strings, floats that are not numbers.
INVALID_YAML = [
    "bogus: 1\ncases: [{id: a, input: x}]\n",
    "cases: [{id: a, input: x, colour: red}]\n",
    "cases: [{id: a, input: x, expect: {output: {contians: [x]}}}]\n",
    "cases: [{id: a, input: x, expect: {tool_calls: [{name: t, args: {}}]}}]\n",
    "confidence: high\ncases: [{id: a, input: x}]\n",
    "confidence: 1.5\ncases: [{id: a, input: x}]\n",
    "cases: [{id: a, input: 5}]\n",
    "cases: [{id: a, input: x, tags: smoke}]\n",
    "cases: [{id: a, input: x, expect: {trajectory: sideways, tool_calls: []}}]\n",
    "cases: [{input: x}]\n",
    "cases: []\n",
    "description: no cases\n",
    "cases: [{id: a, input: x, expect: {output: {regex: '('}}}]\n",
    "cases: [{id: a, input: x}, {id: b, input: y}, {id: a, input: z}]\n",
    "cases: [{id: a}]\n",
    "cases: [{id: a, input: x, turns: [{input: y}]}]\n",
    "cases: [{id: a, input: x, repeat: {rule: pass@k}}]\n",
    "confidance: 0.8\ncases: [{id: a, input: x}]\n",
    "cases: [{id: a, input: 2024-01-01}]\n",
    "cases: [{id: chat, turns: [{input: a}, {input: b, expect: {output: {regex: '[z'}}}]}]\n",
    # Beyond test_spec.py:
    "confidence: true\ncases: [{id: a, input: x}]\n",
    "confidence: '0.8'\ncases: [{id: a, input: x}]\n",
    "confidence: .nan\ncases: [{id: a, input: x}]\n",
    "confidence: .inf\ncases: [{id: a, input: x}]\n",
    "confidence: -0.1\ncases: [{id: a, input: x}]\n",
    "schema_ref: x.json\ncases: [{id: a, input: x}]\n",
    "$schema: 5\ncases: [{id: a, input: x}]\n",
    "description: 5\ncases: [{id: a, input: x}]\n",
    "cases: {a: {input: x}}\n",
    "cases: [{id: '', input: x}]\n",
    "cases: [{id: 5, input: x}]\n",
    "cases: [{id: yes, input: x}]\n",
    "cases: [{id: a, input: x, repeat: {rule: pass@k, k: true}}]\n",
    "cases: [{id: a, input: x, repeat: {rule: pass@k, k: '2'}}]\n",
    "cases: [{id: a, input: x, repeat: {min_samples: 0}}]\n",
    'cases: [{id: a, input: x, repeat: "all\\n"}]\n',
    "cases: [{id: a, input: x, repeat: pass@0}]\n",
    "cases: [{id: a, input: x, repeat: sometimes}]\n",
    "cases: [{id: a, input: x, metadata: {1: one}}]\n",
    "cases: [{id: a, input: x, metadata: [1]}]\n",
    "cases: [{id: a, input: x, expect: {1: {}}}]\n",
    "cases: [{id: a, input: x, expect: {my_judge: [a]}}]\n",
    "cases: [{id: a, input: x, expect: {my_judge: text}}]\n",
    "cases: [{id: a, input: x, expect: [output]}]\n",
    "cases: [{id: a, input: x, expect: {output: {case_sensitive: 'yes'}}}]\n",
    "cases: [{id: a, input: x, expect: {output: {case_sensitive: 1}}}]\n",
    "cases: [{id: a, input: x, expect: {output: {contains: [1]}}}]\n",
    "cases: [{id: a, input: x, expect: {output: {contains: 18}}}]\n",
    "cases: [{id: a, input: x, expect: {output: {equals: [a]}}}]\n",
    "cases: [{id: a, input: x, expect: {output: {json_schema: true}}}]\n",
    "cases: [{id: a, input: x, expect: {trajectory: {mode: strict, threshold: true}, tool_calls: []}}]\n",
    "cases: [{id: a, input: x, expect: {trajectory: {mode: strict, threshold: '0.5'}, tool_calls: []}}]\n",
    "cases: [{id: a, input: x, expect: {trajectory: {mode: strict, threshold: 2}, tool_calls: []}}]\n",
    "cases: [{id: a, input: x, expect: {trajectory: {sort: strict}, tool_calls: []}}]\n",
    "cases: [{id: a, input: x, expect: {tool_calls: [{name: ''}]}}]\n",
    "cases: [{id: a, input: x, expect: {tool_calls: [{name: t, arguments: [1]}]}}]\n",
    "cases: [{id: a, input: x, expect: {tool_calls: [{name: t, arguments: {1: 2}}]}}]\n",
    "cases: [{id: a, input: x, expect: {tool_calls: {name: t}}}]\n",
    "cases: [{id: a, input: x, expect: {outcome: done}}]\n",
    "cases: [{id: a, input: x, expect: {usage: 5}}]\n",
    "cases: [{id: a, turns: []}]\n",
    "cases: [{id: a, turns: [{expect: {outcome: success}}]}]\n",
    "cases: [{id: a, turns: [{input: x, colour: red}]}]\n",
    "cases: [{id: a, turns: [{input: 5}]}]\n",
    "scorers: [{a: {}, b: {}}]\ncases: [{id: a, input: x}]\n",
    "scorers: [{}]\ncases: [{id: a, input: x}]\n",
    "scorers: [{tool_errors: [1]}]\ncases: [{id: a, input: x}]\n",
    "scorers: [5]\ncases: [{id: a, input: x}]\n",
    "scorers: tool_errors\ncases: [{id: a, input: x}]\n",
    "prices: {m: {input_per_mtok: '1', output_per_mtok: 2}}\ncases: [{id: a, input: x}]\n",
    "prices: {m: {input_per_mtok: true, output_per_mtok: 2}}\ncases: [{id: a, input: x}]\n",
    "prices: {m: {input_per_mtok: -1, output_per_mtok: 2}}\ncases: [{id: a, input: x}]\n",
    "prices: {m: {input_per_mtok: 1}}\ncases: [{id: a, input: x}]\n",
    "prices: {m: {input_per_mtok: 1, output_per_mtok: 2, extra: 3}}\ncases: [{id: a, input: x}]\n",
    "repeat: {rule: always}\ncases: [{id: a, input: x}]\n",
]

VALID_YAML = [
    "cases: [{id: a, input: x}]\n",
    "confidence: 1\ncases: [{id: a, input: x}]\n",  # an int where a float is expected: both accept
    "$schema: ./spec_schema.json\ncases: [{id: a, input: x, metadata: {when: 2024-01-01, n: [1, 2.5]}}]\n",
    "cases: [{id: a, input: x, expect: {my_judge: null, tool_calls: [{name: t, arguments: null}]}}]\n",
    "scorers: [tool_errors, {budget: {max_tool_calls: 3}}, {outcome: null}]\ncases: [{id: a, input: x}]\n",
    "prices: {m: {input_per_mtok: 1, output_per_mtok: 2.5}}\nrepeat: pass@3\ncases: [{id: a, input: x}]\n",
    "cases: [{id: a, turns: [{input: x}, {input: y, expected_output: z, expect: {outcome: success}}]}]\n",
]


def _spec_for(text: str) -> Any:
    return parse_spec_text(textwrap.dedent(text), "spec.yaml")


def _full(data: Any) -> tuple[bool, Any]:
    """What the full validation says: (accepted, the spec or the message)."""
    try:
        return True, validate_with_messages(data, "spec.yaml")
    except SpecError as exc:
        return False, str(exc)


def _strict(data: Any) -> tuple[bool, Any]:
    try:
        return True, validate_strictly(data)
    except ValidationError:
        return False, None


def _schema_accepts(data: Any) -> bool:
    return not any(True for _ in Draft202012Validator(shipped_schema()).iter_errors(data))


def assert_fast_path_agrees(data: Any) -> None:
    """Strict accepts => the schema and the full validation accept, with the same spec; load agrees with full."""
    if not isinstance(data, dict):
        return
    strict_ok, strict_spec = _strict(data)
    full_ok, full_result = _full(data)
    if strict_ok:
        assert _schema_accepts(data), data
        assert full_ok, (data, full_result)
        assert strict_spec == full_result, data
    try:
        loaded: tuple[bool, Any] = (True, validate_spec_data(data, "spec.yaml"))
    except SpecError as exc:
        loaded = (False, str(exc))
    assert loaded == (full_ok, full_result), data  # what load_spec says is the full validation's verdict


@pytest.mark.parametrize("text", INVALID_YAML)
def test_invalid_specs_are_refused_by_the_fast_path_and_reported_as_before(text: str, tmp_path: Path) -> None:
    assert_fast_path_agrees(_spec_for(text))
    path = tmp_path / "evals.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError):
        load_spec(path)


def test_a_form_only_the_full_validation_accepts_still_loads() -> None:
    # JSON Schema counts 2.0 as an integer and the models in their usual mode take it: strict mode
    # refuses it, and the full validation, run then, accepts it as before.
    data = _spec_for("cases: [{id: a, input: x, repeat: {rule: pass@k, k: 2.0}}]\n")
    assert not _strict(data)[0]
    spec = validate_spec_data(data, "spec.yaml")
    assert spec.cases[0].repeat is not None and spec.repeat_for(spec.cases[0]).k == 2


@pytest.mark.parametrize("text", VALID_YAML)
def test_valid_specs_take_the_fast_path_with_the_same_result(text: str) -> None:
    data = _spec_for(text)
    assert _strict(data)[0], text
    assert_fast_path_agrees(data)


@pytest.mark.usefixtures("isolated_registry")
def test_sample_specs_take_the_fast_path() -> None:
    for path in sorted((ROOT / "samples").glob("*.yaml")):
        data = parse_spec_text(path.read_text(encoding="utf-8"), str(path))
        assert _strict(data)[0], path
        assert_fast_path_agrees(data)


_RICH_CASE: dict[str, Any] = {
    "id": "trip",
    "description": "a trip",
    "input": "Plan a trip to Paris",
    "tier": "smoke",
    "tags": ["travel"],
    "expected_output": "Paris is sunny",
    "expect": {
        "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}],
        "trajectory": {"mode": "recall", "threshold": 0.5},
        "output": {"contains": ["Paris"], "not_contains": "error", "regex": "\\d+", "case_sensitive": False},
        "usage": {"total": {"total_tokens": {"max": 100}}},
        "outcome": "success",
        "answer": {"facts": ["sunny"]},
        "my_judge": {"tasks": ["plan"]},
    },
    "repeat": {"rule": "pass@k", "k": 2, "min_samples": 1},
    "metadata": {"owner": "me"},
}
_RICH_SPEC: dict[str, Any] = {
    "$schema": "./spec_schema.json",
    "description": "rich",
    "confidence": 0.5,
    "scorers": ["tool_errors", {"budget": {"max_tool_calls": 3}}],
    "repeat": "majority",
    "prices": {"m": {"input_per_mtok": 1, "output_per_mtok": 2.5}},
    "metadata": {},
    "cases": [
        _RICH_CASE,
        {"id": "chat", "turns": [{"input": "hi"}, {"input": "and?", "expect": {"outcome": "failure"}}]},
    ],
}
_ODD_VALUES = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        1,
        2,
        -1,
        0.5,
        2.0,
        1.5,
        math.nan,
        math.inf,
        "",
        "x",
        "0.5",
        "1",
        "true",
        "all",
        "pass@2",
        "strict",
        "success",
        "pass@k",
        [],
        ["x"],
        [1],
        {},
        {"x": 1},
        {1: "x"},
        {"name": "t"},
        dt.date(2024, 1, 1),
    ]
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out.extend(_paths(child, (*prefix, index)))
    return out


_PATHS = _paths(_RICH_SPEC)[1:]


def _mutate(spec: dict[str, Any], path: tuple[Any, ...], action: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    parent: Any = out
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "replace":
        parent[last] = value
    elif action == "delete" and isinstance(parent, dict):
        del parent[last]
    elif action == "add_key" and isinstance(parent[last], dict):
        parent[last][value if isinstance(value, str) and value else "surprise"] = value
    elif action == "rename" and isinstance(parent, dict):
        parent["schema_ref" if last == "$schema" else f"{last}_"] = parent.pop(last)
    return out


@settings(max_examples=400, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.sampled_from(_PATHS), st.sampled_from(["replace", "delete", "add_key", "rename"]), _ODD_VALUES),
        min_size=1,
        max_size=3,
    )
)
def test_mutated_specs_never_pass_the_fast_path_alone(mutations: list[tuple[tuple[Any, ...], str, Any]]) -> None:
    spec = _RICH_SPEC
    for path, action, value in mutations:
        try:
            spec = _mutate(spec, path, action, value)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed or replaced what this path names
    assert_fast_path_agrees(spec)


def test_the_unmutated_rich_spec_is_valid() -> None:
    assert _strict(_RICH_SPEC)[0]  # so that the mutations start from a spec the fast path accepts
    assert_fast_path_agrees(_RICH_SPEC)


# --- YAML ------------------------------------------------------------------------------------------

YAML_DOCUMENTS = [
    *INVALID_YAML,
    *VALID_YAML,
    "a: yes\nb: no\nc: on\nd: off\ne: ~\nf: null\ng: 1e3\nh: 1.0e3\ni: 017\nj: 0x1F\nk: 1_000\nl: 1:20\nm: .NaN\n",
    "dates: [2024-01-01, 2024-01-01T10:00:00Z, '2024-01-01', 2001-12-14 21:59:43.10 -5]\n",
    "s: !!str 12\nb: !!binary aGVsbG8=\nset: !!set {a, b}\nomap: !!omap [a: 1, b: 2]\npairs: !!pairs [a: 1, a: 2]\n",
    "base: &b {x: 1, y: [1, 2]}\nuse: *b\nmerged: {<<: *b, y: 3}\nboth: {<<: [*b, {z: 1}], x: 2}\n",
    "cases:\n  - id: a\n    input: x\n    input: y\n",
    "base: &b {id: a}\ncases:\n  - <<: *b\n    input: x\n    input: y\n",
    "{[a, b]: 1}\n",
    "a: [unclosed\n",
    "a: b: c\n",
    "- a\nb: c\n",
    "a: 1\n---\nb: 2\n",
    "a: !!python/object/apply:os.system [echo hi]\n",
    "a: !custom x\n",
    "a: *nowhere\n",
    "recursive: &r [1, *r]\n",
    "text: |\n  line one\n  line two\n\nfolded: >-\n  a\n  b\n",
    "tab:\t1\n",  # libyaml takes it, PyYAML's scanner does not: a text with a tab goes to the reference
    "a: 'x\ty'\n",
    "\ufeffa: 1\n",
    "a: 'it''s'\nb: \"\\u00e9\\n\"\nc: é\n",
    "? complex\n: key\n",
    "= : value\n",
    "a: !!int 12\nb: !!float 1\nc: !!bool yes\nd: !!null ''\n",
    "a: !!int abc\n",
    "",
    "# only a comment\n",
    "plain\n",
    "- 1\n- [2, {3: 4}]\n",
    "a:\n  - b\n  -\n  - c: \n",
    "{a: 1, b: {c: [d, {e: f}]}, 'g': \"h\"}\n",
    "a: 0o17\nb: +12\nc: -0\nd: 0b101\ne: 190:20:30\nf: 6.8523015e+5\ng: .inf\nh: -.Inf\n",
    "key with spaces: value with: colon\nurl: http://example.com/a#b\n",
]


def _typed(value: Any) -> Any:
    """`value` with each scalar's type attached, so that 1, 1.0 and True compare unequal."""
    if isinstance(value, dict):
        return ("dict", [(_typed(k), _typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_typed(v) for v in value])
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    if isinstance(value, set | frozenset):
        return (type(value).__name__, sorted(map(repr, value)))
    return (type(value).__name__, value)


def _reference(text: str) -> tuple[bool, Any]:
    try:
        return True, _typed(yaml.load(text, Loader=_yaml._StrictLoader))  # a SafeLoader subclass
    except (yaml.YAMLError, ValueError) as exc:
        return False, (type(exc), str(exc))


def _loaded(text: str) -> tuple[bool, Any]:
    try:
        return True, _typed(_yaml.load_yaml(text))
    except (yaml.YAMLError, ValueError) as exc:
        return False, (type(exc), str(exc))


@pytest.mark.parametrize("text", YAML_DOCUMENTS)
def test_yaml_fast_path_gives_the_reference_data_or_error(text: str) -> None:
    if text.startswith("recursive:"):
        data = _yaml.load_yaml(text)
        reference = yaml.load(text, Loader=_yaml._StrictLoader)
        assert data["recursive"][1] is data["recursive"] and reference["recursive"][1] is reference["recursive"]
        return
    assert _loaded(text) == _reference(text)


def test_yaml_fast_path_is_taken_and_aliases_share_one_object() -> None:
    assert _yaml._FastLoader is not None  # the wheels ship libyaml; without it only the reference runs
    text = "base: &b {x: [1]}\nuse: *b\n"
    node = _yaml._FastLoader(text).get_single_node()
    data = _yaml._TreeBuilder(_yaml._FastLoader(text)).build(node)
    assert data == {"base": {"x": [1]}, "use": {"x": [1]}} and data["use"] is data["base"]


def test_yaml_fast_path_rejects_a_duplicate_key_and_the_reference_words_it() -> None:
    text = "cases:\n  - id: a\n    input: x\n    input: y\n"
    assert _yaml._FastLoader is not None
    with pytest.raises(yaml.constructor.ConstructorError):
        _yaml._fast_load(text, _yaml._FastLoader)
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'input'") as info:
        _yaml.load_yaml(text)
    assert info.value.problem_mark is not None and info.value.problem_mark.line == 3


def test_benchmark_shaped_spec_parses_the_same_on_both_paths() -> None:
    cases = []
    for i in range(200):
        cases.append(
            f"- id: trip-{i:03d}\n  input: 'Plan a trip #{i} leaving 2025-04-19: weather?'\n  tags: [travel, x{i}]\n"
            f"  expect:\n    tool_calls:\n    - {{name: get_weather, arguments: {{city: Paris, days: {i % 9}}}}}\n"
            f"    trajectory: {{mode: recall, threshold: 0.8}}\n    output: {{contains: [Paris], regex: 'EUR \\d+'}}\n"
        )
    text = "confidence: 0.8\nscorers: [tool_errors]\ncases:\n" + "".join(cases)
    assert _loaded(text) == _reference(text)
    assert _loaded(text)[0]


# --- what loading leaves behind ----------------------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evals.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


SHARED = """\
cases:
  - {id: a, input: x, expect: {usage: {total: {total_tokens: {max: 100}}}, output: {contains: [A]}}}
  - {id: b, input: y, expect: {usage: {total: {total_tokens: {max: 100}}}, output: {contains: [B]}}}
  - {id: c, input: z, expect: {usage: {total: {total_tokens: {max: 100.0}}}, output: {contains: [A]}}}
"""


def test_equal_scorer_configs_share_one_scorer_and_different_ones_do_not(tmp_path: Path) -> None:
    loaded = load_spec(_write(tmp_path, SHARED))
    (a_output, a_usage), (b_output, b_usage), (c_output, c_usage) = (loaded.case_scorers[i][0] for i in "abc")
    assert a_usage is b_usage  # the same config: one instance
    assert c_usage is not a_usage  # 100.0 is not 100 in a config: built apart
    assert a_output is c_output and a_output is not b_output
    assert a_output.model_dump()["contains"] == ["A"] and b_output.model_dump()["contains"] == ["B"]
    assert all(scorer.spec_check for scorer in (a_usage, c_usage, a_output, b_output))


def test_loading_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    path = _write(tmp_path, SHARED)
    assert gc.isenabled()
    load_spec(path)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    with pytest.raises(SpecError):
        load_spec(_write(tmp_path, "cases: []\n"))
    assert gc.isenabled()
    gc.disable()
    try:
        load_spec(_write(tmp_path, SHARED))
        assert not gc.isenabled()  # a program that turned it off keeps it off
    finally:
        gc.enable()
    kept = [object() for _ in range(3)]
    gc.freeze()  # a program that froze its objects (before forking workers) keeps them frozen
    try:
        frozen = gc.get_freeze_count()
        load_spec(_write(tmp_path, SHARED))
        # A frozen object still dies when its last reference goes, so the count may drop by the few
        # the loading frees; an unfreeze would empty it.
        assert gc.get_freeze_count() > frozen * 0.9
    finally:
        gc.unfreeze()
    del kept


# Where libyaml and PyYAML's pure-Python parser could differ: directives, line breaks, flow edge
# cases, block scalars, odd characters and scalar forms.
PARSER_EDGES = [
    "%YAML 1.2\n---\na: 1\n",
    "%YAML 1.1\n---\na: 1\n",
    "%TAG !e! tag:example.com,2000:\n---\na: !e!x 1\n",
    "k" * 1100 + ": v\n",
    "a:\r\n  b: 1\r\n",
    "a:\r  b: 1\r",
    "a: 1\x85b: 2\n",
    "a: x\u2028y\n",
    "{a:1}\n",
    "[a:1]\n",
    "{a: 1, b}\n",
    "[a: 1]\n",
    "- - a\n  - b\n",
    "&x a: *x\n",
    "? - a\n: b\n",
    'a: "x\n  y"\n',
    "a: |2\n   x\n",
    "a: >\n\n x\n\n",
    "--- >\n x\n... \n",
    "a: @x\n",
    "a: `x\n",
    "a: x #c\nb: y#c\n",
    "a: - b\n",
    "a: [b, ]\n",
    "a: {b: , }\n",
    "a: !<tag:yaml.org,2002:str> 1\n",
    "a: ! 1\n",
    "a: 'x'y\n",
    'a: "\\x41\\u0042\\U00000043"\n',
    'a: "\\q"\n',
    "a: b\n c\n",
    " a: 1\n",
    "a: 1\n b: 2\n",
    "a: \uffff\n",
    "a: \x7f\n",
    "a: \x00\n",
    "a: 12:30\nb: 1_2_3\nc: 0b1_0\nd: 0x_1\n",
    "a: 2001-12-14t21:59:43.10-05:00\nb: 2002-12-14\nc: 2001-12-14 21:59:43.10\n",
    "a: 1.\nb: .5\nc: 1e5\nd: 1.0e+5\ne: -.5E-3\n",
]


@pytest.mark.parametrize("text", PARSER_EDGES)
def test_yaml_parser_edges_give_the_reference_data_or_error(text: str) -> None:
    assert _loaded(text) == _reference(text)
