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

import json
from typing import Any, ClassVar, NamedTuple, cast

from pydantic import Field

from evaltrace.collector.traces.arguments import arguments_match
from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.collector.traces.table import bare_calls, comparable_text
from evaltrace.evaluators.scoring.columns import BatchCalls, RowCalls, columnar_forms, plan
from evaltrace.evaluators.scoring.scorers._alignment import Alignment, TrajectoryMode, align, mode_value
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCallsScorer,
    argument_diffs,
    call_matches,
    compared_flags,
    expected_matches,
    format_call,
    max_bipartite_matching,
    positions,
)
from evaltrace.evaluators.scoring.scorers.base import Score, check_applies, sure_pass
from evaltrace.evaluators.scoring.scorers.evidence import arguments_not_recorded, unrecorded_labels
from evaltrace.evaluators.scoring.scorers.registry import register

_EXTRAS_ALLOWED = ("in_order", "superset", "recall")


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
        return self.graded(trace.all_tool_calls(nested=self.nested))

    def graded(self, actual: list[ToolCall]) -> Score:
        """`score` of a trace's calls (`all_tool_calls`: a table row's, for the columnar form)."""
        if self.expected is None:
            return self.result(None, reason="No expected tool calls are configured.")
        if not self.expected and actual:
            return self._no_calls_expected(actual)
        expected, match = self.expected, self.arguments
        al = align(expected, [call.name for call in actual], lambda i, j: call_matches(expected[i], actual[j], match))
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

    def _blind(self, al: Alignment, actual: list[ToolCall]) -> list[str]:
        """Labels of unmatched calls whose arguments were not recorded but an expected call compares."""
        assert self.expected is not None
        used = set(al.matched.values())
        wanted = {e.name for i, e in enumerate(self.expected) if i not in al.matched and e.arguments is not None}
        labels = unrecorded_labels(actual)
        return [label for j, label in enumerate(labels) if label and j not in used and actual[j].name in wanted]

    def _missing(self, al: Alignment) -> tuple[list[int], list[int]]:
        """Expected indices missing altogether, and those present but out of order."""
        if self.mode in ("strict", "in_order"):
            in_order = {i for i, _ in al.ordered}
            absent = [i for i in range(al.n_expected) if i not in in_order and i not in al.matched]
            late = [i for i in range(al.n_expected) if i not in in_order and i in al.matched]
            return absent, late
        return [i for i in range(al.n_expected) if i not in al.matched], []

    def _reason(self, al: Alignment, actual: list[ToolCall], passed: bool, value: float) -> str:
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

    def _near(self, i: int, al: Alignment, actual: list[ToolCall]) -> str:
        """Why the closest same-name unmatched call did not match expected call `i`."""
        assert self.expected is not None
        used = set(al.matched.values())
        exp = self.expected[i]
        for j, call in enumerate(actual):
            if j not in used and call.name == exp.name:
                diffs = argument_diffs(exp, call, self.arguments)
                return f" (call #{j + 1} {call.name} differs: {'; '.join(diffs[:3])})"
        return ""

    def _details(self, al: Alignment, actual: list[ToolCall]) -> dict[str, Any]:
        assert self.expected is not None
        return {
            "expected": [e.name for e in self.expected],
            "actual": [c.name for c in actual],
            "matched": [[i, j] for i, j in sorted(al.matched.items())],
            "in_order": [[i, j] for i, j in al.ordered],
        }


# The columnar form: the reference's `Score` of a table row, or `None`; each row with its case's scorer.
# Rows of the expected calls' names and texts pass by array operations over the batch. Any other row's
# answer follows from its calls' names and which expected calls each matches (`_by_matches`, worked out
# once a run per distinct such sequence): a pass by the reference's matching, else the reference's own
# grading of its calls (`_graded`); rows whose nested agents' calls count, or whose texts do not parse,
# go to the reference.


class _Plan(NamedTuple):
    """What the form reads of a scorer's configuration alone, made when the spec is compiled (`prepare`)."""

    names: tuple[str, ...]  # the expected calls' (the spec's strings: the compiled-spec cache holds each once)
    text: str | None  # compared expected arguments as an array's text, others null; "": not JSON; None: none
    pairs: tuple[int, ...] | None  # the reference's matching of the expected calls made (`()`: the identity)


class _Known(NamedTuple):
    """What `_trajectory` reads of a scorer's configuration, made once a batch from it and its plan."""

    wanted: list[str]
    arguments: list[Any]
    compared: list[bool]  # per expected call, whether its arguments are compared (`compared_flags`)
    encoded: list[str | None] | None  # each compared one's as the table's text (None: not JSON, as `_Plan.text`)
    matches: dict[tuple[str, str | None], int]  # the run's memos: `_matches` by call, `_by_matches` by names
    verdicts: dict[tuple[Any, ...], Score]  # and matches, the matcher's answers by expected call and text
    asked: dict[tuple[int, str | None], bool]


_Passing = dict[tuple[Any, ...], Score]  # rows passing alike: (mode, pairs or expected names, names)
_GRADE = Score.model_construct(scorer="", passed=False)  # a row's answer: the reference's grading (`_graded`)


def _plan(scorer: Trajectory) -> _Plan:
    """The plan kept with the scorer (small: 10,000 cases' texts cost ~20 MB); `pairs` only if all compared."""
    if scorer.expected is None:  # nothing to plan
        return _Plan((), None, None)
    names, arguments = [want.name for want in scorer.expected], [want.arguments for want in scorer.expected]
    compared = compared_flags(scorer.arguments, names, arguments)
    try:
        text = comparable_text([a if c else None for a, c in zip(arguments, compared, strict=True)])
        texts = [comparable_text(a) for a in arguments] if False not in compared else None
    except (TypeError, ValueError):  # the reference decides
        return _Plan(tuple(names), "", None)
    if texts is None or len(set(names)) == len(names):  # no name twice: only the identity can pair them
        return _Plan(tuple(names), text, None if texts is None else ())
    # The reference's own alignment of a row made with the expected texts (the decoded trace's calls).
    made, expected, match = [json.loads(t) for t in texts], scorer.expected, scorer.arguments
    found = align(expected, names, lambda i, j: expected_matches(expected[i], names[j], made[j], False, match))
    pairs = tuple(found.matched[i] for i in range(len(names)))
    return _Plan(tuple(names), text, None if not found.strict else () if pairs == tuple(range(len(names))) else pairs)


def trajectory_forms(scorers: list[Trajectory], batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """Per row (with its scorer), the `Score` of `trajectory`: passes by array operations where they can tell.

    Rows of as many calls as expected settled by array operations (names, texts); others by their
    calls' names and matches (`_by_matches`), each distinct sequence of them worked out once a run.
    """
    plans: list[_Plan] = [plan(scorer) for scorer in scorers]
    names, texts = batch.same_names(rows, [known.names for known in plans]), batch.joined_arguments
    cut, nested, passing = batch.rows_truncated.tolist(), batch.rows_nested.tolist(), cast("_Passing", {})
    found: list[Score | None] = []
    configured: dict[int, _Known] = {}  # by scorer object: a case's rows share it
    for scorer, known, index, same in zip(scorers, plans, rows, names, strict=True):
        if scorer.expected is None or (same is False and known.pairs is not None):
            found.append(_graded(scorer, RowCalls(batch, index)))
        elif same and known.pairs is not None and texts[index] == cast("str", known.text)[1:-1] and not cut[index]:
            found.append(None if scorer.nested and nested[index] else _alike(scorer, known, passing))
        elif cut[index] or (scorer.nested and nested[index]):
            found.append(_graded(scorer, RowCalls(batch, index)))
        else:
            known_row = configured.get(key := id(scorer)) or configured.setdefault(key, _configured(scorer, batch))
            found.append(_by_matches(scorer, known_row, batch, index, passing))
    return found


trajectory_form = columnar_forms(Trajectory, trajectory_forms, _plan)


def _alike(scorer: Trajectory, known: _Plan, passing: _Passing) -> Score:
    """The passing `Score` of a row made of the expected calls, paired as `known.pairs` says; shared by rows alike."""
    if (found := passing.get(key := (scorer.mode, known.pairs, known.names))) is None:
        names, steps = list(known.names), range(len(known.names))
        matched = [*map(list, enumerate(cast("tuple[int, ...]", known.pairs) or steps))]
        why = f"all {len(names)} expected calls matched" if names else "no calls expected or made"
        details = {"expected": names, "actual": list(names), "matched": matched, "in_order": [[i, i] for i in steps]}
        found = passing[key] = sure_pass(scorer, 1.0, f"Passed ({scorer.mode}, score 1.00): {why}.", **details)
    return found


def _configured(scorer: Trajectory, batch: BatchCalls) -> _Known:
    """What `_trajectory` reads of `scorer`'s configuration (its plan's text made at compile), and its run's memos."""
    assert scorer.expected is not None
    if (config := (held := batch.memo(scorer, "configured", run=True)).get(0)) is None:  # made once a run
        wanted, arguments = [want.name for want in scorer.expected], [want.arguments for want in scorer.expected]
        compared, text = compared_flags(scorer.arguments, wanted, arguments), plan(scorer).text or None
        encoded = (
            [comparable_text(a) if c else None for a, c in zip(arguments, compared, strict=True)] if text else None
        )
        config = held[0] = (wanted, arguments, compared, encoded)
    memos = (batch.memo(scorer, name, run=True) for name in ("matches", "verdicts", "matcher"))  # each kept bounded
    return _Known(*config, *memos)


def _by_matches(scorer: Trajectory, known: _Known, batch: BatchCalls, index: int, passing: _Passing) -> Score | None:
    """Row `index`'s `Score` kept for the run by its calls' names and which expected calls each matches (`_matches`).

    The answer is a function of them alone (a pass's reason and details name calls, not arguments);
    a failure's (`_GRADE`) is the reference's grading of the row, whose reason quotes its arguments.
    """
    start, end = batch.offsets[index], batch.offsets[index + 1]
    names = batch.names[start:end]
    calls = list(zip(names, batch.arguments[start:end], strict=True))
    masks = list(map(known.matches.get, calls))
    for k in [k for k, mask in enumerate(masks) if mask is None]:  # calls first seen
        masks[k] = known.matches[calls[k]] = _matches(scorer, known, *calls[k])
    if -1 in masks or (found := known.verdicts.get(seen := (*names, *masks))) is None:  # -1: a text not JSON
        found = _trajectory(scorer, known, RowCalls(batch, index), cast("list[int]", masks), passing)
        if found is not None and -1 not in masks:
            known.verdicts[seen] = found
    return _graded(scorer, RowCalls(batch, index)) if found is _GRADE else found


def _matches(scorer: Trajectory, known: _Known, name: str, text: str | None) -> int:
    """Which expected calls the call `(name, text)` matches, as bits (`call_matches`'s answers); -1: a text not JSON."""
    mask = 0
    for i in (i for i, want in enumerate(known.wanted) if want == name):
        sure = not known.compared[i] or (known.encoded is not None and known.encoded[i] == text)
        if not sure and (sure := known.asked.get((i, text))) is None:  # type: ignore[assignment]
            try:
                value = json.loads("null" if text is None else text)
            except ValueError:
                return -1
            sure = known.asked[i, text] = arguments_match(
                known.arguments[i], value, False, scorer.arguments.for_tool(name)
            )
        mask |= sure << i
    return mask


def _trajectory(scorer: Trajectory, known: _Known, row: RowCalls, masks: list[int], passing: _Passing) -> Score | None:
    """A pass by the reference's matching of the row's calls, given which expected calls each matches (`masks`)."""
    names, wanted = row.names, known.wanted
    if len(wanted) != len(names):  # extra calls, where allowed: the reference's own alignment of the matches
        if not wanted or len(wanted) > len(names) or scorer.mode not in _EXTRAS_ALLOWED or -1 in masks:
            return _GRADE
        al = align(scorer.expected or [], names, lambda i, j: masks[j] >> i & 1 == 1)
        if mode_value(scorer.mode, al) != 1.0:  # a pass below 1 may name arguments (`_near`): graded per row
            return _GRADE
        calls = bare_calls(name=names)  # a full pass's reason reads names only (once per distinct row: `verdicts`)
        return sure_pass(scorer, 1.0, scorer._reason(al, calls, True, 1.0), **scorer._details(al, calls))
    if names != wanted or -1 in masks or not all(mask >> j & 1 for j, mask in enumerate(masks)):
        return _GRADE  # not each call matching its expected one
    steps, by_name = range(len(names)), positions(names)
    found = max_bipartite_matching(
        len(names), len(names), lambda i, j: masks[j] >> i & 1 == 1, lambda i: by_name[names[i]]
    )
    matched = tuple(found[i] for i in steps)
    return _alike(scorer, _Plan(tuple(names), None, () if matched == tuple(steps) else matched), passing)


def _graded(scorer: Trajectory, row: RowCalls) -> Score | None:
    """The reference's `Score` (`run_scorer`'s) by its own grading of the row's calls; `None`: it needs the trace."""
    calls = row.tool_calls(scorer.nested)
    return None if calls is None else check_applies(scorer, scorer.graded(calls))
