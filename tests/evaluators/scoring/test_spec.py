"""Spec files: loading YAML and JSON, the expect -> scorer mapping, and errors naming file, case and key."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from evaltrace.evaluators.errors import SpecError
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec, load_spec, split_spec_arg
from evaltrace.evaluators.scoring.spec.model import RepeatPolicy, resolve_repeat

CONTRACT_SPEC = """\
confidence: 0.8
scorers: [tool_errors]
cases:
  - id: paris-weather
    input: "What's the weather in Paris?"
    tier: smoke
    expect:
      tool_calls:
        - {name: get_weather, arguments: {city: Paris}}
      trajectory: in_order
      output:
        contains: ["18"]
        not_contains: ["error"]
        regex: "\\\\d+"
"""


def write(tmp_path: Path, text: str, name: str = "evals.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_error(tmp_path: Path, text: str, name: str = "evals.yaml") -> str:
    path = write(tmp_path, text, name)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message.removeprefix(f"{path}: ")


def scorer_names(loaded: LoadedSpec, case_id: str, turn: int = 0) -> list[str]:
    return [s.name for s in loaded.case_scorers[case_id][turn]]


def test_contract_example_loads_with_its_scorers(tmp_path: Path) -> None:
    loaded = load_spec(write(tmp_path, CONTRACT_SPEC))
    assert loaded.spec.confidence == 0.8
    (case,) = loaded.cases
    assert (case.id, case.tier, case.input) == ("paris-weather", "smoke", "What's the weather in Paris?")
    assert scorer_names(loaded, "paris-weather") == ["tool_errors", "trajectory", "output"]
    trajectory = loaded.case_scorers["paris-weather"][0][1].model_dump()
    assert trajectory["mode"] == "in_order"
    assert trajectory["expected"] == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    output = loaded.case_scorers["paris-weather"][0][2].model_dump()
    assert (output["contains"], output["not_contains"], output["regex"]) == (["18"], ["error"], "\\d+")


def test_json_spec_loads_the_same(tmp_path: Path) -> None:
    import yaml

    data = yaml.safe_load(CONTRACT_SPEC)
    from_json = load_spec(write(tmp_path, json.dumps(data), "evals.json"))
    from_yaml = load_spec(write(tmp_path, CONTRACT_SPEC))
    assert from_json.spec == from_yaml.spec
    assert [s.config_hash() for s in from_json.case_scorers["paris-weather"][0]] == [
        s.config_hash() for s in from_yaml.case_scorers["paris-weather"][0]
    ]


def test_every_expect_key_maps_to_its_scorer(tmp_path: Path) -> None:
    spec = """\
    cases:
      - id: all
        input: hi
        expect:
          tool_calls: [{name: search}]
          trajectory: {mode: precision, threshold: 0.5, arguments: {mode: exact}}
          tool_correctness: {mode: names}
          output: {contains: "x"}
          steps: {not_contains: [{name: delete}]}
          usage: {total: {total_tokens: {max: 100}}}
          latency: {max_seconds: 5}
          cost: {max_usd: 0.1}
          budget: {max_tool_calls: 3}
          outcome: success
          answer: {facts: ["18"]}
          tool_name_reliability: {}
    """
    loaded = load_spec(write(tmp_path, spec))
    assert scorer_names(loaded, "all") == [
        "trajectory",
        "tool_correctness",
        "output",
        "steps",
        "usage",
        "latency",
        "cost",
        "budget",
        "outcome",
        "answer_quality",
        "tool_name_reliability",
    ]
    by_name = {s.name: s.model_dump() for s in loaded.case_scorers["all"][0]}
    assert by_name["trajectory"]["mode"] == "precision" and by_name["trajectory"]["threshold"] == 0.5
    assert by_name["trajectory"]["arguments"]["mode"] == "exact"
    assert by_name["tool_correctness"]["expected"] == [{"name": "search", "arguments": None}]
    assert by_name["outcome"]["expected"] == "success"
    assert by_name["output"]["contains"] == ["x"]
    assert by_name["answer_quality"]["facts"] == ["18"]


def test_global_scorer_with_config_applies_to_every_case(tmp_path: Path) -> None:
    spec = """\
    scorers: [{tool_errors: {max_errors: 2}}]
    cases:
      - {id: a, input: one}
      - {id: b, input: two, expect: {outcome: success}}
    """
    loaded = load_spec(write(tmp_path, spec))
    assert scorer_names(loaded, "a") == ["tool_errors"]
    assert scorer_names(loaded, "b") == ["tool_errors", "outcome"]
    assert loaded.case_scorers["a"][0][0].model_dump()["max_errors"] == 2


def test_multi_turn_case_has_scorers_per_turn(tmp_path: Path) -> None:
    spec = """\
    scorers: [tool_errors]
    cases:
      - id: memory
        description: remembers the name
        turns:
          - input: Hi, I am David
          - input: What's my name?
            expect: {output: {contains: David}}
    """
    loaded = load_spec(write(tmp_path, spec))
    (case,) = loaded.cases
    assert case.is_multi_turn and case.turns is not None and len(case.turns) == 2
    assert scorer_names(loaded, "memory", 0) == ["tool_errors"]
    assert scorer_names(loaded, "memory", 1) == ["tool_errors", "output"]


def test_repeat_shorthands_and_defaults(tmp_path: Path) -> None:
    spec = """\
    repeat: all
    cases:
      - {id: a, input: one}
      - {id: b, input: two, repeat: pass@3}
      - {id: c, input: three, repeat: {rule: majority, min_samples: 3}}
    """
    loaded = load_spec(write(tmp_path, spec))
    rules = {case.id: loaded.spec.repeat_for(case) for case in loaded.cases}
    assert rules["a"] == RepeatPolicy(rule="all")
    assert rules["b"] == RepeatPolicy(rule="pass@k", k=3)
    assert rules["c"] == RepeatPolicy(rule="majority", min_samples=3)
    assert resolve_repeat(None) == RepeatPolicy(rule="mean")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bogus: 1\ncases: [{id: a, input: x}]\n", "bogus: unknown key; valid keys: $schema, description, confidence"),
        ("cases: [{id: a, input: x, colour: red}]\n", "case 'a': colour: unknown key; valid keys: id, description"),
        (
            "cases: [{id: a, input: x, expect: {output: {contians: [x]}}}]\n",
            "case 'a': expect.output.contians: unknown key (did you mean 'contains'?); valid keys: contains,",
        ),
        (
            "cases: [{id: a, input: x, expect: {tool_calls: [{name: t, args: {}}]}}]\n",
            "case 'a': expect.tool_calls[0].args: unknown key; valid keys: name, arguments",
        ),
        ("confidence: high\ncases: [{id: a, input: x}]\n", "confidence: expected number or null, got string 'high'"),
        ("confidence: 1.5\ncases: [{id: a, input: x}]\n", "confidence: 1.5 is greater than the maximum of 1"),
        ("cases: [{id: a, input: 5}]\n", "case 'a': input: expected string or null, got number 5"),
        ("cases: [{id: a, input: x, tags: smoke}]\n", "case 'a': tags: expected array, got string 'smoke'"),
        (
            "cases: [{id: a, input: x, expect: {trajectory: sideways, tool_calls: []}}]\n",
            "case 'a': expect.trajectory: 'sideways' is not one of 'strict', 'in_order', 'any_order', 'superset',",
        ),
        ("cases: [{input: x}]\n", "case #1: missing required key 'id'"),
        ("cases: []\n", "cases: [] should be non-empty"),
        ("description: no cases\n", "missing required key 'cases'"),
        (
            "cases: [{id: a, input: x, expect: {output: {regex: '('}}}]\n",
            "case 'a': expect.output.regex: invalid regular expression '(': missing ), unterminated subpattern",
        ),
        (  # the pattern as the user wrote it, not its repr with doubled backslashes
            "cases: [{id: a, input: x, expect: {output: {regex: '\\d+('}}}]\n",
            "case 'a': expect.output.regex: invalid regular expression '\\d+(': missing ), unterminated subpattern",
        ),
        (
            "cases: [{id: a, input: x}, {id: b, input: y}, {id: a, input: z}]\n",
            "case #3: id: duplicate case id 'a' (case ids must be unique)",
        ),
        ("cases: [{id: a}]\n", "case 'a': a case needs 'input' (or 'turns' for a multi-turn case)"),
        (
            "cases: [{id: a, input: x, turns: [{input: y}]}]\n",
            "case 'a': a multi-turn case puts 'input' and 'expect' inside each turn, not on the case",
        ),
        ("cases: [{id: a, input: x, repeat: {rule: pass@k}}]\n", "case 'a': repeat: rule 'pass@k' needs k (e.g. k: 3)"),
        (
            "cases: [{id: a, input: x, expect: {trajectory: strict}}]\n",
            "case 'a': expect.trajectory: needs expect.tool_calls (the expected calls)",
        ),
    ],
)
def test_spec_errors_name_file_case_and_key(tmp_path: Path, text: str, expected: str) -> None:
    assert load_error(tmp_path, text).startswith(expected)


def test_unknown_expect_key_is_named_with_valid_choices(tmp_path: Path) -> None:
    message = load_error(tmp_path, "cases: [{id: paris, input: x, expect: {outptu: {contains: [a]}}}]\n")
    assert message.startswith(
        "case 'paris': expect.outptu: unknown key (did you mean 'output'?): not an expect key (tool_calls, trajectory"
    )
    assert "valid scorers: " in message and "task_completion" in message and "output" in message


def test_unknown_global_scorer_lists_valid_choices(tmp_path: Path) -> None:
    message = load_error(tmp_path, "scorers: [tool_erors]\ncases: [{id: a, input: x}]\n")
    assert message.startswith("scorers[0]: Unknown scorer 'tool_erors' (did you mean 'tool_errors'?). Valid choices: ")
    assert "tool_errors" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("confidance: 0.8\ncases: [{id: a, input: x}]\n", "confidance: unknown key (did you mean 'confidence'?); "),
        (
            "scorers: [trajectroy]\ncases: [{id: a, input: x}]\n",
            "Unknown scorer 'trajectroy' (did you mean 'trajectory'?)",
        ),
        (
            "cases: [{id: a, input: x, expect: {usgae: {max_total_tokens: 5}}}]\n",
            "expect.usgae: unknown key (did you mean 'usage'?)",
        ),
        # Whatever the value's type (before: "expected object or null, got string 'strict'").
        (
            "cases: [{id: a, input: x, expect: {trajectroy: strict}}]\n",
            "case 'a': expect.trajectroy: unknown key (did you mean 'trajectory'?): not an expect key (",
        ),
        (
            "cases: [{id: a, turns: [{input: x, expect: {outptu: [1, 2]}}]}]\n",
            "case 'a': turns[0].expect.outptu: unknown key (did you mean 'output'?): not an expect key (",
        ),
        ("cases: [{id: a, input: x, expect: {zzzz: 3}}]\n", "case 'a': expect.zzzz: unknown key: not an expect key ("),
        # A scorer's name is a valid key: its value of the wrong type is said as such.
        (
            "cases: [{id: a, input: x, expect: {tool_efficiency: 3}}]\n",
            "case 'a': expect.tool_efficiency: expected object or null, got number 3",
        ),
        # Nothing close: no guess, only the valid choices.
        ("scorers: [zzzz]\ncases: [{id: a, input: x}]\n", "scorers[0]: Unknown scorer 'zzzz'. Valid choices: "),
        ("colour: red\ncases: [{id: a, input: x}]\n", "colour: unknown key; valid keys: "),
    ],
)
def test_mistyped_names_get_the_closest_valid_name(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in load_error(tmp_path, text)


def test_bad_scorer_config_names_case_key_and_field(tmp_path: Path) -> None:
    message = load_error(tmp_path, "cases: [{id: lat, input: x, expect: {latency: {max_secs: 3}}}]\n")
    assert message.startswith("case 'lat': expect.latency: scorer 'latency': max_secs: Extra inputs are not permitted")
    message = load_error(tmp_path, "scorers: [{budget: {max_tool_calls: -1}}]\ncases: [{id: a, input: x}]\n")
    assert message.startswith("scorers[0].budget: scorer 'budget': max_tool_calls: Input should be greater than")


def test_turn_errors_name_the_turn(tmp_path: Path) -> None:
    text = "cases: [{id: chat, turns: [{input: a}, {input: b, expect: {output: {regex: '[z'}}}]}]\n"
    assert load_error(tmp_path, text).startswith(
        "case 'chat': turns[1].expect.output.regex: invalid regular expression"
    )
    text = "cases: [{id: chat, turns: [{input: a, expect: {nope: {}}}]}]\n"
    assert load_error(tmp_path, text).startswith("case 'chat': turns[0].expect.nope: unknown key")


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    text = "confidence: 0.8\ncases:\n  - id: a\n    input: [unclosed\n"
    message = load_error(tmp_path, text)
    assert message.startswith("line 5, column 1: invalid YAML: ")


def test_yaml_duplicate_key_is_an_error_with_its_line(tmp_path: Path) -> None:
    text = "cases:\n  - id: a\n    input: x\n    input: y\n"
    assert load_error(tmp_path, text) == "line 4, column 5: invalid YAML: duplicate key 'input'"


def test_yaml_merge_keys_are_accepted_and_real_duplicates_still_rejected(tmp_path: Path) -> None:
    text = """\
        metadata:
          defaults: &defaults {input: same question, tags: [smoke]}
          other: &other {input: other question, tier: slow}
        cases:
          - {id: plain, <<: *defaults}
          - <<: *defaults
            id: overridden
            input: own question
          - <<: [*defaults, *other]
            id: both
        """
    cases = {case.id: case for case in load_spec(write(tmp_path, text)).cases}
    assert (cases["plain"].input, cases["plain"].tags) == ("same question", ["smoke"])
    assert cases["overridden"].input == "own question"  # a key written here overrides the merged one
    assert (cases["both"].tags, cases["both"].tier) == (["smoke"], "slow")  # keys of both merged mappings
    duplicate = "base: &b {id: a}\ncases:\n  - <<: *b\n    input: x\n    input: y\n"
    assert load_error(tmp_path, duplicate) == "line 5, column 5: invalid YAML: duplicate key 'input'"


def test_yaml_unhashable_key_is_a_one_line_error_with_its_line(tmp_path: Path) -> None:
    text = "cases:\n  - id: a\n    input: x\n    ? [a, b]\n    : 1\n"
    assert load_error(tmp_path, text) == "line 4, column 7: invalid YAML: found unhashable key"
    assert load_error(tmp_path, "{[a, b]: 1}\n") == "line 1, column 2: invalid YAML: found unhashable key"


def test_malformed_json_names_the_line(tmp_path: Path) -> None:
    message = load_error(tmp_path, '{"cases": [\n  {"id": "a",}\n]}', "evals.json")
    assert message.startswith("line 2, column 14: invalid JSON: Expecting property name")
    assert load_error(tmp_path, '{"cases": [], "cases": []}', "dup.json") == "duplicate key 'cases'"


def test_not_a_mapping_and_missing_file(tmp_path: Path) -> None:
    assert load_error(tmp_path, "- just\n- a list\n").startswith("a spec is a mapping with a 'cases' list, got a list")
    assert load_error(tmp_path, "").startswith("a spec is a mapping with a 'cases' list, got an empty file")
    with pytest.raises(SpecError, match=r"nothere\.yaml: spec file not found"):
        load_spec(tmp_path / "nothere.yaml")


def test_unquoted_date_is_reported_as_a_date(tmp_path: Path) -> None:
    message = load_error(tmp_path, "cases: [{id: a, input: 2024-01-01}]\n")
    assert message.startswith("case 'a': input: expected string or null, got date (quote it to make it a string)")


def test_yaml_tags_never_build_python_objects(tmp_path: Path) -> None:
    message = load_error(tmp_path, "cases: [{id: a, input: !!python/object/apply:os.system [echo hi]}]\n")
    assert "invalid YAML" in message and "could not determine a constructor" in message


def test_split_spec_arg(tmp_path: Path) -> None:
    assert split_spec_arg("evals.yaml::paris-weather") == ("evals.yaml", "paris-weather")
    assert split_spec_arg("evals.yaml") == ("evals.yaml", None)
    odd = tmp_path / "a::b.yaml"
    odd.write_text("cases: []\n")
    assert split_spec_arg(str(odd)) == (str(odd), None)
