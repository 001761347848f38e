"""The columnar forms of the built-in rule scorers, by scorer class.

`trajectory`'s form is here; the call-counting ones (`tool_errors`, `budget`) are in `counts.py`,
`usage`'s and `latency`'s in `limits.py`, the answer axes' (`groundedness`, `correctness`,
`completeness`, `answer_quality`) in `answer.py`, `output`'s, `steps`', `outcome`'s and `cost`'s
in `output.py`, the tool-use ones (`tool_call_validity`, `tool_correctness`, `tool_efficiency`,
`tool_name_reliability`, `tool_description_reliability`) in `tools.py`.

A form takes a scorer and a row's columns and returns the `Score` the reference would return when
it can tell for sure that the entry passes, else `None` (the reference then scores the entry, so
failures get their reason and details from it). A form answers only for its exact built-in class:
a subclass (a plugin) may score differently.

`trajectory`: where extra calls are allowed (in_order, superset, recall), every expected call
made, in order, by a call of the same name and equal arguments, no tool name twice: the matching
and ordered pairs are those pairs, and the reason lists the extras. Otherwise the row's calls
equal the expected calls position by position (names equal; the
arguments' JSON text equal to the expected arguments encoded as the table encodes them, or not
compared). Then, in every mode, the value is 1, nothing is missing, late or extra and the ordered
pairs are the identity, so the reference's reason and details follow from the names alone but for
the maximum matching: with no tool name twice it is the identity too; with a repeated name it is
what the reference's matching (`max_bipartite_matching`) makes of the same compatibility, for
which only the off-diagonal pairs of a repeated name are asked of the argument matcher.

Equal JSON text means equal values, which the argument matcher accepts under every setting;
different text may still match (`1` and `1.0`, another key order, `trim`), so it is left to the
reference. Not-a-number values, truncated arguments and calls that start nested agents (with
`nested`) are left to the reference too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from evaltrace.collector.convert.records import Trace
from evaltrace.evaluators.columnar.answer import FORMS as ANSWER_FORMS
from evaltrace.evaluators.columnar.calls import RowCalls
from evaltrace.evaluators.columnar.counts import budget_form, tool_errors_form
from evaltrace.evaluators.columnar.limits import latency_form, usage_form
from evaltrace.evaluators.columnar.output import FORMS as OUTPUT_FORMS
from evaltrace.evaluators.columnar.tools import FORMS as TOOLS_FORMS
from evaltrace.evaluators.scorers.arguments import ExpectedCall, call_matches, max_bipartite_matching
from evaltrace.evaluators.scorers.base import Score, Scorer
from evaltrace.evaluators.scorers.calls import Budget, ToolErrors
from evaltrace.evaluators.scorers.limits import Latency, UsageLimits
from evaltrace.evaluators.scorers.trajectory import Trajectory

Form = Callable[[Any, RowCalls, Trace], Score | None]
"""A columnar form: (scorer, row, the row's trace) -> the sure passing `Score`, or `None` for the reference.

The trace is there for the rare detail the columns cannot settle; a form reads it only then."""

# The traces table's encoder (`_table_encode.py`), minus not-a-number values: the same value
# gives the same text, and a NaN (never equal to itself) must not pass on equal text.
_EXTRAS_ALLOWED = ("in_order", "superset", "recall")
"""The modes in which calls beyond the expected ones do not lower the value (`trajectory.py`)."""
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def trajectory_form(scorer: Trajectory, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `trajectory` when the calls are exactly the expected ones, else `None`."""
    expected = scorer.expected
    if expected is None or row.truncated or (scorer.nested and row.nested):
        return None
    if len(expected) != len(row.names):
        return _with_extras(scorer, expected, row)
    for want, name, arguments in zip(expected, row.names, row.arguments, strict=True):
        if want.name != name or not _same_arguments(scorer, want, arguments):
            return None
    count = len(expected)
    why = f"all {count} expected calls matched" if count else "no calls expected or made"
    return scorer.result(
        True,
        1.0,
        f"Passed ({scorer.mode}, score 1.00): {why}.",
        expected=list(row.names),
        actual=list(row.names),
        matched=_matching(scorer, expected, row.names, trace),
        in_order=[[i, i] for i in range(count)],
    )


def _with_extras(scorer: Trajectory, expected: list[ExpectedCall], row: RowCalls) -> Score | None:
    """The passing `Score` where extra calls are allowed: every expected call made in order, no name twice."""
    names = row.names
    if not expected or len(expected) > len(names) or scorer.mode not in _EXTRAS_ALLOWED:
        return None
    if len(set(names)) != len(names):
        return None
    position = {name: j for j, name in enumerate(names)}
    pairs: list[list[int]] = []
    for i, want in enumerate(expected):
        j = position.get(want.name)
        if j is None or (pairs and j <= pairs[-1][1]) or not _same_arguments(scorer, want, row.arguments[j]):
            return None
        pairs.append([i, j])
    # Only same-name pairs can match and no name is made twice: the matching and the ordered pairs
    # are both these pairs, nothing is missing or late, and every other call is an allowed extra.
    used = {j for _, j in pairs}
    extra = ", ".join(f"#{j + 1} {name}" for j, name in enumerate(names) if j not in used)
    return scorer.result(
        True,
        1.0,
        f"Passed ({scorer.mode}, score 1.00): extra {extra} (allowed in this mode).",
        expected=[want.name for want in expected],
        actual=list(names),
        matched=pairs,
        in_order=[list(pair) for pair in pairs],
    )


def _matching(scorer: Trajectory, expected: list[ExpectedCall], names: list[str], trace: Trace) -> list[list[int]]:
    """The reference's maximum matching when call `i` is known to match expected call `i`."""
    if len(set(names)) == len(names):  # only same-name pairs can match: the identity is forced
        return [[i, i] for i in range(len(names))]
    calls, count = trace.tool_calls, len(names)

    def compatible(i: int, j: int) -> bool:
        return i == j or (names[i] == names[j] and call_matches(expected[i], calls[j], scorer.arguments))

    # Kuhn's matching takes, for each expected call in turn, the first free compatible call. With
    # every diagonal pair compatible and none below it, expected call i finds calls 0..i-1
    # incompatible and call i free: the identity. Only pairs below the diagonal need asking, then.
    if not any(compatible(i, j) for i in range(count) for j in range(i)):
        return [[i, i] for i in range(count)]
    found = max_bipartite_matching(count, count, compatible)
    return [[i, j] for i, j in sorted(found.items())]


def _same_arguments(scorer: Trajectory, want: ExpectedCall, arguments: str | None) -> bool:
    if want.arguments is None or scorer.arguments.for_tool(want.name).mode == "ignore":
        return True
    if arguments is None:
        return False
    try:
        return _encode(want.arguments) == arguments
    except (TypeError, ValueError):  # not a JSON value, or NaN: the reference decides
        return False


FORMS: dict[type[Scorer], Form] = {
    Trajectory: trajectory_form,
    ToolErrors: tool_errors_form,
    Budget: budget_form,
    UsageLimits: usage_form,
    Latency: latency_form,
    **OUTPUT_FORMS,
    **ANSWER_FORMS,
    **TOOLS_FORMS,
}
"""Columnar forms by the exact scorer class they answer for."""


def form_of(scorer: Scorer) -> Form | None:
    """The columnar form for `scorer`'s exact class, or `None`."""
    return FORMS.get(type(scorer))
