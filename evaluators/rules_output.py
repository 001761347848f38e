"""Rule scorers over what the run produced: the final output, its steps, its outcome.

`output` checks the final answer (`Trace.final_answer()`): `contains`, `not_contains`, `regex`
(searched, not anchored), `equals` (after whitespace normalisation) and `json_schema` (the
answer parsed as JSON and validated). Bad regexes and bad schemas are configuration errors
raised when the scorer is built, so the spec loader can name the file, case and key. When no
answer was recorded the scorer does not apply (content capture may be off), unless the run
failed, in which case the expectations fail.

`steps` checks the tool calls: each `contains` item needs its own call with that name and
(subset-matching) arguments, paired optimally; no call may match a `not_contains` item.

`outcome` compares the run's outcome with the expected one. Outcomes describe how the run
ended, not the quality of its steps (as in task-outcome evaluation, behaviour and outcome are
kept apart: `tool_errors` and `tool_efficiency` judge the steps):

- `timeout`: the run was cut off (trace status timeout).
- `error`: the run raised (status error, or a run-level error recorded).
- `failure`: the run returned normally but did not get anywhere: its final answer is empty,
  its last model call failed or was cut short (finish reason length, max_tokens or
  content_filter), or every tool call it made failed.
- `success`: the run returned normally otherwise. A tool error the agent recovered from (a
  retry, another tool) is still a success here.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from evaltrace.collector.records import Trace
from evaltrace.evaluators.base import Score, Scorer
from evaltrace.evaluators.matching import (
    ArgumentMatch,
    ExpectedCall,
    call_matches,
    clip,
    format_call,
    max_bipartite_matching,
    short,
)
from evaltrace.evaluators.registry import register
from evaltrace.evaluators.rules_calls import call_failure
from evaltrace.evaluators.rules_tools import check_json_schema, schema_errors
from evaltrace.evaluators.spec import valid_regexes


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


@register
class Output(Scorer):
    """The final answer contains, avoids, matches or equals what is expected."""

    name: ClassVar[str] = "output"
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

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Run every configured check on the final answer."""
        checks = self._check_count()
        if not checks:
            return self.result(None, reason="No output check is configured.")
        text = trace.final_answer()
        if text is None:
            if trace.status in ("error", "timeout") or trace.error:
                return self.result(False, 0.0, f"The run ended with {trace.status} and no final answer: {trace.error}.")
            return self.result(None, reason="No final answer was recorded (is content capture turned off?).")
        failures = self._failures(text)
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
            data = json.loads(_strip_code_fence(text))
        except json.JSONDecodeError as exc:
            return [f"answer is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"]
        return [f"JSON schema: {e}" for e in schema_errors(self.json_schema, data)]


def _strip_code_fence(text: str) -> str:
    # Models often wrap JSON answers in a Markdown fence; the content is what the user asked for.
    match = re.fullmatch(r"\s*```(?:json)?\s*\n(.*)\n\s*```\s*", text, re.DOTALL)
    return match.group(1) if match else text


class StepPattern(ExpectedCall):
    """A tool call to look for: a name and, optionally, arguments it must include."""


def _to_pattern(value: Any) -> Any:
    if isinstance(value, str):
        return {"name": value}
    if isinstance(value, dict) and "input" in value and "arguments" not in value:
        # Timbal's steps validators call the arguments `input`; accept that spelling too.
        return {("arguments" if k == "input" else k): v for k, v in value.items()}
    return value


@register
class Steps(Scorer):
    """The tool calls include the required steps and none of the forbidden ones."""

    name: ClassVar[str] = "steps"
    reads_histories: ClassVar[bool] = False

    contains: list[StepPattern] = Field(default_factory=list)
    """Calls that must each be made: a name, or {name, arguments} (or `input`) with arguments matched as a subset."""
    not_contains: list[StepPattern] = Field(default_factory=list)
    """Calls that must not be made (a name, or {name, arguments} to forbid only matching calls)."""
    arguments: ArgumentMatch = Field(default_factory=ArgumentMatch)
    """How arguments are compared."""
    nested: bool = False
    """Also look at the calls made by nested agents."""

    @field_validator("contains", "not_contains", mode="before")
    @classmethod
    def _names_as_patterns(cls, value: Any) -> Any:
        return [_to_pattern(v) for v in value] if isinstance(value, list) else value

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Pair the required steps with distinct calls and look for forbidden ones."""
        if not self.contains and not self.not_contains:
            return self.result(None, reason="No step check is configured.")
        calls = trace.all_tool_calls(nested=self.nested)
        want = self.contains

        def fits(i: int, j: int) -> bool:
            return call_matches(want[i], calls[j], self.arguments)

        pairs = max_bipartite_matching(len(want), len(calls), fits)
        failures = [f"no call {format_call(w.name, w.arguments)}" for i, w in enumerate(want) if i not in pairs]
        for pattern in self.not_contains:
            hits = [j for j, c in enumerate(calls) if call_matches(pattern, c, self.arguments)]
            if hits:
                where = ", ".join(f"#{j + 1}" for j in hits)
                failures.append(f"forbidden call {format_call(pattern.name, pattern.arguments)} made ({where})")
        total = len(self.contains) + len(self.not_contains)
        value = (total - len(failures)) / total
        reason = "; ".join(failures) + "." if failures else f"All {total} step checks passed."
        return self.result(not failures, value, reason, failures=failures)


OutcomeKind = Literal["success", "failure", "error", "timeout"]


def trace_outcome(trace: Trace) -> tuple[OutcomeKind, str]:
    """The run's outcome and the evidence for it (see the module docstring for the rules)."""
    if trace.status == "timeout":
        return "timeout", f"the run timed out{f': {trace.error}' if trace.error else ''}"
    if trace.status == "error" or trace.error:
        return "error", f"the run raised: {trace.error or 'status error'}"
    problem = _failure_evidence(trace)
    if problem:
        return "failure", f"the run returned but {problem}"
    return "success", "the run returned normally"


_CUT_SHORT = frozenset({"length", "max_tokens", "content_filter"})


def _failure_evidence(trace: Trace) -> str | None:
    """Why a run that returned normally still failed, or `None`."""
    answer = trace.final_answer()
    if answer is not None and not answer.strip():
        return "its final answer is empty"
    if trace.iterations:
        last = trace.iterations[-1]
        if last.error:
            return f"its last model call failed: {clip(last.error, 80)}"
        cut = sorted(_CUT_SHORT.intersection(r.lower() for r in last.finish_reasons))
        if cut:
            return f"its last model call was cut short ({', '.join(cut)})"
    errors = [call_failure(c, False) for c in trace.tool_calls]
    if errors and all(errors):
        first = f"{trace.tool_calls[0].name}: {clip(errors[0] or '', 80)}"
        return (
            f"its only tool call failed ({first})"
            if len(errors) == 1
            else f"all {len(errors)} tool calls failed ({first}, ...)"
        )
    return None


@register
class Outcome(Scorer):
    """The run ended the expected way: success, failure, error or timeout."""

    name: ClassVar[str] = "outcome"
    reads_histories: ClassVar[bool] = False

    expected: OutcomeKind = "success"
    """The expected outcome."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Classify the run and compare."""
        actual, evidence = trace_outcome(trace)
        passed = actual == self.expected
        verdict = "as expected" if passed else f"expected {self.expected}"
        return self.result(passed, 1.0 if passed else 0.0, f"Outcome {actual} ({verdict}): {evidence}.", outcome=actual)
