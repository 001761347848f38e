"""The `trajectory` scorer: the agent's tool-call sequence against an expected one.

A call matches an expected call when the names are equal and the arguments satisfy the
argument matcher (expected `arguments: None` means "any arguments"). Modes:

| mode | passes when | value |
|---|---|---|
| strict | same calls, same order, same count | 1 or 0 |
| in_order | the expected calls appear in order (extras allowed) | LCS / expected |
| any_order | same calls in any order, no extras | matched / max(expected, actual) |
| superset | every expected call was made (extras allowed) | matched / expected |
| subset | every call made was expected (omissions allowed) | matched / actual |
| precision | matched / actual >= threshold | matched / actual |
| recall | matched / expected >= threshold | matched / expected |

`threshold` (default 1.0) applies to the graded modes (in_order, any_order, precision, recall);
strict, superset and subset are binary. Unordered modes pair repeated tool names by maximum
bipartite matching. An empty expectation (`tool_calls: []`) means "no tool calls" in every mode:
any recorded call fails it, and the reason names the calls. With no calls made, precision is 1
only if none were expected. An expected call whose arguments could only be compared with
arguments that were not recorded is missing, and the reason says the arguments were not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCall,
    argument_diffs,
    call_matches,
    format_call,
    lcs_pairs,
    max_bipartite_matching,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import arguments_not_recorded, unrecorded_labels
from evaltrace.evaluators.scoring.scorers.registry import register

TrajectoryMode = Literal["strict", "in_order", "any_order", "superset", "subset", "precision", "recall"]
_EXTRAS_ALLOWED = ("in_order", "superset", "recall")


@dataclass(frozen=True)
class _Alignment:
    """How expected and actual calls pair up, computed once for every mode."""

    n_expected: int
    n_actual: int
    matched: dict[int, int]  # expected index -> actual index, maximum matching
    ordered: list[tuple[int, int]]  # LCS pairs
    strict: bool


def _align(expected: list[ExpectedCall], actual: list[ToolCall], match: ArgumentMatch) -> _Alignment:
    # Only same-name pairs can match: comparing those alone gives the same matrix with far fewer calls.
    by_name: dict[str, list[int]] = {}
    for j, call in enumerate(actual):
        by_name.setdefault(call.name, []).append(j)
    ok = [[False] * len(actual) for _ in expected]
    for i, e in enumerate(expected):
        for j in by_name.get(e.name, ()):
            ok[i][j] = call_matches(e, actual[j], match)

    def compatible(i: int, j: int) -> bool:
        return ok[i][j]

    strict = len(expected) == len(actual) and all(ok[i][i] for i in range(len(expected)))
    return _Alignment(
        n_expected=len(expected),
        n_actual=len(actual),
        matched=max_bipartite_matching(len(expected), len(actual), compatible),
        ordered=lcs_pairs(len(expected), len(actual), compatible),
        strict=strict,
    )


def _ratio(part: int, whole: int, empty: float) -> float:
    return empty if whole == 0 else part / whole


def mode_value(mode: TrajectoryMode, al: _Alignment) -> float:
    """The graded value of `mode` for an alignment (see the module table)."""
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


@register
class Trajectory(Scorer):
    """The tool-call sequence matches the expected calls in the chosen mode."""

    name: ClassVar[str] = "trajectory"
    version: ClassVar[int] = 2
    """2: `expected: []` fails on any call in every mode (before: only where extras were not allowed)."""
    reads_histories: ClassVar[bool] = False

    expected: list[ExpectedCall] | None = None
    """Expected calls in order; `None` means there is nothing to compare (not applicable)."""
    mode: TrajectoryMode = "in_order"
    """strict | in_order | any_order | superset | subset | precision | recall."""
    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    """Minimum value to pass in the graded modes (in_order, any_order, precision, recall)."""
    arguments: ArgumentMatch = Field(default_factory=ArgumentMatch)
    """How arguments are compared."""
    nested: bool = False
    """Include the calls made by nested agents, after the call that started them."""

    def configuration_problem(self) -> str | None:
        """No expected calls configured."""
        return (
            "no expected tool calls are configured: give expected (a case's tool_calls)"
            if self.expected is None
            else None
        )

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Align the recorded calls with `expected` and grade them in `mode`."""
        if self.expected is None:
            return self.result(None, reason="No expected tool calls are configured.")
        actual = trace.all_tool_calls(nested=self.nested)
        if not self.expected and actual:
            return self._no_calls_expected(actual)
        al = _align(self.expected, actual, self.arguments)
        value = mode_value(self.mode, al)
        if self.mode in ("strict", "superset", "subset"):
            passed = value == 1.0
        else:
            passed = value >= self.threshold
        reason = self._reason(al, actual, passed, value)
        details = self._details(al, actual)
        blind = self._blind(al, actual)
        if blind and not passed:
            reason += f" {arguments_not_recorded(blind)[0].upper()}{arguments_not_recorded(blind)[1:]}."
            details["unrecorded"] = True
        return self.result(passed, value, reason, **details)

    def _no_calls_expected(self, actual: list[ToolCall]) -> Score:
        """`tool_calls: []` means no tool calls, whatever the mode."""
        named = ", ".join(f"#{j + 1} {call.name}" for j, call in enumerate(actual[:5]))
        more = f" and {len(actual) - 5} more" if len(actual) > 5 else ""
        reason = f"Failed ({self.mode}): no tool calls were expected, but {len(actual)} were made: {named}{more}."
        return self.result(False, 0.0, reason, expected=[], actual=[c.name for c in actual], matched=[], in_order=[])

    def _blind(self, al: _Alignment, actual: list[ToolCall]) -> list[str]:
        """Labels of unmatched calls whose arguments were not recorded but an expected call compares."""
        assert self.expected is not None
        used = set(al.matched.values())
        wanted = {e.name for i, e in enumerate(self.expected) if i not in al.matched and e.arguments is not None}
        labels = unrecorded_labels(actual)
        return [label for j, label in enumerate(labels) if label and j not in used and actual[j].name in wanted]

    def _missing(self, al: _Alignment) -> tuple[list[int], list[int]]:
        """Expected indices missing altogether, and those present but out of order."""
        if self.mode in ("strict", "in_order"):
            in_order = {i for i, _ in al.ordered}
            absent = [i for i in range(al.n_expected) if i not in in_order and i not in al.matched]
            late = [i for i in range(al.n_expected) if i not in in_order and i in al.matched]
            return absent, late
        return [i for i in range(al.n_expected) if i not in al.matched], []

    def _reason(self, al: _Alignment, actual: list[ToolCall], passed: bool, value: float) -> str:
        assert self.expected is not None
        absent, late = self._missing(al)
        used = set(al.matched.values()) | {j for _, j in al.ordered}
        extra = [j for j in range(al.n_actual) if j not in used]
        head = f"{'Passed' if passed else 'Failed'} ({self.mode}, score {value:.2f})"
        parts: list[str] = []
        for i in absent:
            parts.append(
                f"missing {format_call(self.expected[i].name, self.expected[i].arguments)}{self._near(i, al, actual)}"
            )
        if late:
            exp = self.expected
            where = [f"{exp[i].name} (expected step {i + 1}, made as call #{al.matched[i] + 1})" for i in late]
            parts.append("out of order: " + ", ".join(where))
        if extra:
            allowed = " (allowed in this mode)" if self.mode in _EXTRAS_ALLOWED else ""
            parts.append("extra " + ", ".join(f"#{j + 1} {actual[j].name}" for j in extra) + allowed)
        if self.mode == "strict" and not absent and not late and not extra and not al.strict:
            parts.append("same calls but not position by position")
        if not parts:
            parts.append(
                f"all {al.n_expected} expected calls matched" if al.n_expected else "no calls expected or made"
            )
        return f"{head}: " + "; ".join(parts) + "."

    def _near(self, i: int, al: _Alignment, actual: list[ToolCall]) -> str:
        """Why the closest same-name unmatched call did not match expected call `i`."""
        assert self.expected is not None
        used = set(al.matched.values())
        exp = self.expected[i]
        for j, call in enumerate(actual):
            if j not in used and call.name == exp.name:
                diffs = argument_diffs(exp, call, self.arguments)
                return f" (call #{j + 1} {call.name} differs: {'; '.join(diffs[:3])})"
        return ""

    def _details(self, al: _Alignment, actual: list[ToolCall]) -> dict[str, Any]:
        assert self.expected is not None
        return {
            "expected": [e.name for e in self.expected],
            "actual": [c.name for c in actual],
            "matched": [[i, j] for i, j in sorted(al.matched.items())],
            "in_order": [[i, j] for i, j in al.ordered],
        }
