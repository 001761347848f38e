"""What a compiled spec shares between its cases and their scorers, and the errors that stay as they were."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evaltrace.evaluators.errors import SpecError
from evaltrace.evaluators.scoring.scorers import base
from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.scorers.tools import ToolCorrectness
from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory
from evaltrace.evaluators.scoring.spec import loader
from evaltrace.evaluators.scoring.spec.loader import load_spec
from evaltrace.evaluators.scoring.spec.model import RepeatPolicy, resolve_repeat

_TWO_CASES = """\
cases:
  - id: one
    input: weather in Paris
    expect:
      tool_calls:
        - {name: get_weather, arguments: {city: Paris}}
        - {name: search}
      trajectory: {mode: strict, arguments: {mode: exact}}
      tool_correctness: {mode: names}
  - id: two
    input: weather in Oslo
    expect:
      tool_calls: [{name: get_weather, arguments: {city: Oslo}}]
      trajectory: {mode: strict, arguments: {mode: exact}}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _by_name(scorers: tuple[Scorer, ...]) -> dict[str, Scorer]:
    return {scorer.name: scorer for scorer in scorers}


def _trajectory(scorers: tuple[Scorer, ...]) -> Trajectory:
    found = _by_name(scorers)["trajectory"]
    assert isinstance(found, Trajectory)
    return found


def test_trajectory_checks_hold_the_cases_own_expected_calls(tmp_path: Path) -> None:
    loaded = load_spec(_write(tmp_path, _TWO_CASES))
    case = loaded.cases[0]
    assert case.expect is not None and case.expect.tool_calls is not None
    scorers = _by_name(loaded.case_scorers["one"][0])
    for scorer in (scorers["trajectory"], scorers["tool_correctness"]):
        assert isinstance(scorer, Trajectory | ToolCorrectness) and scorer.expected is not None
        held = scorer.expected
        assert len(held) == 2
        assert all(a is b for a, b in zip(held, case.expect.tool_calls, strict=True))


def test_equal_argument_settings_are_one_object(tmp_path: Path) -> None:
    loaded = load_spec(_write(tmp_path, _TWO_CASES))
    first = _trajectory(loaded.case_scorers["one"][0])
    second = _trajectory(loaded.case_scorers["two"][0])
    assert first is not second
    assert first.arguments is second.arguments
    assert first.arguments.mode == "exact"


def test_shared_pieces_leave_the_configuration_and_its_digest_as_written(tmp_path: Path) -> None:
    loaded = load_spec(_write(tmp_path, _TWO_CASES))
    trajectory = _trajectory(loaded.case_scorers["one"][0])
    assert trajectory.model_dump(mode="json") == {
        "expected": [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "search", "arguments": None}],
        "mode": "strict",
        "threshold": 1.0,
        "arguments": {"mode": "exact", "trim": False, "casefold": False, "per_tool": {}},
        "nested": False,
    }
    # The same scorer built from plain values, marked by a copy: the same digest.
    rebuilt = type(trajectory).model_validate(trajectory.model_dump()).as_spec_check()
    assert rebuilt.config_hash() == trajectory.config_hash()
    assert type(trajectory).model_validate(trajectory.model_dump()).config_hash() != trajectory.config_hash()


def test_every_built_scorer_is_a_spec_check(tmp_path: Path) -> None:
    loaded = load_spec(_write(tmp_path, _TWO_CASES))
    for turns in loaded.case_scorers.values():
        for scorers in turns:
            assert scorers and all(scorer.spec_check for scorer in scorers)


def test_marking_in_place_drops_a_digest_computed_before(tmp_path: Path) -> None:
    loaded = load_spec(_write(tmp_path, _TWO_CASES))
    trajectory = _trajectory(loaded.case_scorers["one"][0])
    fresh = type(trajectory).model_validate(trajectory.model_dump())
    unmarked = fresh.config_hash()
    assert fresh.mark_spec_check() is fresh
    assert fresh.config_hash() == trajectory.config_hash() != unmarked


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            "{mode: bogus, trim: 3}",
            "expect.tool_calls: scorer 'trajectory': arguments.mode: Input should be 'exact', 'subset', "
            "'superset' or 'ignore'; arguments.trim: Input should be a valid boolean, unable to interpret input",
        ),
        (
            "{per_tool: {f: {mode: x}}, extra: 1}",
            "expect.tool_calls: scorer 'trajectory': arguments.per_tool.f.mode: Input should be 'exact', 'subset', "
            "'superset' or 'ignore'; arguments.extra: Extra inputs are not permitted",
        ),
    ],
)
def test_invalid_argument_settings_are_reported_by_the_scorer_as_before(
    tmp_path: Path, arguments: str, expected: str
) -> None:
    # A valid setting shared by an earlier case must not hide a later case's invalid one.
    tool_calls = "tool_calls: [{name: f}]"
    text = (
        "cases:\n"
        f"  - {{id: ok, input: x, expect: {{{tool_calls}, trajectory: {{arguments: {{mode: exact}}}}}}}}\n"
        f"  - {{id: a, input: y, expect: {{{tool_calls}, trajectory: {{mode: strict, arguments: {arguments}}}}}}}\n"
    )
    path = _write(tmp_path, text)
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert str(caught.value) == f"{path}: case 'a': {expected}"


def test_cases_without_their_own_repeat_share_one_policy(tmp_path: Path) -> None:
    text = "repeat: pass@3\ncases: [{id: a, input: x}, {id: b, input: y}, {id: c, input: z, repeat: all}]\n"
    loaded = load_spec(_write(tmp_path, text))
    a, b, c = (loaded.spec.repeat_for(case) for case in loaded.cases)
    assert a is b and (a.rule, a.k) == ("pass@k", 3)
    assert (c.rule, c.k) == ("all", None)
    assert resolve_repeat(None) is resolve_repeat(None)
    assert resolve_repeat(None) == RepeatPolicy(rule="mean")


_EQUAL_PARTS = """\
cases:
  - id: a
    input: x
    expect:
      tool_calls: [{name: f, arguments: {n: 1, m: 2}}, {name: g}]
      trajectory: {mode: strict, arguments: {mode: exact}}
      output: {contains: done}
  - id: b
    input: y
    expect:
      tool_calls:
        - {name: f, arguments: {n: 1, m: 2}}
        - {name: g, arguments: null}
        - {name: f, arguments: {n: 1.0, m: 2}}
        - {name: f, arguments: {m: 2, n: 1}}
      trajectory: {mode: strict, arguments: {mode: exact}}
      output: {contains: done}
"""


def test_equal_expected_calls_and_options_are_one_object_compiled_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    path = _write(tmp_path, _EQUAL_PARTS)
    compiled = load_spec(path)
    monkeypatch.setattr(loader, "validate_spec_data", None)  # the second load reads the cache entry back
    for loaded in (compiled, load_spec(path)):
        a, b = (case.expect for case in loaded.cases)
        assert a is not None and b is not None and a.tool_calls is not None and b.tool_calls is not None
        assert b.tool_calls[0] is a.tool_calls[0]
        # Not equal as written: `arguments` left out or given; 1.0 for 1; the keys in another order.
        assert b.tool_calls[1] is not a.tool_calls[1] and b.tool_calls[1].model_fields_set == {"name", "arguments"}
        assert all(call is not a.tool_calls[0] for call in b.tool_calls[2:])
        assert [call.arguments for call in b.tool_calls[2:]] == [{"n": 1.0, "m": 2}, {"m": 2, "n": 1}]
        assert repr(b.tool_calls[2].arguments) == "{'n': 1.0, 'm': 2}"
        assert a.trajectory is b.trajectory and a.output is b.output
        held = _trajectory(loaded.case_scorers["b"][0]).expected
        assert held is not None and all(x is y for x, y in zip(held, b.tool_calls, strict=True))


def test_digests_are_read_back_with_the_scorers_and_a_changed_copy_is_hashed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    path = _write(tmp_path, _TWO_CASES)
    compiled = load_spec(path)
    digests = [scorer.config_hash() for scorer in compiled.case_scorers["one"][0]]
    with monkeypatch.context() as patched:
        patched.setattr(base, "_CANONICAL", None)  # making a digest again would fail
        again = load_spec(path)
        assert [scorer.config_hash() for scorer in again.case_scorers["one"][0]] == digests
    trajectory = _trajectory(again.case_scorers["one"][0])
    assert trajectory.model_copy().config_hash() == trajectory.config_hash()
    changed = trajectory.model_copy(update={"mode": "any_order"})
    written = type(trajectory).model_validate({**trajectory.model_dump(), "mode": "any_order"}).as_spec_check()
    assert changed.config_hash() == written.config_hash() != trajectory.config_hash()


def test_a_scorer_named_under_expect_is_read_back_with_its_case(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An `expect` naming a registered scorer (a key `Expect` does not declare) round-trips, extra keys and all."""
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    path = _write(tmp_path, "cases: [{id: a, input: x, expect: {tool_errors: {max_errors: 1}}}]\n")
    fresh = load_spec(path, cache=False)
    load_spec(path)
    monkeypatch.setattr(loader, "validate_spec_data", None)  # read back from the cache
    again = load_spec(path)
    assert again.spec == fresh.spec and again.case_scorers == fresh.case_scorers
    expect = again.cases[0].expect
    assert expect is not None and expect.model_extra == {"tool_errors": {"max_errors": 1}}
    assert expect.model_fields_set == {"tool_errors"}
    assert [scorer.name for scorer in again.case_scorers["a"][0]] == ["tool_errors"]


def test_the_index_by_input_is_made_at_compile_and_read_back_with_the_cases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVALTRACE_CACHE_DIR", str(tmp_path / "cache"))
    text = """\
    cases:
      - {id: a, input: "weather  in\\tParis "}
      - {id: b, input: weather in Paris}
      - {id: c, turns: [{input: " hello there"}, {input: bye}]}
    """
    path = _write(tmp_path, text)
    load_spec(path)
    monkeypatch.setattr(loader, "validate_spec_data", None)  # read back from the cache
    again = load_spec(path)
    assert {key: [case.id for case in cases] for key, cases in again.by_input.items()} == {
        "weather in Paris": ["a", "b"],
        "hello there": ["c"],
    }
    first, second = again.by_input["weather in Paris"]
    assert first is again.spec.cases[0] and second is again.spec.cases[1]  # the cases themselves
