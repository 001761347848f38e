"""The columnar forms of the built-in rule scorers, by scorer class.

A form takes a scorer and a row's columns and returns the `Score` the reference would return when
it can tell for sure that the entry passes, else `None` (the reference then scores the entry, so
failures get their reason and details from it). A form answers only for its exact built-in class:
a subclass (a plugin) may score differently.

`trajectory`: the row's calls equal the expected calls position by position (names equal; the
arguments' JSON text equal to the expected arguments encoded as the table encodes them, or not
compared), with no tool name twice. Then, in every mode, the maximum matching and the ordered
pairs are the identity, the value is 1 and nothing is missing, late or extra, so the reference's
reason and details follow from the names alone. Equal JSON text means equal values, which the
argument matcher accepts under every setting; different text may still match (`1` and `1.0`,
another key order, `trim`), so it is left to the reference. Not-a-number values, truncated
arguments and calls that start nested agents (with `nested`) are left to the reference too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from evaltrace.evaluators.columnar.calls import RowCalls
from evaltrace.evaluators.scorers.arguments import ExpectedCall
from evaltrace.evaluators.scorers.base import Score, Scorer
from evaltrace.evaluators.scorers.trajectory import Trajectory

Form = Callable[[Any, RowCalls], Score | None]
"""A columnar form: (scorer, row) -> the sure passing `Score`, or `None` for the reference."""

# The traces table's encoder (`_table_encode.py`), minus not-a-number values: the same value
# gives the same text, and a NaN (never equal to itself) must not pass on equal text.
_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def trajectory_form(scorer: Trajectory, row: RowCalls) -> Score | None:
    """The passing `Score` of `trajectory` when the calls are exactly the expected ones, else `None`."""
    expected = scorer.expected
    if expected is None or len(expected) != len(row.names) or row.truncated:
        return None
    if (scorer.nested and row.nested) or len(set(row.names)) != len(row.names):
        return None
    for want, name, arguments in zip(expected, row.names, row.arguments, strict=True):
        if want.name != name or not _same_arguments(scorer, want, arguments):
            return None
    count = len(expected)
    pairs = [[i, i] for i in range(count)]
    why = f"all {count} expected calls matched" if count else "no calls expected or made"
    return scorer.result(
        True,
        1.0,
        f"Passed ({scorer.mode}, score 1.00): {why}.",
        expected=list(row.names),
        actual=list(row.names),
        matched=pairs,
        in_order=[list(pair) for pair in pairs],
    )


def _same_arguments(scorer: Trajectory, want: ExpectedCall, arguments: str | None) -> bool:
    if want.arguments is None or scorer.arguments.for_tool(want.name).mode == "ignore":
        return True
    if arguments is None:
        return False
    try:
        return _encode(want.arguments) == arguments
    except (TypeError, ValueError):  # not a JSON value, or NaN: the reference decides
        return False


FORMS: dict[type[Scorer], Form] = {Trajectory: trajectory_form}
"""Columnar forms by the exact scorer class they answer for."""


def form_of(scorer: Scorer) -> Form | None:
    """The columnar form for `scorer`'s exact class, or `None`."""
    return FORMS.get(type(scorer))
