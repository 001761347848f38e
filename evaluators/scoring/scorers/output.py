"""Rule scorers over what the run produced: the final output, its steps, its outcome.

`output` checks the final answer (`Trace.final_answer()`): `contains`, `not_contains`, `regex`
(searched, not anchored), `equals` (after whitespace normalisation) and `json_schema` (the
answer parsed as JSON and validated). Bad regexes and bad schemas are configuration errors
raised when the scorer is built, so the spec loader can name the file, case and key. When no
answer was recorded every check fails, `not_contains` included (an answer nobody saw cannot be
shown to avoid a word), and the reason says what is missing and how to record it.

`steps` checks the tool calls (the steps): each `contains` item needs its own call with that
name and (subset-matching) arguments, paired optimally; no call may match a `not_contains`
item; each `regex` item needs a call whose name, arguments and result (each given one) match
its regular expressions (searched, not anchored; arguments and structured results as JSON
text). A check that needs arguments or results that were not recorded fails and says so: a
forbidden call whose arguments are unknown cannot be ruled out.

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
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCall,
    call_matches,
    format_call,
    max_bipartite_matching,
    short,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import (
    RECORD_HINT,
    arguments_not_recorded,
    no_answer,
    unrecorded_labels,
)
from evaltrace.evaluators.scoring.scorers.outcome import OutcomeKind as OutcomeKind
from evaltrace.evaluators.scoring.scorers.outcome import RunOutcome as RunOutcome
from evaltrace.evaluators.scoring.scorers.outcome import trace_outcome as trace_outcome
from evaltrace.evaluators.scoring.scorers.registry import register
from evaltrace.evaluators.scoring.scorers.tools import check_json_schema, schema_errors
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
    """The inside of a Markdown code fence wrapping the whole answer, else the answer.

    Models often wrap JSON answers in a fence; the content is what the user asked for. Plain
    string operations, each one pass over the text: the answer is untrusted, and the regular
    expression this replaces backtracked cubically on many newlines (see
    `test_fence_stripper_is_linear_on_hostile_answers` in tests/evaluators/test_rules_output.py).
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


strip_code_fence = _strip_code_fence
"""The same function under a public name: the columnar `output` form reads fenced answers as `output` does."""


class StepPattern(ExpectedCall):
    """A tool call to look for: a name and, optionally, arguments it must include."""


class StepRegex(BaseModel):
    """A step to look for by regular expressions: each given one must match the same call."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    name: str | None = None
    """Searched in the tool's name."""
    arguments: str | None = None
    """Searched in the arguments (a JSON object as JSON text, keys in recorded order)."""
    result: str | None = None
    """Searched in the result (text as it is, structured results as JSON text)."""

    @field_validator("name", "arguments", "result")
    @classmethod
    def _valid_regex(cls, value: str | None) -> str | None:
        return valid_regexes(value)  # type: ignore[return-value]  # one string in, the same string out

    @model_validator(mode="after")
    def _something_to_match(self) -> StepRegex:
        if self.name is None and self.arguments is None and self.result is None:
            raise ValueError("a steps regex needs name, arguments or result")
        return self

    def describe(self) -> str:
        """`{name~'get_.*', result~'[0-9]+'}` for messages (patterns as written)."""
        parts = [f"{field}~'{pattern}'" for field, pattern in self._patterns()]
        return "{" + ", ".join(parts) + "}"

    def _patterns(self) -> list[tuple[str, str]]:
        fields = (("name", self.name), ("arguments", self.arguments), ("result", self.result))
        return [(field, pattern) for field, pattern in fields if pattern is not None]

    def unrecorded(self, call: ToolCall) -> list[str]:
        """The fields this regex reads that `call` did not record, when the recorded ones match.

        A call whose recorded fields already fail to match could not be the step either way.
        """
        missing: list[str] = []
        for field, pattern in self._patterns():
            text = _step_text(call, field)
            if text is None:
                missing.append(field)
            elif re.search(pattern, text) is None:
                return []
        return missing

    def matches(self, call: ToolCall) -> bool:
        """Whether every given pattern is found in its field of `call` (unrecorded fields never match)."""
        for field, pattern in self._patterns():
            text = _step_text(call, field)
            if text is None or re.search(pattern, text) is None:
                return False
        return True


def _step_text(call: ToolCall, field: str) -> str | None:
    value = call.name if field == "name" else call.arguments if field == "arguments" else call.result
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _to_pattern(value: Any) -> Any:
    if isinstance(value, str):
        return {"name": value}
    if isinstance(value, dict) and "input" in value and "arguments" not in value:
        # Timbal's steps validators call the arguments `input`; accept that spelling too.
        return {("arguments" if k == "input" else k): v for k, v in value.items()}
    return value


@register
class Steps(Scorer):
    """The tool calls include the required steps, none of the forbidden ones, and steps matching each regex."""

    name: ClassVar[str] = "steps"
    version: ClassVar[int] = 2
    """2: checks needing unrecorded arguments fail instead of passing; `regex` added."""
    reads_histories: ClassVar[bool] = False

    contains: list[StepPattern] = Field(default_factory=list)
    """Calls that must each be made: a name, or {name, arguments} (or `input`) with arguments matched as a subset."""
    not_contains: list[StepPattern] = Field(default_factory=list)
    """Calls that must not be made (a name, or {name, arguments} to forbid only matching calls)."""
    regex: list[StepRegex] = Field(default_factory=list)
    """Steps that must each be made, by regular expressions: a pattern for the name, or {name, arguments, result}."""
    arguments: ArgumentMatch = Field(default_factory=ArgumentMatch)
    """How arguments are compared."""
    nested: bool = False
    """Also look at the calls made by nested agents."""

    @field_validator("contains", "not_contains", mode="before")
    @classmethod
    def _names_as_patterns(cls, value: Any) -> Any:
        return [_to_pattern(v) for v in value] if isinstance(value, list) else value

    @field_validator("regex", mode="before")
    @classmethod
    def _regexes(cls, value: Any) -> Any:
        # One pattern, or a list; a bare pattern is searched in the name (as `contains: [name]` is a name).
        items = [value] if isinstance(value, str | dict) else value
        return [{"name": v} if isinstance(v, str) else v for v in items] if isinstance(items, list) else value

    def configuration_problem(self) -> str | None:
        """No check configured."""
        if self.contains or self.not_contains or self.regex:
            return None
        return "no step check is configured: give contains, not_contains or regex"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Pair the required steps with distinct calls, look for forbidden ones, then match the regexes."""
        if not self.contains and not self.not_contains and not self.regex:
            return self.result(None, reason="No step check is configured.")
        calls = trace.all_tool_calls(nested=self.nested)
        findings = self._required(calls) + self._forbidden(calls) + self._regex_failures(calls)
        failures = [text for text, _ in findings]
        total = len(self.contains) + len(self.not_contains) + len(self.regex)
        value = max(0, total - len(failures)) / total
        if not failures:
            return self.result(True, value, f"All {total} step checks passed.", failures=[])
        reason = "; ".join(failures) + "."
        unrecorded = any(blind for _, blind in findings)
        if unrecorded:
            reason += f" To check them, {RECORD_HINT}."
        extra = {"unrecorded": True} if unrecorded else {}
        return self.result(False, value, reason, failures=failures, **extra)

    def _same_name_unrecorded(self, pattern: StepPattern, calls: list[ToolCall]) -> list[str]:
        """Labels of the calls of `pattern`'s tool whose arguments (which it compares) were not recorded."""
        if pattern.arguments is None:
            return []
        return [
            label for label, c in zip(unrecorded_labels(calls), calls, strict=True) if label and c.name == pattern.name
        ]

    def _required(self, calls: list[ToolCall]) -> list[tuple[str, bool]]:
        want = self.contains

        def fits(i: int, j: int) -> bool:
            return call_matches(want[i], calls[j], self.arguments)

        pairs = max_bipartite_matching(len(want), len(calls), fits)
        found = []
        for i, pattern in enumerate(want):
            if i not in pairs:
                blind = self._same_name_unrecorded(pattern, calls)
                why = f" ({arguments_not_recorded(blind, hint=False)})" if blind else ""
                found.append((f"no call {format_call(pattern.name, pattern.arguments)}{why}", bool(blind)))
        return found

    def _forbidden(self, calls: list[ToolCall]) -> list[tuple[str, bool]]:
        found = []
        for pattern in self.not_contains:
            shown = format_call(pattern.name, pattern.arguments)
            hits = [j for j, c in enumerate(calls) if call_matches(pattern, c, self.arguments)]
            blind = self._same_name_unrecorded(pattern, calls)
            if hits:
                found.append((f"forbidden call {shown} made ({', '.join(f'#{j + 1}' for j in hits)})", False))
            elif blind:
                # A same-name call whose arguments are unknown may be the forbidden one: not verified.
                found.append(
                    (f"cannot rule out forbidden call {shown}: {arguments_not_recorded(blind, hint=False)}", True)
                )
        return found

    def _regex_failures(self, calls: list[ToolCall]) -> list[tuple[str, bool]]:
        found = []
        for item in self.regex:
            if any(item.matches(c) for c in calls):
                continue
            blind = sorted({f for c in calls for f in item.unrecorded(c)})
            why = f" (the {' and '.join(blind)} of some calls were not recorded)" if blind else ""
            found.append((f"no step matches regex {item.describe()}{why}", bool(blind)))
        return found


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
