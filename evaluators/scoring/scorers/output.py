"""Rule scorers over what the run produced: the final output and its outcome (`steps.py`: its steps).

`output` checks the final answer (`Trace.final_answer()`): `contains`, `not_contains`, `regex`
(searched, not anchored), `equals` (after whitespace normalisation) and `json_schema` (the
answer parsed as JSON and validated). Bad regexes and bad schemas are configuration errors
raised when the scorer is built, so the spec loader can name the file, case and key. When no
answer was recorded every check fails, `not_contains` included (an answer nobody saw cannot be
shown to avoid a word), and the reason says what is missing and how to record it.

`outcome` compares the run's outcome with the expected one. Outcomes describe how the run
ended, not the quality of its steps (as in task-outcome evaluation, behaviour and outcome are
kept apart: `tool_errors` and `tool_efficiency` judge the steps):

- `timeout`: the run was cut off (trace status timeout).
- `error`: the run raised (status error, or a run-level error recorded).
- `failure`: the run returned normally but did not get anywhere: its final answer is empty,
  its last model call failed or was cut short (its normalised `Iteration.stop_reason` is
  `length` or `content_filter`, whatever the provider called it), or every tool call it made failed.
- `success`: the run returned normally with an answer. A tool error the agent recovered from
  (a retry, another tool) is still a success here.
- `unknown`: the run returned normally but no answer was recorded (content capture off, or
  no root span carrying the answer): nothing shows it succeeded, so the `outcome` scorer fails
  and names what is missing, with or without a spec.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, cast

import numpy as np
from pydantic import field_validator

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring._kernels import Bools, by_object
from evaltrace.evaluators.scoring.columns import BatchCalls, RowCalls, columnar_forms
from evaltrace.evaluators.scoring.scorers.arguments import (
    clip,
    short,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import (
    no_answer,
)
from evaltrace.evaluators.scoring.scorers.outcome import CUT_SHORT, cut_short
from evaltrace.evaluators.scoring.scorers.outcome import OutcomeKind as OutcomeKind
from evaltrace.evaluators.scoring.scorers.outcome import RunOutcome as RunOutcome
from evaltrace.evaluators.scoring.scorers.outcome import trace_outcome as trace_outcome
from evaltrace.evaluators.scoring.scorers.registry import register
from evaltrace.evaluators.scoring.scorers.schemas import check_json_schema, schema_errors
from evaltrace.evaluators.scoring.spec.model import valid_regexes


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


@register
class Output(Scorer):
    """The final answer contains, avoids, matches or equals what is expected."""

    name: ClassVar[str] = "output"
    version: ClassVar[int] = 2
    """2: with no recorded answer every check fails (it no longer "does not apply")."""
    reads_histories: ClassVar[bool] = False

    contains: str | list[str] | None = None
    """Substrings the answer must contain."""
    not_contains: str | list[str] | None = None
    """Substrings the answer must not contain."""
    regex: str | list[str] | None = None
    """Regular expressions (Python syntax) that must each match somewhere in the answer."""
    equals: str | None = None
    """The whole answer, compared after collapsing whitespace (and case, unless case_sensitive)."""
    json_schema: dict[str, Any] | None = None
    """The answer must parse as JSON and validate against this schema."""
    case_sensitive: bool = True
    """Compare contains, not_contains, regex and equals case-sensitively."""

    @field_validator("regex")
    @classmethod
    def _valid_regex(cls, value: str | list[str] | None) -> str | list[str] | None:
        return valid_regexes(value)

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else check_json_schema(value, "json_schema")

    def configuration_problem(self) -> str | None:
        """No check configured."""
        if self._check_count():
            return None
        return "no output check is configured: give contains, not_contains, regex, equals or json_schema"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Run every configured check on the final answer."""
        checks = self._check_count()
        if not checks:
            return self.result(None, reason="No output check is configured.")
        text = trace.final_answer()
        if text is None:
            if trace.status in ("error", "timeout") or trace.error:
                return self.result(False, 0.0, f"The run ended with {trace.status} and no final answer: {trace.error}.")
            # Every check fails: not_contains too, since an unseen answer cannot be shown to avoid a word.
            counted = "the output check" if checks == 1 else f"all {checks} output checks"
            reason = f"{no_answer(trace)[0].upper()}{no_answer(trace)[1:]}; {counted} failed."
            return self.result(False, 0.0, reason, unrecorded=True)
        return self.answered(text)

    def answered(self, text: str) -> Score:
        """`score` of a recorded final answer (a table row's, for the columnar form), some check configured."""
        checks, failures = self._check_count(), self._failures(text)
        value = (checks - len(failures)) / checks
        reason = "; ".join(failures) + "." if failures else f"All {checks} output checks passed."
        return self.result(not failures, value, reason, failures=failures)

    def _check_count(self) -> int:
        lists = (_as_list(self.contains), _as_list(self.not_contains), _as_list(self.regex))
        return sum(len(x) for x in lists) + (self.equals is not None) + (self.json_schema is not None)

    def _fold(self, text: str) -> str:
        return text if self.case_sensitive else text.casefold()

    def _failures(self, text: str) -> list[str]:
        folded = self._fold(text)
        failures = [f"missing {s!r}" for s in _as_list(self.contains) if self._fold(s) not in folded]
        failures += [f"contains forbidden {s!r}" for s in _as_list(self.not_contains) if self._fold(s) in folded]
        flags = 0 if self.case_sensitive else re.IGNORECASE
        failures += [f"no match for regex '{p}'" for p in _as_list(self.regex) if not re.search(p, text, flags)]
        if self.equals is not None and " ".join(folded.split()) != " ".join(self._fold(self.equals).split()):
            failures.append(f"expected exactly {short(self.equals)}, got {short(text)}")
        if self.json_schema is not None:
            failures += self._json_failures(text)
        return failures

    def _json_failures(self, text: str) -> list[str]:
        assert self.json_schema is not None
        try:
            data = json.loads(strip_code_fence(text))
        except json.JSONDecodeError as exc:
            return [f"answer is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"]
        return [f"JSON schema: {e}" for e in schema_errors(self.json_schema, data)]


def strip_code_fence(text: str) -> str:
    """The inside of a Markdown code fence wrapping the whole answer, else the answer.

    Models often wrap JSON answers in a fence; the content is what the user asked for. Plain
    string operations, each one pass over the text: the answer is untrusted, and the regular
    expression this replaces backtracked cubically on many newlines (see
    `test_fence_stripper_is_linear_on_hostile_answers` in tests/evaluators/scoring/test_rules_output.py).
    """
    body = text.strip()
    if not (body.startswith("```") and body.endswith("```")) or len(body) < 6:
        return text
    first_line, newline, rest = body[3:].partition("\n")
    if not newline or first_line.strip() not in ("", "json"):
        return text
    inner, newline, closing = rest[:-3].rpartition("\n")
    if not newline or closing.strip():
        return text
    return inner


@register
class Outcome(Scorer):
    """The run ended the expected way: success, failure, error or timeout."""

    name: ClassVar[str] = "outcome"
    version: ClassVar[int] = 2
    """2: a run that returned with no recorded answer is `unknown` (a failure), no longer a success."""
    reads_histories: ClassVar[bool] = False

    expected: OutcomeKind = "success"
    """The expected outcome."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Classify the run and compare; an unknown outcome fails (nothing shows how the run ended)."""
        actual, evidence = trace_outcome(trace)
        passed = actual == self.expected
        verdict = "as expected" if passed else f"expected {self.expected}"
        extra = {"unrecorded": True} if actual == "unknown" else {}
        reason = f"Outcome {actual} ({verdict}): {evidence}."
        return self.result(passed, 1.0 if passed else 0.0, reason, outcome=actual, **extra)


# The columnar forms (see `columns.py`): a sure pass with the reference's exact `Score`, else `None`,
# from the row's columns: the answer is the `output` column, else the last model reply's text (the
# model calls' `output_messages`, as `Trace.final_answer`). `output`: every configured check holds
# on the answer (a `json_schema` check reads a JSON answer inside a code fence, as the reference
# does); a recorded answer that fails one is graded by the reference's own code (`Output.answered`).
# `outcome`: the run's outcome, classified from the columns, is the expected one.


def output_forms(scorers: list[Output], batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """Per row (with its scorer), the `Score` of `output` when an answer was recorded: a pass, or `answered`'s.

    With only case-sensitive `contains`/`not_contains` checks, a recorded output holding every wanted
    text and none forbidden passes at once; the other rows are checked by the reference's own code.
    """
    found, outputs = cast("list[Score | None]", [None] * len(rows)), cast("list[str | None]", batch.column("output"))
    for scorer, places in by_object(scorers):
        checks, passing = scorer._check_count(), batch.memo(scorer, "passing", run=True)
        wanted, forbidden = _as_list(scorer.contains), _as_list(scorer.not_contains)
        plain = scorer.case_sensitive and checks == len(wanted) + len(forbidden)
        for k in places.tolist() if checks else ():  # no check: the reference says so
            text = outputs[rows[k]]
            if not (plain and text is not None and _holds(text, wanted, forbidden)):
                text = RowCalls(batch, rows[k]).final_answer()
                if text is None:
                    continue
                if scorer._failures(text):  # the reference's own grading of the answer
                    found[k] = scorer.answered(text)
                    continue
            if (score := passing.get(0)) is None:
                score = passing[0] = scorer.result(True, 1.0, f"All {checks} output checks passed.", failures=[])
            found[k] = score
    return found


def _holds(text: str, wanted: list[str], forbidden: list[str]) -> bool:
    return all(part in text for part in wanted) and not any(part in text for part in forbidden)


def outcome_forms(scorers: list[Outcome], batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """Per row (with its scorer), the passing `Score` of `outcome` when the run's outcome is the expected one.

    Rows whose columns show a normal return (`_returned`) share one answer; the others are classified one by one.
    """
    at, found, returned = np.asarray(rows, np.int64), np.full(len(rows), None, object), _returned(batch)
    for scorer, places in by_object(scorers):
        passing, sure = batch.memo(scorer, "passing", run=True), returned[at[places]]  # `passing`: by evidence
        found[places[sure]] = _outcome(scorer, "success", "the run returned normally", passing)
        for k in places[~sure].tolist():
            found[k] = _outcome(scorer, *_row_outcome(RowCalls(batch, rows[k])), passing)
    return cast("list[Score | None]", found.tolist())


def _outcome(scorer: Outcome, actual: str, evidence: str, passing: dict[str, Score]) -> Score | None:
    """The passing `Score` of an outcome found (shared by rows of the same evidence), `None` unless the expected one."""
    if actual != scorer.expected:
        return None
    if (score := passing.get(evidence)) is None:
        why = f"Outcome {actual} (as expected): {evidence}."
        score = passing[evidence] = scorer.result(True, 1.0, why, outcome=actual)
    return score


def _returned(batch: BatchCalls) -> Bools:
    """Per row: whether `_row_outcome` finds a success: no error, an output, the last model call and a call fine."""
    status, error = batch.column("status"), batch.column("error")
    output = cast("list[str | None]", batch.column("output"))
    fine = [
        s not in ("timeout", "error") and not e and o is not None and bool(o.strip())
        for s, e, o in zip(status, error, output, strict=True)
    ]
    errors, stops = batch.iteration_field("error"), batch.iteration_field("stop_reason")
    last = [not e and s not in CUT_SHORT for e, s in zip(errors, stops, strict=True)] + [True]  # [-1]: no model call
    bounds = np.asarray(batch.iteration_offsets)
    ends = np.where(bounds[1:] > bounds[:-1], bounds[1:] - 1, len(last) - 1)
    counts = batch.call_counts
    some_fine = (counts == 0) | (batch.failed_calls < counts)
    found: Bools = np.asarray(fine, bool) & np.asarray(last, bool)[ends] & some_fine
    return found


output_form = columnar_forms(Output, output_forms)
outcome_form = columnar_forms(Outcome, outcome_forms)


def _row_outcome(row: RowCalls) -> tuple[str, str]:
    """`trace_outcome` from the columns: the outcome and its evidence."""
    status, error = cast("str", row.value("status")), cast("str | None", row.value("error"))
    if status == "timeout":
        return "timeout", f"the run timed out{f': {error}' if error else ''}"
    if status == "error" or error:
        return "error", f"the run raised: {error or 'status error'}"
    answer = row.final_answer()
    problem = _failure_evidence(row, answer)
    if problem:
        return "failure", f"the run returned but {problem}"
    if answer is None:
        return "unknown", "no answer was recorded"  # never expected: the reference gives the reason
    return "success", "the run returned normally"


def _failure_evidence(row: RowCalls, answer: str | None) -> str | None:
    """Why a run that returned normally still failed (`outcome.py`'s `_failure_evidence`), or `None`."""
    if answer is not None and not answer.strip():
        return "its final answer is empty"
    errors = cast("list[str | None]", row.iteration_values("error"))
    if errors:
        if errors[-1]:
            return f"its last model call failed: {clip(errors[-1], 80)}"
        stop = cast("list[str | None]", row.iteration_values("stop_reason"))[-1]
        if stop in CUT_SHORT:  # the recorded words (for the reason) read only then
            cut = cut_short(stop, cast("list[list[str]]", row.iteration_values("finish_reasons"))[-1])
            return f"its last model call was cut short ({cut})"
    failed = [error or None for error in cast("list[str | None]", row.call_values("error"))]
    if failed and all(failed):
        first = f"{row.names[0]}: {clip(failed[0] or '', 80)}"
        if len(failed) == 1:
            return f"its only tool call failed ({first})"
        return f"all {len(failed)} tool calls failed ({first}, ...)"
    return None
