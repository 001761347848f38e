from __future__ import annotations

from typing import Any

import pytest
from _rule_traces import call
from hypothesis import example, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.arguments import ArgumentRules, iter_value_diffs
from evaltrace.collector.traces.records import ToolCall
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCall,
    argument_diffs,
    call_matches,
    canonical_arguments,
    lcs_pairs,
    max_bipartite_matching,
)

DEFAULT = ArgumentMatch()


def value_diffs(expected: Any, actual: Any, rules: ArgumentRules) -> list[str]:
    return list(iter_value_diffs(expected, actual, rules))


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        (1, 1.0, True),
        (1.5, 1.5, True),
        (2, 2.5, False),
        (True, 1, False),
        (1, True, False),
        (False, 0, False),
        (True, True, True),
        ("1", 1, False),
        (None, None, True),
        (None, 0, False),
        ({"a": [1, {"b": 2.0}]}, {"a": [1.0, {"b": 2}]}, True),
        ([1, 2], [2, 1], False),
        ([1, 2], [1, 2, 3], False),
    ],
)
def test_values_compare_by_value_and_bool_is_not_a_number(expected: Any, actual: Any, equal: bool) -> None:
    assert (value_diffs(expected, actual, DEFAULT) == []) is equal


def test_strings_are_exact_unless_trim_or_casefold_is_opted_in() -> None:
    assert value_diffs("Paris", " paris ", DEFAULT) == ["(value): expected 'Paris', got ' paris '"]
    assert value_diffs("Paris", " paris ", ArgumentMatch(trim=True)) != []
    assert value_diffs("Paris", "paris", ArgumentMatch(casefold=True)) == []
    assert value_diffs("Paris", " paris ", ArgumentMatch(trim=True, casefold=True)) == []


def test_key_modes() -> None:
    expected = ExpectedCall(name="f", arguments={"a": 1})
    extra = call("f", {"a": 1, "b": 2})
    fewer = call("f", {})
    assert call_matches(expected, extra, ArgumentMatch(mode="subset"))
    assert not call_matches(expected, fewer, ArgumentMatch(mode="subset"))
    assert argument_diffs(expected, extra, ArgumentMatch(mode="exact")) == ["b: unexpected argument (2)"]
    assert argument_diffs(expected, fewer, ArgumentMatch(mode="exact")) == ["a: missing (expected 1)"]
    assert call_matches(expected, fewer, ArgumentMatch(mode="superset"))
    assert not call_matches(expected, extra, ArgumentMatch(mode="superset"))
    assert call_matches(expected, call("f", {"a": "zzz"}), ArgumentMatch(mode="ignore"))
    assert not call_matches(expected, call("g", {"a": 1}), ArgumentMatch(mode="ignore"))


def test_key_mode_applies_at_every_depth() -> None:
    expected = ExpectedCall(name="f", arguments={"filter": {"city": "Paris"}})
    nested_extra = call("f", {"filter": {"city": "Paris", "unit": "C"}})
    assert call_matches(expected, nested_extra, DEFAULT)
    assert argument_diffs(expected, nested_extra, ArgumentMatch(mode="exact")) == [
        "filter.unit: unexpected argument ('C')"
    ]


def test_per_tool_override_only_changes_that_tool() -> None:
    match = ArgumentMatch.model_validate({"per_tool": {"book": {"mode": "exact", "casefold": True}}})
    assert match.for_tool("book").mode == "exact"
    assert match.for_tool("book").casefold is True
    assert match.for_tool("search") is match
    book = ExpectedCall(name="book", arguments={"city": "paris"})
    assert call_matches(book, call("book", {"city": "PARIS"}), match)
    assert not call_matches(book, call("book", {"city": "PARIS", "nights": 2}), match)
    search = ExpectedCall(name="search", arguments={"q": "x"})
    assert call_matches(search, call("search", {"q": "x", "limit": 2}), match)


def test_none_expected_arguments_match_anything_even_raw_text() -> None:
    assert call_matches(ExpectedCall(name="f"), call("f", '{"a": 1', arguments_truncated=True), DEFAULT)


def test_truncated_or_raw_arguments_never_match_expected_arguments() -> None:
    expected = ExpectedCall(name="f", arguments={"a": 1})
    diffs = argument_diffs(expected, call("f", '{"a": 1', arguments_truncated=True), DEFAULT)
    assert len(diffs) == 1 and "not a JSON object" in diffs[0] and "truncated" in diffs[0]
    assert not call_matches(expected, call("f", "a=1"), DEFAULT)


def test_maximum_matching_beats_greedy() -> None:
    # Greedy pairing would give left 0 (compatible with both) right 0 and leave left 1 unmatched.
    edges = {(0, 0), (0, 1), (1, 0)}
    pairs = max_bipartite_matching(2, 2, lambda i, j: (i, j) in edges)
    assert pairs == {0: 1, 1: 0}


def test_matching_handles_empty_sides_and_no_edges() -> None:
    assert max_bipartite_matching(0, 3, lambda i, j: True) == {}
    assert max_bipartite_matching(3, 0, lambda i, j: True) == {}
    assert max_bipartite_matching(2, 2, lambda i, j: False) == {}


def test_lcs_pairs_are_increasing_and_longest() -> None:
    left, right = list("ABCBDAB"), list("BDCABA")
    pairs = lcs_pairs(len(left), len(right), lambda i, j: left[i] == right[j])
    assert len(pairs) == 4
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(pairs, pairs[1:], strict=False))
    assert all(left[i] == right[j] for i, j in pairs)


def _lcs_by_whole_table(n_left: int, n_right: int, ok: list[list[bool]]) -> list[tuple[int, int]]:
    """`lcs_pairs` as it was before its common-prefix step: the whole table, then the same walk."""
    table = [[0] * (n_right + 1) for _ in range(n_left + 1)]
    for i in range(n_left - 1, -1, -1):
        for j in range(n_right - 1, -1, -1):
            table[i][j] = table[i + 1][j + 1] + 1 if ok[i][j] else max(table[i + 1][j], table[i][j + 1])
    pairs, i, j = [], 0, 0
    while i < n_left and j < n_right:
        if ok[i][j] and table[i][j] == table[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 7), st.integers(0, 7), st.integers(0, 7), st.data())
def test_lcs_pairs_equal_the_whole_tables_pairs(n_left: int, n_right: int, prefix: int, data: st.DataObject) -> None:
    # The pairs (reasons and details name them), not only their number, must be the whole table's,
    # for any relation (not only equality: the matcher's), most often with a compatible diagonal prefix.
    ok = [data.draw(st.lists(st.booleans(), min_size=n_right, max_size=n_right)) for _ in range(n_left)]
    for k in range(min(prefix, n_left, n_right)):
        ok[k][k] = True
    assert lcs_pairs(n_left, n_right, lambda i, j: ok[i][j]) == _lcs_by_whole_table(n_left, n_right, ok)


def test_canonical_arguments_treat_int_and_float_alike_but_not_bool() -> None:
    assert canonical_arguments({"b": 1, "a": [2.0]}) == canonical_arguments({"a": [2], "b": 1.0})
    assert canonical_arguments({"a": True}) != canonical_arguments({"a": 1})


def test_canonical_arguments_of_other_python_values() -> None:
    import enum
    from collections import OrderedDict

    class Level(enum.IntEnum):
        HIGH = 3

    nested = OrderedDict([("z", (1.0, Level.HIGH)), (2, {"k": 0.5})])
    assert canonical_arguments(nested) == '{"2": {"k": 0.5}, "z": [1, 3]}'
    assert canonical_arguments({"n": 10**400}) == '{"n": ' + str(10**400) + "}"  # no float overflow
    assert canonical_arguments({"x": float("inf"), "y": -0.0}) == '{"x": Infinity, "y": 0}'
    assert canonical_arguments({"when": object}) == '{"when": "' + str(object) + '"}'


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([1.0, 2.0, 0.5, -0.0, float("nan")]),
    st.sampled_from(["Paris", "paris", " Paris ", "", "1"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
    ),
    max_leaves=8,
)
_ARGUMENTS = st.dictionaries(st.sampled_from(["a", "b", "c"]), _VALUES, max_size=3)


@settings(max_examples=500, deadline=None)
# Python's `==` says `[True] == [1]` and `" a" == " a"`: containers must be compared item by item.
@example(expected={"a": [True]}, actual={"a": [1]}, truncated=False, mode="subset", trim=False, casefold=False)
@example(expected={"a": {"b": 1}}, actual={"a": {"b": True}}, truncated=False, mode="exact", trim=False, casefold=False)
@example(expected={"a": ("x",)}, actual={"a": ("X",)}, truncated=False, mode="subset", trim=False, casefold=True)
@given(
    expected=st.one_of(st.none(), _ARGUMENTS),
    actual=st.one_of(_ARGUMENTS, _VALUES),
    truncated=st.booleans(),
    mode=st.sampled_from(["exact", "subset", "superset", "ignore"]),
    trim=st.booleans(),
    casefold=st.booleans(),
)
def test_call_matches_agrees_with_argument_diffs(
    expected: dict[str, Any] | None, actual: Any, truncated: bool, mode: str, trim: bool, casefold: bool
) -> None:
    # `call_matches` answers yes/no without building messages; it must say yes exactly when
    # `argument_diffs` finds nothing, for every value shape and setting.
    match = ArgumentMatch(mode=mode, trim=trim, casefold=casefold)  # type: ignore[arg-type]
    wanted = ExpectedCall(name="t", arguments=expected)
    call = ToolCall(name="t", arguments=actual, arguments_truncated=truncated)
    assert call_matches(wanted, call, match) == (not argument_diffs(wanted, call, match))
    assert not call_matches(wanted, call.model_copy(update={"name": "other"}), match)
