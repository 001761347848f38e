"""The `trajectory` scorer's alignment of recorded calls with expected ones, and each mode's value of it.

Apart from the scorer (`trajectory.py`) so that module holds the scorer and its columnar form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from evaltrace.evaluators.scoring.scorers.arguments import ExpectedCall, lcs_pairs, max_bipartite_matching, positions

TrajectoryMode = Literal["strict", "in_order", "any_order", "superset", "subset", "precision", "recall"]


@dataclass(frozen=True)
class Alignment:
    """How expected and actual calls pair up, computed once for every mode."""

    n_expected: int
    n_actual: int
    matched: dict[int, int]  # expected index -> actual index, maximum matching
    ordered: list[tuple[int, int]]  # LCS pairs
    strict: bool


def align(expected: list[ExpectedCall], actual: list[str], matches: Callable[[int, int], bool]) -> Alignment:
    """How calls named `actual` pair with `expected`: the matching and the ordered pairs, for every mode.

    `matches(i, j)`: whether call `j` matches expected call `i` of its name (`call_matches`), asked once a pair.
    """
    # Only same-name pairs can match: comparing those alone gives the same matrix with far fewer calls.
    by_name = positions(actual)
    ok = [[False] * len(actual) for _ in expected]
    for i, e in enumerate(expected):
        for j in by_name.get(e.name, ()):
            ok[i][j] = matches(i, j)

    def compatible(i: int, j: int) -> bool:
        return ok[i][j]

    strict = len(expected) == len(actual) and all(ok[i][i] for i in range(len(expected)))
    return Alignment(
        n_expected=len(expected),
        n_actual=len(actual),
        matched=max_bipartite_matching(
            len(expected), len(actual), compatible, lambda i: by_name.get(expected[i].name, ())
        ),
        ordered=lcs_pairs(len(expected), len(actual), compatible),
        strict=strict,
    )


def _ratio(part: int, whole: int, empty: float) -> float:
    return empty if whole == 0 else part / whole


def mode_value(mode: TrajectoryMode, al: Alignment) -> float:
    """The graded value of `mode` for an alignment (see the table in `trajectory.py`)."""
    m = len(al.matched)
    if mode == "strict":
        return 1.0 if al.strict else 0.0
    if mode == "in_order":
        return _ratio(len(al.ordered), al.n_expected, 1.0)
    if mode == "any_order":
        return _ratio(m, max(al.n_expected, al.n_actual), 1.0)
    if mode in ("superset", "recall"):
        return _ratio(m, al.n_expected, 1.0)
    # subset and precision: nothing done is vacuously a subset; precision needs nothing expected
    return _ratio(m, al.n_actual, 1.0 if mode == "subset" or al.n_expected == 0 else 0.0)
