"""The columnar `trajectory` equals the reference scorer, on random traces and configurations.

Traces go through the real traces table (`to_table`), the scorer sees the decoded trace as the
engine does, and the columnar path's verdict (or the reference's, where it declines) must equal
`run_scorer` on the same trace field for field.
"""

from __future__ import annotations

from typing import Any

import pytest
from _columnar_check import check_own, check_rows, columnar
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring.scorers import trajectory
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer, run_scorer, sure_pass
from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory

_NAMES = st.sampled_from(["search", "fetch", "book", "pay", "mail", "ask"])
# Values the argument matcher treats specially: 1 and 1.0 and True, padded and cased strings.
_SCALARS = st.sampled_from([1, 1.0, True, 0, "Paris", " Paris ", "paris", None, 2.5])
_ARGS = st.dictionaries(st.sampled_from(["city", "n", "q"]), _SCALARS | st.lists(_SCALARS, max_size=2), max_size=3)


@st.composite
def _call(draw: st.DrawFn, nested: bool = True) -> ToolCall:
    child = None
    if nested and draw(st.integers(0, 3)) == 0:
        child = Trace(trace_id="c" * 32, status="success", tool_calls=[draw(_call(nested=False))])
    return ToolCall(
        name=draw(_NAMES),
        arguments=draw(_ARGS) if draw(st.integers(0, 4)) else draw(st.sampled_from([None, "raw text"])),
        arguments_truncated=draw(st.integers(0, 9)) == 0,
        child=child,
        handoff=child is not None and draw(st.integers(0, 3)) == 0,
    )


def _expected_from(calls: list[ToolCall], draw: st.DrawFn) -> list[dict[str, Any]]:
    """Mostly the calls themselves (the columnar path's case), sometimes perturbed."""
    wanted: list[dict[str, Any]] = []
    for call in calls:
        arguments = call.arguments if isinstance(call.arguments, dict) else draw(_ARGS)
        part = {key: value for key, value in arguments.items() if draw(st.booleans())}  # a subset of the keys
        wanted.append({"name": call.name, "arguments": draw(st.sampled_from([arguments, arguments, part, None]))})
    change = draw(st.integers(0, 7))
    if change == 1 and wanted:
        wanted.pop(draw(st.integers(0, len(wanted) - 1)))
    elif change == 2:
        wanted.append({"name": draw(_NAMES), "arguments": draw(st.none() | _ARGS)})
    elif change == 3 and len(wanted) > 1:
        wanted[0], wanted[-1] = wanted[-1], wanted[0]
    elif change == 4 and wanted:
        wanted[0] = {"name": wanted[0]["name"], "arguments": draw(_ARGS)}
    elif change >= 5:  # a subsequence (the made calls beyond it are extras), maybe out of order
        wanted = [w for w in wanted if draw(st.booleans())][:: 1 if change == 5 else -1]
    return wanted


@st.composite
def _case(draw: st.DrawFn) -> tuple[Trace, Scorer]:
    calls = draw(st.lists(_call(), max_size=5))
    trace = Trace(trace_id="t" * 32, status="success", tool_calls=calls)
    config: dict[str, Any] = {
        "expected": _expected_from(calls, draw),
        "mode": draw(st.sampled_from(["strict", "in_order", "any_order", "superset", "subset", "precision", "recall"])),
        "threshold": draw(st.sampled_from([0.0, 0.5, 1.0])),
        "nested": draw(st.booleans()),
        "arguments": {
            "mode": draw(st.sampled_from(["exact", "subset", "superset", "ignore"])),
            "trim": draw(st.booleans()),
            "casefold": draw(st.booleans()),
            "per_tool": draw(st.sampled_from([{}, {"fetch": {"mode": "ignore"}}, {"search": {"mode": "exact"}}])),
        },
    }
    if draw(st.integers(0, 9)) == 0:
        config["expected"] = draw(st.sampled_from([None, []]))
    scorer = Trajectory.model_validate(config)
    return trace, scorer.as_spec_check() if draw(st.booleans()) else scorer


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case(), st.lists(_case(), max_size=3))
def test_columnar_trajectory_equals_the_reference(
    case: tuple[Trace, Scorer], others: list[tuple[Trace, Scorer]]
) -> None:
    trace, scorer = case  # the other cases' traces: more rows of the batch, for the same scorer
    check_rows([trace, *(other for other, _ in others)], scorer)  # passes only, each the reference's


@st.composite
def _extras_case(draw: st.DrawFn) -> tuple[Trace, Scorer]:
    """Calls (of distinct tools, or some tool twice) and a part of them expected, where extras are allowed."""
    names = draw(st.lists(_NAMES, min_size=1, max_size=5, unique=draw(st.booleans())))  # repeats, or not
    calls = [ToolCall(name=name, arguments=draw(_ARGS)) for name in names]
    kept = [c for c in calls if draw(st.booleans())]
    order = kept if draw(st.integers(0, 3)) else kept[::-1]
    expected = [{"name": c.name, "arguments": _expected_arguments(c, draw)} for c in order]
    mode = draw(st.sampled_from(["in_order", "superset", "recall", "strict", "subset"]))
    scorer = Trajectory.model_validate(
        {"expected": expected, "mode": mode, "threshold": draw(st.sampled_from([0.0, 0.5, 1.0]))}
    )
    return Trace(trace_id="x" * 32, status="success", tool_calls=calls), scorer


def _expected_arguments(call: ToolCall, draw: st.DrawFn) -> dict[str, Any]:
    """The call's own arguments, a subset of their keys, or other arguments."""
    assert isinstance(call.arguments, dict)
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return draw(_ARGS)
    if choice == 1:
        return {key: value for key, value in call.arguments.items() if draw(st.booleans())}
    return call.arguments


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_extras_case(), st.lists(_extras_case(), max_size=3))
def test_columnar_trajectory_with_extra_calls_equals_the_reference(
    case: tuple[Trace, Scorer], others: list[tuple[Trace, Scorer]]
) -> None:
    trace, scorer = case
    check_rows([trace, *(other for other, _ in others)], scorer)


def _plain(*names: str) -> Trace:
    calls = [ToolCall(name=name, arguments={"city": "Paris", "n": index}) for index, name in enumerate(names)]
    return Trace(trace_id="a" * 32, status="success", tool_calls=calls)


def test_exact_calls_take_the_columnar_path_in_every_mode() -> None:
    trace = _plain("search", "fetch", "book")
    expected = [{"name": c.name, "arguments": c.arguments} for c in trace.tool_calls]
    for mode in ("strict", "in_order", "any_order", "superset", "subset", "precision", "recall"):
        scorer = Trajectory.model_validate({"expected": expected, "mode": mode, "arguments": {"mode": "exact"}})
        found, decoded = columnar(trace, scorer)
        assert found is not None, mode
        assert found == run_scorer(scorer, decoded)
        assert found.reason == f"Passed ({mode}, score 1.00): all 3 expected calls matched."


def test_extra_calls_take_the_columnar_path_where_allowed() -> None:
    trace = _plain("search", "fetch", "book")
    expected = [{"name": c.name, "arguments": c.arguments} for c in trace.tool_calls[::2]]
    for mode in ("in_order", "superset", "recall"):
        scorer = Trajectory.model_validate({"expected": expected, "mode": mode})
        found, decoded = columnar(trace, scorer)
        assert found is not None and found == run_scorer(scorer, decoded), mode
        assert found.reason == f"Passed ({mode}, score 1.00): extra #2 fetch (allowed in this mode)."
    backwards = Trajectory.model_validate({"expected": expected[::-1], "mode": "in_order"})
    found, decoded = columnar(trace, backwards)
    assert found == run_scorer(backwards, decoded) and found.passed is False  # out of order: the reference's failure


def test_no_calls_expected_or_made_takes_the_columnar_path() -> None:
    scorer = Trajectory(expected=[], mode="strict")
    found, decoded = columnar(Trace(trace_id="e" * 32, status="success"), scorer)
    assert found is not None and found == run_scorer(scorer, decoded)


def test_failures_are_the_references_own() -> None:
    # Graded by the reference's own code on the row's calls: its reason and details, not a template.
    trace = _plain("search", "fetch")
    swapped = [{"name": "fetch", "arguments": None}, {"name": "search", "arguments": None}]
    other_city = [{"name": "search", "arguments": {"city": "Rome"}}, {"name": "fetch"}]
    other_case = [{"name": "search", "arguments": {"city": "paris"}}, {"name": "fetch"}]  # no casefold
    fewer_keys = [{"name": "search", "arguments": {"city": "Paris"}}, {"name": "fetch"}]
    for expected, arguments in ((swapped, {}), (other_city, {}), (other_case, {}), (fewer_keys, {"mode": "exact"})):
        scorer = Trajectory.model_validate({"expected": expected, "mode": "strict", "arguments": arguments})
        found, decoded = columnar(trace, scorer)
        assert found is not None and found == run_scorer(scorer, decoded), expected
        assert found.passed is False


def test_arguments_that_match_with_other_text_take_the_columnar_path() -> None:
    # The default settings: the expected keys a subset of the made ones; numbers by value; trimmed text.
    trace = _plain("search", "fetch")
    cases = [
        ([{"name": "search", "arguments": {"city": "Paris"}}, {"name": "fetch", "arguments": {"n": 1}}], {}),
        ([{"name": "search", "arguments": {"city": "Paris", "n": 0.0}}, {"name": "fetch"}], {}),
        ([{"name": "search", "arguments": {"city": " Paris "}}, {"name": "fetch"}], {"trim": True}),
    ]
    for expected, arguments in cases:
        for mode in ("strict", "in_order"):
            scorer = Trajectory.model_validate({"expected": expected, "mode": mode, "arguments": arguments})
            found, decoded = columnar(trace, scorer)
            assert found is not None, (expected, mode)
            assert found == run_scorer(scorer, decoded)
    extras = Trajectory.model_validate({"expected": [{"name": "fetch", "arguments": {"n": 1.0}}], "mode": "in_order"})
    found, decoded = columnar(trace, extras)
    assert found is not None and found == run_scorer(extras, decoded)


def test_rows_of_a_batch_share_the_matchers_answers_by_argument_text() -> None:
    # The matcher's answer on an expected call and a call's arguments text is kept for the batch's
    # other rows (`BatchCalls.memo`): a row with other arguments must be asked anew.
    made = [{"city": "Paris", "n": 1}, {"city": "Rome", "n": 1}, {"city": "Paris", "n": 1}, {"n": 1}, {"city": "Paris"}]
    traces = [
        Trace(trace_id="m" * 32, status="success", tool_calls=[ToolCall(name="search", arguments=a)]) for a in made
    ]
    for mode in ("strict", "superset"):
        scorer = Trajectory.model_validate(
            {"expected": [{"name": "search", "arguments": {"city": "Paris"}}], "mode": mode}
        )
        found = check_rows([*traces, *traces], scorer)  # each row's score the reference's
        assert [score is not None and score.passed for score in found] == [True, False, True, False, True] * 2


def test_a_repeated_tool_name_is_paired_as_the_reference_pairs_it() -> None:
    # Kuhn's matching pairs these calls crosswise (the first expected call takes call #2): the
    # columnar path must report the reference's pairs, not the identity.
    scorer = Trajectory(expected=[{"name": "search"}] * 2, mode="strict")
    found, decoded = columnar(_plain("search", "search"), scorer)
    assert found is not None and found == run_scorer(scorer, decoded)
    assert found.details is not None and found.details["matched"] == [[0, 1], [1, 0]]


class _Stricter(Trajectory):
    """A plugin's subclass: it may score differently, so it has no columnar form."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        return self.result(False, 0.0, "never")


def test_a_subclass_of_a_builtin_scorer_is_left_to_its_own_score() -> None:
    trace = _plain("search")
    found, _ = columnar(trace, _Stricter(expected=[{"name": "search", "arguments": {"city": "Paris", "n": 0}}]))
    assert found is None
    assert columnar(trace, Trajectory(expected=[{"name": "search", "arguments": {"city": "Paris", "n": 0}}]))[0]


def test_a_sure_pass_is_the_validated_score() -> None:
    # Built without validation for speed: equal to `Scorer.result`'s in fields, fields set and JSON.
    scorer = Trajectory(expected=[{"name": "search"}], mode="strict")
    for value, details in ((1.0, {"expected": ["search"], "matched": [[0, 0]]}), (None, {})):
        made = sure_pass(scorer, value, "Passed (strict, score 1.00): all 1 expected calls matched.", **details)
        validated = scorer.result(True, value, made.reason, **details)
        assert made == validated and made.model_fields_set == validated.model_fields_set
        assert made.model_dump_json() == validated.model_dump_json() and repr(made) == repr(validated)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_case() | _extras_case(), min_size=1, max_size=6))
def test_rows_each_with_their_own_trajectory_are_asked_at_once_as_the_reference(
    cases: list[tuple[Trace, Scorer]],
) -> None:
    check_own(cases)  # a batch of cases' rows, each with its case's expected calls: the batch form at once


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(st.tuples(_NAMES, _ARGS), max_size=5), min_size=1, max_size=6),
    st.sampled_from(["strict", "in_order", "any_order", "superset", "subset", "precision", "recall"]),
    st.sampled_from(["exact", "subset"]),
)
def test_rows_made_of_their_expected_calls_are_settled_from_the_columns(
    made: list[list[tuple[str, dict[str, Any]]]], mode: str, keys: str
) -> None:
    # The peer set's shape: each case its own expected calls (a name may repeat, with the same
    # arguments or not), each row made of them. Every row passes from the array comparison alone.
    cases = []
    for calls in made:
        trace = Trace(trace_id="p" * 32, status="success", tool_calls=[ToolCall(name=n, arguments=a) for n, a in calls])
        expected = [{"name": name, "arguments": arguments} for name, arguments in calls]
        cases.append(
            (trace, Trajectory.model_validate({"expected": expected, "mode": mode, "arguments": {"mode": keys}}))
        )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(trajectory, "_trajectory", _not_asked)
        found = check_own(cases)
    assert None not in found


def _not_asked(*_: object) -> None:
    raise AssertionError("a row was asked alone")
