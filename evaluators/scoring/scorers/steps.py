"""The `steps` rule scorer: the tool calls (the steps) against required, forbidden and regex steps.

Each `contains` item needs its own call with that name and (subset-matching) arguments, paired
optimally; no call may match a `not_contains` item; each `regex` item needs a call whose name,
arguments and result (each given one) match its regular expressions (searched, not anchored;
arguments and structured results as JSON text). A check that needs arguments or results that
were not recorded fails and says so: a forbidden call whose arguments are unknown cannot be ruled out.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring.columns import RowCalls, columnar_form
from evaltrace.evaluators.scoring.scorers.arguments import (
    ArgumentMatch,
    ExpectedCall,
    call_matches,
    expected_matches,
    format_call,
    max_bipartite_matching,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import RECORD_HINT, arguments_not_recorded, unrecorded_labels
from evaltrace.evaluators.scoring.scorers.registry import register
from evaltrace.evaluators.scoring.spec.model import valid_regexes


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
        return self.found(functools.partial(_step_text, call))

    def found(self, text_of: Callable[[str], str | None]) -> bool:
        """Whether every given pattern is found in `text_of(field)` (`None`, not recorded, never matches)."""
        for field, pattern in self._patterns():
            text = text_of(field)
            if text is None or re.search(pattern, text) is None:
                return False
        return True


def _step_text(call: ToolCall, field: str) -> str | None:
    return searched_text(call.name if field == "name" else call.arguments if field == "arguments" else call.result)


def searched_text(value: Any) -> str | None:
    """A call's field as `steps` searches it: text as it is, structured values as JSON text."""
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


# The columnar form (see `columns.py`): a sure pass with the reference's exact `Score`, else `None`:
# every required step has its own matching call, no call matches or may match (same name, arguments
# not recorded) a forbidden step, every regex finds a call. Tool arguments and results are the
# calls' JSON text, decoded as the table decoder decodes them. Nested agents' calls (with `nested`)
# are in other rows: left to the reference.


class _Calls:
    """A row's calls as `steps` reads them: names, arguments and results decoded on first use."""

    def __init__(self, row: RowCalls) -> None:
        self.row = row
        self.names = row.names
        self._arguments: list[Any] | None = None
        self._results: list[Any] | None = None

    @property
    def arguments(self) -> list[Any]:
        """Each call's arguments as `ToolCall.arguments` (the table's JSON text decoded)."""
        if self._arguments is None:
            self._arguments = self.row.json_values()
        return self._arguments

    @property
    def results(self) -> list[Any]:
        """Each call's result as `ToolCall.result`."""
        if self._results is None:
            self._results = [_decode(cast("str | None", text)) for text in self.row.call_values("result_json")]
        return self._results

    def unrecorded(self, j: int) -> bool:
        """Whether call `j`'s arguments were not recorded (null text: no need to decode them)."""
        return self.row.arguments[j] is None and not self.truncated[j]

    @property
    def truncated(self) -> list[bool]:
        """Whether each call's arguments were cut when recorded."""
        return cast("list[bool]", self.row.call_values("arguments_truncated"))


def _decode(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@columnar_form(Steps)
def steps_form(scorer: Steps, row: RowCalls) -> Score | None:
    """The passing `Score` of `steps` when every step check holds on the row's calls, else `None`."""
    total = len(scorer.contains) + len(scorer.not_contains) + len(scorer.regex)
    if not total or (scorer.nested and row.nested_runs):
        return None
    calls = _Calls(row)
    if not _required_made(scorer, calls) or _forbidden_possible(scorer, calls):
        return None
    if not all(_regex_found(item, calls) for item in scorer.regex):
        return None
    return scorer.result(True, 1.0, f"All {total} step checks passed.", failures=[])


def _required_made(scorer: Steps, calls: _Calls) -> bool:
    """Whether every `contains` step can be paired with a call of its own."""
    want = scorer.contains
    if not want:
        return True
    pairs = max_bipartite_matching(len(want), len(calls.names), lambda i, j: _matches(want[i], calls, j, scorer))
    return len(pairs) == len(want)


def _forbidden_possible(scorer: Steps, calls: _Calls) -> bool:
    """Whether a call matches a `not_contains` step, or may (its tool's arguments were not recorded)."""
    for pattern in scorer.not_contains:
        for j, name in enumerate(calls.names):
            if _matches(pattern, calls, j, scorer):
                return True
            if pattern.arguments is not None and name == pattern.name and calls.unrecorded(j):
                return True
    return False


def _regex_found(item: StepRegex, calls: _Calls) -> bool:
    """Whether some call has every field `item` gives a pattern for, each matching (`StepRegex.matches`)."""
    return any(item.found(functools.partial(_row_step_text, calls, j)) for j in range(len(calls.names)))


def _matches(want: ExpectedCall, calls: _Calls, j: int, scorer: Steps) -> bool:
    """`call_matches(want, call j, scorer.arguments)` on the columns."""
    return expected_matches(want, calls.names[j], calls.arguments[j], calls.truncated[j], scorer.arguments)


def _row_step_text(calls: _Calls, j: int, field: str) -> str | None:
    """`_step_text` of call `j` of the row."""
    if field == "name":
        return calls.names[j]
    return searched_text(calls.arguments[j] if field == "arguments" else calls.results[j])
