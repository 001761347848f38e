"""Reference-free rule scorers over the calls an agent made: errors, redundancy, budgets.

- `tool_errors`: a call failed when the instrumentation recorded an error for it, or (with
  `error_results`) when its result is a JSON object whose top-level `error` field is set. A
  result that was not captured is not a failure: `None` means "not recorded" (a failure is
  recorded as the span's status, which content capture does not remove).
- `tool_efficiency`: two calls are redundant when they have the same name and the same
  arguments (numbers by value). A repeat right after a failed call is a retry, not redundancy,
  unless `count_retries`. Runs of identical consecutive calls are reported as loops. Calls
  whose arguments were not recorded are never counted as repeats; when such a call shares its
  tool with another, "no repeats" cannot be shown: a spec check fails and names the calls, a
  default does not apply.
- `budget`: counts of tool calls, model calls (iterations) and steps (model calls plus tool
  calls) against maxima.

With no tool calls, `tool_errors` and `tool_efficiency` have nothing to find: written in a spec
they pass (no call failed, none repeated), as defaults they do not apply.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar, cast

import numpy as np
from pydantic import Field

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring._kernels import Bools, Ints, by_object, made_once
from evaltrace.evaluators.scoring.columns import BatchCalls, RowCalls, columnar_form, columnar_forms
from evaltrace.evaluators.scoring.scorers.arguments import call_label, canonical_arguments, clip, format_call, short
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import arguments_not_recorded, unrecorded_labels
from evaltrace.evaluators.scoring.scorers.registry import register


def call_failure(call: ToolCall, error_results: bool) -> str | None:
    """The error of a failed call, or `None` when it succeeded (or its outcome was not recorded)."""
    return failure(call.error, call.result, error_results)


def failure(error: str | None, result: Any, error_results: bool) -> str | None:
    """`call_failure` of a call's error and result."""
    if error:
        return error
    if error_results and isinstance(result, dict) and result.get("error") not in (None, False, ""):
        return f"result error: {short(result['error'])}"
    return None


@register
class ToolErrors(Scorer):
    """Tool calls succeed: at most `max_errors` failed calls; value = fraction of calls that succeeded."""

    name: ClassVar[str] = "tool_errors"
    reads_histories: ClassVar[bool] = False

    max_errors: int = Field(default=0, ge=0)
    """Largest number of failed calls that still passes."""
    error_results: bool = True
    """Also count a result that is a JSON object with a non-empty top-level `error` field as a failure."""
    nested: bool = False
    """Also count the calls made by nested agents."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Count the failed calls."""
        return self.graded(trace.all_tool_calls(nested=self.nested))

    def graded(self, calls: list[ToolCall]) -> Score:
        """`score` of a trace's calls (`all_tool_calls`: a table row's, for the columnar form)."""
        if not calls:
            if self.spec_check:
                return self.result(True, 1.0, "The agent made no tool calls, so none failed.")
            return self.result(None, reason="The agent made no tool calls.")
        failures = [(i, call.name, call_failure(call, self.error_results)) for i, call in enumerate(calls)]
        return self.counted(len(calls), failures)

    def counted(self, count: int, found: list[tuple[int, str, str | None]]) -> Score:
        """The verdict on `count` calls (some), given `(index, name, call_failure)` of calls that may have failed."""
        failures = [f"{call_label(i, name)}: {clip(error)}" for i, name, error in found if error is not None]
        value = (count - len(failures)) / count
        passed = len(failures) <= self.max_errors
        if failures:
            head = f"{len(failures)} of {count} tool calls failed (max {self.max_errors})"
            reason = f"{head}: " + "; ".join(failures[:3])
        else:
            reason = f"All {count} tool calls succeeded."
        return self.result(passed, value, reason, failures=failures)


@register
class ToolEfficiency(Scorer):
    """No redundant tool calls (same name and arguments); value = distinct calls / calls."""

    name: ClassVar[str] = "tool_efficiency"
    version: ClassVar[int] = 2
    """2: calls of one tool with unrecorded arguments no longer pass as distinct."""
    reads_histories: ClassVar[bool] = False

    max_redundant: int = Field(default=0, ge=0)
    """Largest number of redundant calls that still passes."""
    max_loop: int | None = Field(default=None, ge=1)
    """Longest allowed run of the same call repeated back to back (2 = one immediate repeat); None: no extra limit."""
    count_retries: bool = False
    """Count a repeat of a call that failed as redundant (by default it is a legitimate retry)."""
    nested: bool = False
    """Also check the calls made by nested agents."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Find repeated calls and loops."""
        calls = trace.all_tool_calls(nested=self.nested)
        if not calls:
            if self.spec_check:
                return self.result(True, 1.0, "The agent made no tool calls, so none was redundant.")
            return self.result(None, reason="The agent made no tool calls.")
        failed = [call_failure(call, True) is not None for call in calls]
        passed, value, reason, details = self.graded([(c.name, c.arguments) for c in calls], failed.__getitem__)
        blind = _incomparable(calls)
        if passed and blind:
            why = f"Repeats cannot be ruled out: {arguments_not_recorded(blind)}."
            return self.missing(why, **details)
        return self.result(passed, value, reason, **details)

    def graded(
        self, calls: list[tuple[str, Any]], failed: Callable[[int], bool], forms: Callable[[int], str] | None = None
    ) -> tuple[bool, float, str, dict[str, Any]]:
        """Passed, value, reason and details of `(name, arguments)` calls, `failed(i)` telling whether call i failed.

        `forms(i)`: call i's `canonical_arguments`, where known already (a columnar form's, kept by text).
        """
        # Arguments that were not recorded cannot be compared: such a call never counts as a repeat.
        canonical = forms or (lambda i: canonical_arguments(calls[i][1]))
        keys = [
            (name, f"<not recorded #{i}>" if value is None else canonical(i)) for i, (name, value) in enumerate(calls)
        ]
        redundant = redundant_calls(keys, self.count_retries, failed)
        loops = find_loops(keys)
        longest = max((n for _, n in loops), default=1)
        passed = len(redundant) <= self.max_redundant and (self.max_loop is None or longest <= self.max_loop)
        parts = []
        if redundant:
            parts.append(f"{len(redundant)} redundant (max {self.max_redundant}): " + ", ".join(redundant[:3]))
        for start, n in loops[:3]:
            parts.append(f"loop: {format_call(*calls[start])} {n} times in a row from #{start + 1}")
        reason = "; ".join(parts) + "." if parts else f"No redundant calls among {len(calls)}."
        return (
            passed,
            len(set(keys)) / len(calls),
            reason,
            {"redundant": redundant, "loops": [[s, n] for s, n in loops]},
        )


def _incomparable(calls: list[ToolCall]) -> list[str]:
    """Labels of calls whose arguments were not recorded while another call used the same tool."""
    uses = Counter(call.name for call in calls)
    labels = unrecorded_labels(calls)
    return [label for label, call in zip(labels, calls, strict=True) if label and uses[call.name] > 1]


def redundant_calls(keys: list[tuple[str, str]], count_retries: bool, failed: Callable[[int], bool]) -> list[str]:
    """Repeats of an earlier call (by key), but for immediate retries of a failed call unless `count_retries`."""
    seen: dict[tuple[str, str], int] = {}
    redundant: list[str] = []
    for i, key in enumerate(keys):
        first = seen.get(key)
        if first is None:
            seen[key] = i
            continue
        if not count_retries and keys[i - 1] == key and failed(i - 1):
            continue  # an immediate retry of a failed call
        redundant.append(f"#{i + 1} repeats #{first + 1} {key[0]}")
    return redundant


def find_loops(keys: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """Runs of identical consecutive calls, as `(start index, length)` with length >= 2."""
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(keys) + 1):
        if i == len(keys) or keys[i] != keys[start]:
            if i - start >= 2:
                runs.append((start, i - start))
            start = i
    return runs


@register
class Budget(Scorer):
    """The run stays within step budgets: tool calls, model calls and steps (model calls + tool calls)."""

    name: ClassVar[str] = "budget"
    reads_histories: ClassVar[bool] = False

    max_tool_calls: int | None = Field(default=None, ge=0)
    """Most tool calls allowed."""
    max_model_calls: int | None = Field(default=None, ge=0)
    """Most model calls (iterations) allowed."""
    max_steps: int | None = Field(default=None, ge=0)
    """Most steps allowed, counting each model call and each tool call as one step."""
    nested: bool = False
    """Also count the tool calls of nested agents."""

    def configuration_problem(self) -> str | None:
        """No limit set."""
        if (self.max_tool_calls, self.max_model_calls, self.max_steps) != (None, None, None):
            return None
        return "no budget limit is configured: give max_tool_calls, max_model_calls or max_steps"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Compare the counts with the limits that are set."""
        return self.counted(len(trace.all_tool_calls(nested=self.nested)), len(trace.iterations))

    def counted(self, tool_calls: int, model_calls: int) -> Score:
        """The verdict on a run's counts of tool calls and model calls."""
        counts = {"tool calls": tool_calls, "model calls": model_calls, "steps": tool_calls + model_calls}
        limits = {"tool calls": self.max_tool_calls, "model calls": self.max_model_calls, "steps": self.max_steps}
        checked = {k: (counts[k], lim) for k, lim in limits.items() if lim is not None}
        if not checked:  # a spec cannot get here: `configuration_problem` rejects it
            return self.result(None, reason="No budget limit is configured.")
        over = [f"{k}: {n} > max {lim}" for k, (n, lim) in checked.items() if n > lim]
        within = ", ".join(f"{k} {n}/{lim}" for k, (n, lim) in checked.items())
        reason = ("Over budget: " + "; ".join(over)) if over else f"Within budget ({within})"
        return self.result(not over, None, reason + ".", **{k.replace(" ", "_"): n for k, n in counts.items()})


# The columnar forms (see `columns.py`): a sure pass with the reference's exact `Score`, else `None`.
# `tool_errors`: no call has an error recorded and, with `error_results`, no result's JSON text holds
# `"error"` (so no result is an object with an `error` field); any other row is graded by the
# reference's own code (`ToolErrors.graded`) on its calls' names, errors and results. `budget`: the
# counts within every limit set. `tool_efficiency`: calls compared by name and canonical arguments,
# as the reference does (its `graded`, a failure too), from the decoded JSON; a call whose arguments
# were not recorded, sharing its tool with another, is left to it. With `nested`, a row whose calls
# started nested agents is left to the reference (their calls count).


def tool_errors_forms(scorers: list[ToolErrors], batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """Per row (with its scorer), the `Score` of `tool_errors`: a pass where no call can have failed, else graded.

    By each scorer's rows at once: a pass shared by the rows of as many calls (across batches too).
    """
    at, found = np.asarray(rows, np.int64), np.full(len(rows), None, object)
    counts, nested, failed = batch.call_counts[at], batch.rows_nested[at], batch.failed_calls[at] > 0
    for scorer, places in by_object(scorers):
        left = nested[places] if scorer.nested else np.zeros(len(places), bool)  # their calls count: the reference
        doubt = ~left & (failed[places] | (batch.rows_error_text[at[places]] if scorer.error_results else False))
        sure = ~left & ~doubt & (counts[places] > 0)
        passing = batch.memo(scorer, "passing", run=True)  # by count
        found[places[sure]] = made_once(counts[places][sure], _errors_pass, scorer, passing)
        for k in places[doubt].tolist():
            found[k] = _errors_graded(scorer, batch, rows[k])
        if scorer.spec_check:  # no calls: a pass as a check of the spec's only
            found[places[~left & ~doubt & (counts[places] == 0)]] = _errors_pass(scorer, passing, 0)
    return cast("list[Score | None]", found.tolist())


def _errors_pass(scorer: ToolErrors, passing: dict[int, Score], count: int) -> Score:
    if (found := passing.get(count)) is None:
        if count:
            found = passing[count] = scorer.result(True, 1.0, f"All {count} tool calls succeeded.", failures=[])
        else:
            found = passing[count] = scorer.result(True, 1.0, "The agent made no tool calls, so none failed.")
    return found


tool_errors_form = columnar_forms(ToolErrors, tool_errors_forms)


def _errors_graded(scorer: ToolErrors, batch: BatchCalls, index: int) -> Score:
    """The reference's `Score` by its own code (`counted`) on the row's calls' errors, and results that may hold one.

    A result is read only if its text holds `"error"` (`rows_error_text`: evaltrace's encoder escapes no letter).
    """
    start, end = batch.offsets[index], batch.offsets[index + 1]
    errors, texts = cast("list[str | None]", batch.call_field("error")), batch.call_field("result_json")
    found = []
    for i, j in enumerate(range(start, end)):
        text = texts[j] if scorer.error_results and not errors[j] else None
        result = json.loads(text) if isinstance(text, str) and '"error"' in text else None
        found.append((i, batch.names[j], failure(errors[j], result, scorer.error_results)))
    return scorer.counted(end - start, found)


@columnar_form(Budget)
def budget_form(scorer: Budget, row: RowCalls) -> Score | None:
    """The passing `Score` of `budget` when every count set a limit is within it, else `None`."""
    if scorer.nested and row.nested:
        return None
    found = scorer.counted(len(row.names), row.batch.model_calls[row.index])
    return found if found.passed else None


def tool_efficiency_forms(scorers: list[ToolEfficiency], batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """Per row (with its scorer), the `Score` of `tool_efficiency`: a pass when no call repeats, else its `graded`.

    By each scorer's rows at once: rows whose calls all differ (`_distinct`) pass, shared by rows of as
    many calls; the others row by row (`_efficiency`).
    """
    at, found = np.asarray(rows, np.int64), np.full(len(rows), None, object)
    for scorer, places in by_object(scorers):
        tops = at[places]
        left = batch.rows_nested[tops] if scorer.nested else np.zeros(len(tops), bool)  # their calls count
        canonical, passing = batch.memo(scorer, "canonical", run=True), batch.memo(scorer, "passing", run=True)
        sure = _distinct(scorer, batch, tops, canonical) & ~left
        found[places[sure]] = made_once(batch.call_counts[tops[sure]], _distinct_pass, scorer, passing)
        for k in places[~sure & ~left].tolist():
            found[k] = _efficiency(scorer, RowCalls(batch, rows[k]), canonical)
    return cast("list[Score | None]", found.tolist())


tool_efficiency_form = columnar_forms(ToolEfficiency, tool_efficiency_forms)


def _efficiency(scorer: ToolEfficiency, row: RowCalls, canonical: dict[str, str]) -> Score | None:
    """The reference's `Score` by its own grading of the row's calls; `None` where an unrecorded call may repeat."""
    names = row.names
    if not names:
        none = "The agent made no tool calls, so none was redundant."
        return scorer.result(True, 1.0, none) if scorer.spec_check else None
    arguments = row.json_values()
    if _unrecorded_repeat(names, arguments, row.call_values("arguments_truncated")):
        return None  # repeats cannot be ruled out: the reference reports the unrecorded calls
    texts = row.arguments
    forms = [
        text and (canonical.get(text) or canonical.setdefault(text, canonical_arguments(value)))
        for text, value in zip(texts, arguments, strict=True)
    ]
    passed, value, reason, details = scorer.graded(
        list(zip(names, arguments, strict=True)), functools.partial(_failed, row), cast("list[str]", forms).__getitem__
    )
    return scorer.result(passed, value, reason, **details)  # none unrecorded: the reference's very `Score`


def _distinct(scorer: ToolEfficiency, batch: BatchCalls, tops: Ints, canonical: dict[str, str]) -> Bools:
    """Per row of `tops`: whether it made calls, each recorded, all differing in name or canonical arguments.

    The reference's keys: each distinct arguments text's canonical form made once a run (`canonical`),
    each distinct (name, canonical form) numbered, the numbers counted per row.
    """
    calls, owner = batch.calls_of(tops)
    _, first, inverse = np.unique(np.asarray(batch.call_keys, np.int64)[calls], return_index=True, return_inverse=True)
    numbers, names, texts = batch.memo(scorer, "numbers", run=True), batch.names, batch.arguments
    made = []
    for j in calls[first].tolist():
        if (text := texts[j]) is None:
            made.append(-1)  # not recorded: never a sure pass
            continue
        form = canonical.get(text) or canonical.setdefault(text, canonical_arguments(json.loads(text)))
        made.append(numbers.get(key := (names[j], form)) or numbers.setdefault(key, len(numbers) + 1))
    number = np.asarray(made, np.int64)[inverse]
    counts = batch.call_counts[tops]
    seen = np.bincount(np.unique(owner << 32 | np.maximum(number, 0)) >> 32, minlength=len(tops))
    found: Bools = (seen == counts) & (counts > 0) & (np.bincount(owner, number < 0, len(tops)) == 0)
    return found


def _distinct_pass(scorer: ToolEfficiency, passing: dict[int, Score], count: int) -> Score:
    """The reference's pass of `count` calls all differing: no repeat, no loop, whatever the limits."""
    if (found := passing.get(count)) is None:
        why = f"No redundant calls among {count}."
        found = passing[count] = scorer.result(True, 1.0, why, redundant=[], loops=[])
    return found


def _unrecorded_repeat(names: list[str], arguments: list[Any], truncated: list[object]) -> bool:
    """Whether a call's arguments were not recorded while another call used the same tool."""
    uses = Counter(names)
    return any(
        value is None and not cut and uses[name] > 1
        for name, value, cut in zip(names, arguments, truncated, strict=True)
    )


def _failed(row: RowCalls, index: int) -> bool:
    """Whether call `index` failed: an error recorded, or a result object whose `error` field is set."""
    if row.call_values("error")[index]:
        return True
    text = row.call_values("result_json")[index]
    result = None if text is None else json.loads(str(text))
    return isinstance(result, dict) and result.get("error") not in (None, False, "")
