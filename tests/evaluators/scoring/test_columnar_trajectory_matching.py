"""The columnar `trajectory` pairs repeated tool names exactly as the reference's matching does.

Where a tool name repeats, the form asks the pairs of that name itself, from the row's columns:
equal argument texts match, other pairs go to the argument matcher on the row's parsed arguments.
These calls repeat names with argument texts that differ but may match (another key order, `1` and
`1.0`, padded or cased strings, an extra or a missing key), so every rule setting has pairs to ask;
the expected calls are the calls' own arguments, so the form always answers and its matching is
held to the one `max_bipartite_matching` gives the reference.
"""

from __future__ import annotations

from typing import Any

from _columnar_check import columnar
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.arguments import Rules, arguments_match
from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.collector.traces.table import to_table
from evaltrace.evaluators.scoring.columns import BatchCalls
from evaltrace.evaluators.scoring.scorers.arguments import max_bipartite_matching
from evaltrace.evaluators.scoring.scorers.base import Scorer, run_scorer
from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory, trajectory_form

_SCALARS = st.sampled_from([1, 2, 1.0, True, False, "Paris", " Paris ", "PARIS", "Lima", None])
_ARGS = st.dictionaries(st.sampled_from(["city", "n", "q"]), _SCALARS, min_size=1, max_size=3)


@st.composite
def _variant(draw: st.DrawFn, arguments: dict[str, Any]) -> dict[str, Any]:
    """Arguments a matcher setting may take for `arguments`, written differently."""
    changed = dict(reversed(arguments.items())) if draw(st.booleans()) else dict(arguments)
    for key, value in list(changed.items()):
        change = draw(st.integers(0, 4))
        if change == 1 and type(value) is int:
            changed[key] = float(value)  # 1 and 1.0: equal numbers, other text
        elif change == 2 and isinstance(value, str):
            changed[key] = f" {value} "  # equal under `trim`
        elif change == 3 and isinstance(value, str):
            changed[key] = value.upper()  # equal under `casefold`
    extra = draw(st.integers(0, 5))
    if extra == 1:
        changed["extra"] = draw(_SCALARS)  # accepted by `subset`
    elif extra == 2 and len(changed) > 1:
        changed.pop(next(iter(changed)))  # accepted by `superset`
    return changed


@st.composite
def _repeated_case(draw: st.DrawFn) -> tuple[Trace, Scorer]:
    names = draw(st.lists(st.sampled_from(["search", "fetch"]), min_size=2, max_size=6))
    calls: list[ToolCall] = []
    for name in names:
        same = [call.arguments for call in calls if call.name == name]
        arguments: dict[str, Any] = draw(_ARGS)
        if len(same) > 0 and draw(st.booleans()):
            arguments = draw(_variant(draw(st.sampled_from(same))))
        calls.append(ToolCall(name=name, arguments=arguments))
    expected = [
        {"name": call.name, "arguments": None if draw(st.integers(0, 7)) == 0 else call.arguments} for call in calls
    ]
    config = {
        "expected": expected,
        "mode": draw(st.sampled_from(["strict", "in_order", "any_order", "superset", "subset", "precision", "recall"])),
        "arguments": {
            "mode": draw(st.sampled_from(["exact", "exact", "subset", "superset", "ignore"])),
            "trim": draw(st.booleans()),
            "casefold": draw(st.booleans()),
            "per_tool": draw(st.sampled_from([{}, {"fetch": {"mode": "subset", "trim": True}}, {"search": {}}])),
        },
    }
    scorer = Trajectory.model_validate(config)
    trace = Trace(trace_id="r" * 32, status="success", tool_calls=calls)
    return trace, scorer.as_spec_check() if draw(st.booleans()) else scorer


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_repeated_case())
def test_repeated_names_are_matched_as_the_reference_matches_them(case: tuple[Trace, Scorer]) -> None:
    trace, scorer = case
    found, decoded = columnar(trace, scorer)
    assert found is not None  # each call made as expected: the form answers, matching included
    assert found == run_scorer(scorer, decoded)


def test_crossed_pairs_of_different_texts_follow_the_reference() -> None:
    # Expected call 1 (n: 1.0) also matches call 0 (n: 1) by value, so Kuhn's matching pairs them
    # crosswise; expected call 0 (n: 1) matches call 1 (n: 1.0) too. Not the identity.
    calls = [ToolCall(name="search", arguments={"n": 1}), ToolCall(name="search", arguments={"n": 1.0})]
    trace = Trace(trace_id="k" * 32, status="success", tool_calls=calls)
    scorer = Trajectory(expected=[{"name": "search", "arguments": c.arguments} for c in calls], mode="strict")
    found, decoded = columnar(trace, scorer)
    assert found is not None and found == run_scorer(scorer, decoded)
    assert found.details is not None and found.details["matched"] == [[0, 1], [1, 0]]
    exact = Trajectory.model_validate({**scorer.model_dump(), "arguments": {"mode": "exact"}})
    found, _ = columnar(trace, exact)
    assert found is not None and found.details is not None and found.details["matched"] == [[0, 1], [1, 0]]


def test_true_is_not_one_when_names_repeat() -> None:
    # Python finds `True == 1`; the matcher does not: the pair below the diagonal stays unmatched.
    calls = [ToolCall(name="search", arguments={"n": 1}), ToolCall(name="search", arguments={"n": True})]
    trace = Trace(trace_id="b" * 32, status="success", tool_calls=calls)
    expected = [{"name": "search", "arguments": c.arguments} for c in calls]
    scorer = Trajectory.model_validate({"expected": expected, "mode": "strict", "arguments": {"mode": "exact"}})
    found, decoded = columnar(trace, scorer)
    assert found is not None and found == run_scorer(scorer, decoded)
    assert found.details is not None and found.details["matched"] == [[0, 0], [1, 1]]


def test_the_matching_reads_the_row_not_the_decoded_trace() -> None:
    calls = [ToolCall(name="search", arguments={"n": 1}), ToolCall(name="search", arguments={"n": 1.0})]
    table = to_table([Trace(trace_id="d" * 32, status="success", tool_calls=calls)])
    row = BatchCalls(table.to_batches()[0]).row("d" * 32)
    assert row is not None
    scorer = Trajectory(expected=[{"name": "search", "arguments": c.arguments} for c in calls], mode="strict")
    found = trajectory_form(scorer, row)
    assert found is not None and found.details is not None and found.details["matched"] == [[0, 1], [1, 0]]


@st.composite
def _graph(draw: st.DrawFn) -> tuple[list[str], set[tuple[int, int]]]:
    """Names and a compatibility: the diagonal, and some pairs of equal names."""
    names = draw(st.lists(st.sampled_from("abc"), max_size=7))
    pairs = [(i, j) for i in range(len(names)) for j in range(len(names)) if names[i] == names[j] and i != j]
    chosen = {pair for pair in pairs if draw(st.booleans())}
    return names, chosen | {(i, i) for i in range(len(names))}


@settings(max_examples=300, deadline=None)
@given(_graph())
def test_matching_over_each_names_calls_is_the_full_matching(graph: tuple[list[str], set[tuple[int, int]]]) -> None:
    names, edges = graph
    asked: list[tuple[int, int]] = []

    def compatible(i: int, j: int) -> bool:
        asked.append((i, j))
        return (i, j) in edges

    by_name = [[j for j, name in enumerate(names) if name == names[i]] for i in range(len(names))]
    found = max_bipartite_matching(len(names), len(names), compatible, by_name.__getitem__)
    assert found == max_bipartite_matching(len(names), len(names), lambda i, j: (i, j) in edges)
    assert all(names[i] == names[j] for i, j in asked)  # pairs of different names are never asked


_VALUES = st.recursive(
    st.sampled_from([0, 1, 1.0, -0.0, True, False, None, "a", " a", "A", 2.5]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=500, deadline=None)
@given(st.dictionaries(st.sampled_from("xyz"), _VALUES, max_size=3), st.dictionaries(st.sampled_from("xyz"), _VALUES))
def test_what_exact_matching_accepts_python_finds_equal(expected: dict[str, Any], actual: dict[str, Any]) -> None:
    # The form skips the matcher for Python-unequal values under exact keys, plain strings.
    if arguments_match(expected, actual, False, Rules(mode="exact")):
        assert expected == actual
