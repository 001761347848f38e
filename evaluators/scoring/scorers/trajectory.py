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
from typing import Any, ClassVar, Literal, NamedTuple

from pydantic import Field

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.collector.traces.table import comparable_text
from evaltrace.evaluators.scoring.columns import BatchCalls, RowCalls, columnar_forms, plan, sure_pass
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCall,
    ExpectedCallsScorer,
    RowPairs,
    argument_diffs,
    call_matches,
    compared_flags,
    format_call,
    lcs_pairs,
    max_bipartite_matching,
    texts_match,
)
from evaltrace.evaluators.scoring.scorers.base import Score
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
    by_name = _positions([call.name for call in actual])
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
        matched=max_bipartite_matching(
            len(expected), len(actual), compatible, lambda i: by_name.get(expected[i].name, ())
        ),
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
class Trajectory(ExpectedCallsScorer):
    """The tool-call sequence matches the expected calls in the chosen mode."""

    name: ClassVar[str] = "trajectory"
    version: ClassVar[int] = 2
    """2: `expected: []` fails on any call in every mode (before: only where extras were not allowed)."""
    reads_histories: ClassVar[bool] = False

    mode: TrajectoryMode = "in_order"
    """strict | in_order | any_order | superset | subset | precision | recall."""
    threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    """Minimum value to pass in the graded modes (in_order, any_order, precision, recall)."""
    arguments: ArgumentMatch = Field(default_factory=ArgumentMatch)
    """How arguments are compared."""
    nested: bool = False
    """Include the calls made by nested agents, after the call that started them."""

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


# The columnar form: the passing `Score` read from a row of the traces table, or `None`. Where extra
# calls are allowed (in_order, superset, recall): every expected call made, in order, by a call of
# the same name and matching arguments, no tool name twice; the matching and ordered pairs are those
# pairs, and the reason lists the extras. Where a tool name repeats (or, for superset and recall,
# the order differs), the pairs are the reference's own alignment functions run on the same question
# of each pair (`_aligned`). Otherwise the row's calls match the expected calls position by position
# (names equal; arguments matching, or not compared). Then, in every mode, the value is 1, nothing
# is missing, late or extra and the ordered pairs are the identity, so the reference's reason and
# details follow from the names alone but for the maximum matching: with no tool name twice it is
# the identity too; with a repeated name it is what `max_bipartite_matching` makes of the same
# compatibility. Arguments match when their JSON text equals the expected arguments encoded as the
# table encodes them (`texts_match`; that text is the form's plan, made when the spec is compiled).
# Otherwise they may still match (a subset of the keys, the default; `1` and `1.0`; `trim`): the
# pair is then asked of the argument matcher (`RowPairs`) on the row's arguments, parsed once per
# row and only if a pair needs them. Not-a-number values, truncated arguments and calls that start
# nested agents (with `nested`) are left to the reference.


class _Plan(NamedTuple):
    wanted: list[str]  # the expected calls' names
    arguments: list[Any]
    compared: list[bool]  # per expected call, whether its arguments are compared (`compared_flags`)
    text: str | None  # the compared ones as one array's text, the others null (`texts_match`); None: not JSON
    distinct: bool  # no name expected twice


_Passing = dict[tuple[str, ...], Score]  # rows passing with the same calls, the pairs fixed by the names alone


def _text(scorer: Trajectory) -> str | None:
    """The plan kept with the scorer: `_Plan.text` ("": not a JSON value, or NaN), the rest cheap to make again."""
    if scorer.expected is None:  # nothing to plan
        return None
    arguments = [want.arguments for want in scorer.expected]
    compared = compared_flags(scorer.arguments, [want.name for want in scorer.expected], arguments)
    try:
        return comparable_text([a if c else None for a, c in zip(arguments, compared, strict=True)])
    except (TypeError, ValueError):  # the reference decides
        return ""


def trajectory_forms(scorer: Trajectory, batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """Per row, the passing `Score` of `trajectory` when the calls are exactly the expected ones, else `None`."""
    text: str | None = plan(scorer)
    if scorer.expected is None or text is None:
        return [None] * len(rows)
    wanted, arguments = [want.name for want in scorer.expected], [want.arguments for want in scorer.expected]
    compared = compared_flags(scorer.arguments, wanted, arguments)
    known = _Plan(wanted, arguments, compared, text or None, len(set(wanted)) == len(wanted))
    passing: _Passing = {}
    return [_trajectory(scorer, known, RowCalls(batch, index), passing) for index in rows]


trajectory_form = columnar_forms(Trajectory, trajectory_forms, _text)


def _trajectory(scorer: Trajectory, known: _Plan, row: RowCalls, passing: _Passing) -> Score | None:
    if row.truncated or (scorer.nested and row.nested):
        return None
    names, texts, wanted = row.names, row.arguments, known.wanted
    if len(wanted) != len(names):
        return _with_extras(scorer, known, row, passing)
    if names != wanted:
        return None
    count = len(names)
    steps = range(count)
    pairs = None
    if not texts_match(known.text, known.compared, texts):  # equal values may differ in text: ask the matcher
        pairs = RowPairs(scorer.arguments, names, known.arguments, known.compared, texts, _known(scorer, row))
        if not pairs.all_match(zip(steps, steps, strict=True)):
            return None
    why = f"all {count} expected calls matched" if count else "no calls expected or made"
    if known.distinct:  # only same-name pairs can match: the identity is forced
        if (found := passing.get(key := tuple(names))) is None:
            found = passing[key] = _passed(scorer, why, wanted, names, _identity(steps), _identity(steps))
        return found
    pairs = pairs or RowPairs(scorer.arguments, names, known.arguments, known.compared, texts, _known(scorer, row))
    matched = _matching(pairs)
    return None if matched is None else _passed(scorer, why, wanted, names, matched, _identity(steps))


def _with_extras(scorer: Trajectory, known: _Plan, row: RowCalls, passing: _Passing) -> Score | None:
    """The passing `Score` where extra calls are allowed: every expected call made in order, no name twice."""
    names, wanted = row.names, known.wanted
    if not wanted or len(wanted) > len(names) or scorer.mode not in _EXTRAS_ALLOWED:
        return None
    if len(set(names)) != len(names):  # which call pairs with which: the reference's own alignment
        return _aligned(scorer, known, row)
    position = {name: j for j, name in enumerate(names)}
    pairs: list[list[int]] = []
    for i, name in enumerate(wanted):
        j = position.get(name)
        if j is None:
            return None
        if pairs and j <= pairs[-1][1]:  # out of order: a failure in order, allowed by superset and recall
            return None if scorer.mode == "in_order" else _aligned(scorer, known, row)
        pairs.append([i, j])
    if not texts_match(known.text, known.compared, [row.arguments[j] for _, j in pairs]):
        asked = RowPairs(scorer.arguments, wanted, known.arguments, known.compared, row.arguments, _known(scorer, row))
        if not asked.all_match((i, j) for i, j in pairs):
            return None
    # Only same-name pairs can match and no name is made twice: the matching and the ordered pairs
    # are both these pairs, nothing is missing or late, and every other call is an allowed extra.
    if (found := passing.get(key := tuple(names))) is None:
        used = {j for _, j in pairs}
        why = "extra " + ", ".join(f"#{j + 1} {name}" for j, name in enumerate(names) if j not in used)
        found = passing[key] = _passed(
            scorer, f"{why} (allowed in this mode)", wanted, names, pairs, [*map(list, pairs)]
        )
    return found


def _aligned(scorer: Trajectory, known: _Plan, row: RowCalls) -> Score | None:
    """The passing `Score` where extra calls are allowed, from the reference's alignment of the row's calls.

    The longest in-order pairing (`lcs_pairs`) and the maximum matching (`max_bipartite_matching`)
    are the reference's functions, asked the reference's question of each pair: same name, and the
    arguments not compared, equal in text, or accepted by the matcher. The answer is given only
    when every expected call is paired (in order, for `in_order`): the value is then 1, nothing is
    missing or late, and the reason lists the calls neither pairing used.
    """
    wanted, compared = known.wanted, known.compared
    try:
        encoded = [comparable_text(a) if c else None for a, c in zip(known.arguments, compared, strict=True)]
    except (TypeError, ValueError):  # not a JSON value, or NaN: the reference decides
        return None
    names, texts = row.names, row.arguments
    asked = RowPairs(scorer.arguments, wanted, known.arguments, compared, texts, _known(scorer, row))  # by expected

    def compatible(i: int, j: int) -> bool:
        if wanted[i] != names[j]:
            return False
        return not compared[i] or encoded[i] == texts[j] or asked.answer(i, j)

    count = len(wanted)
    ordered = lcs_pairs(count, len(names), compatible)
    matched = max_bipartite_matching(count, len(names), compatible)
    if asked.unsure or (len(ordered) if scorer.mode == "in_order" else len(matched)) != count:
        return None
    used = set(matched.values()) | {j for _, j in ordered}
    extra = ", ".join(f"#{j + 1} {name}" for j, name in enumerate(names) if j not in used)
    why = f"extra {extra} (allowed in this mode)" if extra else f"all {count} expected calls matched"
    return _passed(
        scorer, why, wanted, names, [[i, j] for i, j in sorted(matched.items())], [[i, j] for i, j in ordered]
    )


def _passed(scorer: Trajectory, why: str, wanted: list[str], names: list[str], *pairs: list[list[int]]) -> Score:
    """The reference's passing `Score`: value 1, its reason (`why`, after the mode), its details (matched, in order)."""
    reason = f"Passed ({scorer.mode}, score 1.00): {why}."
    return sure_pass(scorer, 1.0, reason, expected=wanted, actual=list(names), matched=pairs[0], in_order=pairs[1])


def _matching(pairs: RowPairs) -> list[list[int]] | None:
    """The reference's maximum matching when call `i` is known to match expected call `i` and a name repeats.

    Kuhn's matching takes, for each expected call in turn, the first free compatible call. With
    every diagonal pair compatible and none below it, expected call i finds calls 0..i-1
    incompatible and call i free: the identity. So the pairs below the diagonal are asked first,
    and only if one is compatible is the whole search run, over each name's own calls. `None`: unsure.
    """
    if not pairs.crossed():
        return None if pairs.unsure else _identity(range(len(pairs.names)))
    names, by_name = pairs.names, _positions(pairs.names)
    found = max_bipartite_matching(len(names), len(names), pairs.compatible, lambda i: by_name[names[i]])
    return None if pairs.unsure else [[i, j] for i, j in sorted(found.items())]


def _known(scorer: Trajectory, row: RowCalls) -> dict[tuple[int, str | None], bool]:
    """The matcher's answers the batch's rows share for `scorer` (`RowPairs`), fetched only when a pair is asked."""
    return row.batch.memo(scorer, "matcher", run=True)  # keyed by expected call and text


def _identity(steps: range) -> list[list[int]]:  # [[0, 0], [1, 1], ...], each pair its own list (made in C)
    return list(map(list, zip(steps, steps, strict=True)))


def _positions(names: list[str]) -> dict[str, list[int]]:
    """Each name's positions in `names`, ascending."""
    positions: dict[str, list[int]] = {}
    for j, name in enumerate(names):
        positions.setdefault(name, []).append(j)
    return positions
