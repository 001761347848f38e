"""The answer axes: groundedness, correctness, completeness, and their weighted answer_quality.

All four share one configuration (`expected`, `facts`, `fields`, `aliases`, ...), so a spec's
`answer:` block can configure them together; each reads the parts it needs.

- **groundedness** (binary): the answer is backed by what the agent saw. It fails when the
  agent answered without calling any tool (`require_tool_call`), or when a claim in the answer
  does not appear in the sources: the user's input, the tool results and nested agents'
  outputs (not the tool arguments, which the agent wrote itself). Claims are the numbers in
  the answer (at least `ignore_numbers_below` in size, compared by value) and the configured
  `facts` the answer states. Limits: it checks
  numbers and listed facts only, not free-text statements; a number the agent derived (a sum,
  a unit conversion, "twelve" for 12) counts as unsupported; small numbers are skipped because
  counts and list markers are usually derived. Use a judge for open-ended claims.
- **correctness** (partial): the fraction of expected facts the answer states; extra content is
  not penalised. Facts are `facts`, or else the key terms (numbers and content words) of
  `expected` (falling back to the case's `expected_output`). A fact matches as a whole word
  through its aliases, or by value when it is a number.
- **completeness** (partial): the fraction of the asked-for `fields` (default: `facts`) the
  answer mentions, each through its aliases with word-boundary matching, so `price` does not
  match `priceless` and `margin` does not match `marginal`.
- **answer_quality**: the weighted mean of the axes that apply (default 40/40/20), with the
  weights of inapplicable axes spread over the others.

Evidence that was not recorded never passes: with no recorded answer, correctness and
completeness fail; groundedness (reference-free) fails as a spec check, and otherwise does not
apply, as when the answer makes claims but no input or tool result was recorded. In
answer_quality written in a spec, an axis that could not be checked for that reason counts as 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.columns import RowCalls, columnar_form
from evaltrace.evaluators.scoring.scorers._text import contains_number, key_terms, mentions, numbers, parse_number
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import RECORD_HINT, no_answer
from evaltrace.evaluators.scoring.scorers.registry import register


class AxisWeights(BaseModel):
    """Weights of the answer axes in answer_quality."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    groundedness: float = Field(default=0.4, ge=0.0)
    """Weight of groundedness."""
    correctness: float = Field(default=0.4, ge=0.0)
    """Weight of correctness."""
    completeness: float = Field(default=0.2, ge=0.0)
    """Weight of completeness."""

    @model_validator(mode="after")
    def _positive_total(self) -> AxisWeights:
        if self.groundedness + self.correctness + self.completeness <= 0:
            raise ValueError("at least one weight must be positive")
        return self


@dataclass(frozen=True)
class Axis:
    """One axis' result: `value=None` when it does not apply."""

    value: float | None
    reason: str
    details: dict[str, Any] = field(default_factory=dict)
    unrecorded: bool = False
    """The axis could not be checked because what it reads was not recorded (not: was not configured)."""


class _AnswerScorer(Scorer):
    """Configuration shared by the answer axes (see the module docstring)."""

    expected: str | None = None
    """The expected answer; defaults to the case's expected_output."""
    facts: list[str] = Field(default_factory=list)
    """Facts the answer must state (correctness), e.g. '18', 'Paris'."""
    fields: list[str] = Field(default_factory=list)
    """What the user asked for, which the answer must mention (completeness); defaults to `facts`."""
    aliases: dict[str, list[str]] = Field(default_factory=dict)
    """Other words that count as mentioning a fact or field, e.g. {price: ['$', 'cost', 'USD']}."""
    weights: AxisWeights = Field(default_factory=AxisWeights)
    """Weights of groundedness, correctness and completeness in answer_quality."""
    threshold: float = Field(default=0.7, ge=0.0, le=1.0)
    """Minimum value to pass (correctness, completeness and answer_quality)."""
    require_tool_call: bool = True
    """Groundedness fails when the agent answered without calling any tool."""
    ignore_numbers_below: float = Field(default=10.0, ge=0.0)
    """Groundedness skips numbers smaller than this in absolute value (counts, list markers)."""

    def _aliases(self, term: str) -> list[str]:
        return [term, *self.aliases.get(term, [])]

    def _found(self, term: str, text: str, text_numbers: list[float]) -> bool:
        value = parse_number(term)
        if value is not None and contains_number(text_numbers, value):
            return True
        return mentions(text, self._aliases(term))

    def groundedness(self, trace: Trace) -> Axis:
        """The groundedness axis (binary)."""
        answer = trace.final_answer()
        if answer is None:
            return Axis(None, _sentence(no_answer(trace)), unrecorded=True)
        return self.grounded(answer, numbers(answer), bool(trace.tool_calls), _sources(trace))

    def grounded(self, answer: str, answer_numbers: list[float], called: bool, sources: str) -> Axis:
        """The groundedness axis of a recorded answer (and its numbers), whether a tool was called, the sources."""
        if self.require_tool_call and not called:
            return Axis(0.0, "The agent answered without calling any tool.")
        source_numbers = numbers(sources)
        claimed_numbers = [n for n in dict.fromkeys(answer_numbers) if abs(n) >= self.ignore_numbers_below]
        claimed_facts = [f for f in self.facts if parse_number(f) is None and self._found(f, answer, answer_numbers)]
        claims = [_number_label(n) for n in claimed_numbers] + claimed_facts
        if claims and not sources.strip():
            why = f"The answer makes claims but no input or tool result was recorded to check them; {RECORD_HINT}."
            return Axis(None, why, unrecorded=True)
        unsupported = [_number_label(n) for n in claimed_numbers if not contains_number(source_numbers, n)]
        unsupported += [f for f in claimed_facts if not self._found(f, sources, source_numbers)]
        if unsupported:
            listed = ", ".join(unsupported[:5])
            return Axis(0.0, f"Not found in the input or tool results: {listed}.", {"unsupported": unsupported})
        return Axis(1.0, f"All {len(claims)} checked claims appear in the input or tool results.", {"claims": claims})

    def correctness(self, trace: Trace, case: Any | None) -> Axis:
        """The correctness axis (fraction of expected facts stated)."""
        expected = self.expected or getattr(case, "expected_output", None)
        return self._coverage(trace, self.facts or key_terms(expected or ""), "expected facts")

    def completeness(self, trace: Trace) -> Axis:
        """The completeness axis (fraction of asked-for fields mentioned)."""
        return self._coverage(trace, self.fields or self.facts, "fields")

    def _coverage(self, trace: Trace, terms: list[str], what: str) -> Axis:
        answer = trace.final_answer() if terms else ""  # nothing configured: no answer needed
        if answer is None:
            # Configured facts or fields with no answer to look in: a failure, not "does not apply".
            return Axis(0.0, _sentence(no_answer(trace)), {"missing": list(terms)}, unrecorded=True)
        return self.covered(answer, numbers(answer), terms, what)

    def covered(self, answer: str, answer_numbers: list[float], terms: list[str], what: str) -> Axis:
        """The fraction of `terms` a recorded answer (its numbers given) states, as an axis."""
        if not terms:
            return Axis(None, _NOT_CONFIGURED[what])
        missing = [t for t in terms if not self._found(t, answer, answer_numbers)]
        value = (len(terms) - len(missing)) / len(terms)
        reason = f"{len(terms) - len(missing)} of {len(terms)} {what} found"
        reason += f"; missing: {', '.join(missing)}." if missing else "."
        return Axis(value, reason, {"missing": missing})

    def score_axis(self, axis: Axis, passed: bool | None = None) -> Score:
        """The `Score` of one axis: it passes at the threshold, or by `passed` when given."""
        if axis.value is None:
            return self.missing(axis.reason) if axis.unrecorded else self.result(None, reason=axis.reason)
        verdict = axis.value >= self.threshold if passed is None else passed
        extra = {"unrecorded": True} if axis.unrecorded else {}
        return self.result(verdict, axis.value, axis.reason, **axis.details, **extra)


_NOT_CONFIGURED = {
    "expected facts": "No expected facts or expected answer are configured.",
    "fields": "No fields or facts are configured.",
}


def _sentence(text: str) -> str:
    return f"{text[:1].upper()}{text[1:]}."


def _number_label(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _sources(trace: Trace) -> str:
    """The evidence the agent was given: the input, tool results, nested agents' answers.

    Tool arguments are left out on purpose: the agent wrote them, so a number it invented and
    passed to a tool would otherwise ground itself.
    """
    parts = [trace.input or ""]
    for call in trace.all_tool_calls(nested=True):
        if call.result is not None:
            result = call.result
            parts.append(result if isinstance(result, str) else json.dumps(result, default=str, ensure_ascii=False))
        if call.child is not None and not call.handoff and call.child.output:
            parts.append(call.child.output)
    return "\n".join(parts)


@register
class Groundedness(_AnswerScorer):
    """The answer's numbers and stated facts appear in the input or tool results (binary)."""

    name: ClassVar[str] = "groundedness"
    version: ClassVar[int] = 2
    """2: what was not recorded fails (see the module docstring) instead of passing or not applying."""
    reads_histories: ClassVar[bool] = False

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Check the answer's claims against the sources."""
        axis = self.groundedness(trace)
        return self.score_axis(axis, None if axis.value is None else axis.value == 1.0)


@register
class Correctness(_AnswerScorer):
    """The answer states the expected facts (partial credit; extras not penalised)."""

    name: ClassVar[str] = "correctness"
    version: ClassVar[int] = 2
    """2: what was not recorded fails (see the module docstring) instead of passing or not applying."""
    reads_histories: ClassVar[bool] = False

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Count the expected facts found in the answer."""
        return self.score_axis(self.correctness(trace, case))


@register
class Completeness(_AnswerScorer):
    """The answer mentions every field asked for, matched as whole words through aliases."""

    name: ClassVar[str] = "completeness"
    version: ClassVar[int] = 2
    """2: what was not recorded fails (see the module docstring) instead of passing or not applying."""
    reads_histories: ClassVar[bool] = False

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Count the fields mentioned in the answer."""
        return self.score_axis(self.completeness(trace))


@register
class AnswerQuality(_AnswerScorer):
    """Weighted groundedness, correctness and completeness (40/40/20 by default)."""

    name: ClassVar[str] = "answer_quality"
    version: ClassVar[int] = 2
    """2: what was not recorded fails (see the module docstring) instead of passing or not applying."""
    reads_histories: ClassVar[bool] = False

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Combine the axes that apply with their weights."""
        axes = {
            "groundedness": self.groundedness(trace),
            "correctness": self.correctness(trace, case),
            "completeness": self.completeness(trace),
        }
        return self.weighted(axes)

    def weighted(self, axes: dict[str, Axis]) -> Score:
        """The weighted score of the axes that apply."""
        if self.spec_check:  # a check cannot leave out what it could not see: such an axis counts 0
            axes = {
                k: Axis(0.0, a.reason, a.details, True) if a.unrecorded and a.value is None else a
                for k, a in axes.items()
            }
        weights = self.weights.model_dump()
        applicable = {k: a for k, a in axes.items() if a.value is not None and weights[k] > 0}
        if not applicable:
            why = " ".join(a.reason for a in axes.values())
            return self.result(None, reason=f"None of the answer axes applies: {why}")
        total = sum(weights[k] for k in applicable)
        value = sum(weights[k] * (a.value or 0.0) for k, a in applicable.items()) / total
        passed = value >= self.threshold
        summary = ", ".join(f"{k} {a.value:.2f}" for k, a in applicable.items())
        weakest = min(applicable.items(), key=lambda kv: kv[1].value or 0.0)
        reason = f"Score {value:.2f} (threshold {self.threshold:.2f}; {summary})"
        if not passed:
            reason += f"; weakest: {weakest[0]}: {weakest[1].reason}"
        axes_detail = {k: {"value": a.value, "reason": a.reason} for k, a in axes.items()}
        extra = {"unrecorded": True} if any(a.unrecorded for a in applicable.values()) else {}
        return self.result(passed, value, reason if reason.endswith(".") else reason + ".", axes=axes_detail, **extra)


# The columnar forms (see `columns.py`): a sure pass with the reference's exact `Score`, else `None`,
# each axis computed by the reference's own methods from the row's columns. The answer is the
# `output` column, else the last model reply's text (`output.final_answer`); a row with no answer
# is left to the reference. Groundedness's sources are the `input` column and the calls' results,
# each decoded from its JSON text and written back as the reference writes it (`json.dumps`: the
# table's compact text differs, and `[1,234]` would read as the number 1234); a call that started a
# nested agent (not a handoff) adds the nested run's results and answer, in other rows: left to the
# reference. Correctness's facts from the case's expected output (a form is not given the case) too.

AnswerScorer = Groundedness | Correctness | Completeness | AnswerQuality

# `json.loads` and the reference's `json.dumps(result, default=str, ensure_ascii=False)`, built once:
# `json.dumps` with options builds a new encoder per call, a third of the sources' cost.
_loads = json.JSONDecoder().decode
_dumps = json.JSONEncoder(ensure_ascii=False, default=str).encode


class _Answer(NamedTuple):
    """The row's answer and the numbers in it (read once: every axis looks for them)."""

    text: str
    numbers: list[float]


def _answer(row: RowCalls) -> _Answer | None:
    text = row.final_answer()
    return None if text is None else _Answer(text, numbers(text))


def _row_sources(row: RowCalls) -> str | None:
    """The reference's sources (input, then each call's result), or `None` when a nested agent adds to them."""
    if row.nested_runs:
        return None
    parts = [cast("str | None", row.value("input")) or ""]
    for text in cast("list[str | None]", row.call_values("result_json")):
        result = None if text is None else _loads(text)
        if result is not None:
            parts.append(result if isinstance(result, str) else _dumps(result))
    return "\n".join(parts)


def _groundedness(scorer: AnswerScorer, row: RowCalls, answer: _Answer) -> Axis | None:
    """The groundedness axis of a row with an answer, or `None` when its sources are in other rows."""
    sources = _row_sources(row)
    return None if sources is None else scorer.grounded(answer.text, answer.numbers, bool(row.names), sources)


def _correctness(scorer: AnswerScorer, answer: _Answer) -> Axis | None:
    """The correctness axis, or `None` when the facts would come from the case (not given to a form)."""
    if not scorer.facts and not scorer.expected:
        return None
    return scorer.covered(
        answer.text, answer.numbers, scorer.facts or key_terms(scorer.expected or ""), "expected facts"
    )


def _completeness(scorer: AnswerScorer, answer: _Answer) -> Axis:
    return scorer.covered(answer.text, answer.numbers, scorer.fields or scorer.facts, "fields")


def _passing(found: Score) -> Score | None:
    return found if found.passed is True else None


@columnar_form(Groundedness)
def groundedness_form(scorer: Groundedness, row: RowCalls) -> Score | None:
    """The passing `Score` of `groundedness` when every claim of the answer is in the sources, else `None`."""
    answer = _answer(row)
    axis = None if answer is None else _groundedness(scorer, row, answer)
    return _passing(scorer.score_axis(axis, True)) if axis is not None and axis.value == 1.0 else None


@columnar_form(Correctness)
def correctness_form(scorer: Correctness, row: RowCalls) -> Score | None:
    """The passing `Score` of `correctness` when enough expected facts are in the answer, else `None`."""
    answer = _answer(row)
    axis = None if answer is None else _correctness(scorer, answer)
    return None if axis is None else _passing(scorer.score_axis(axis))


@columnar_form(Completeness)
def completeness_form(scorer: Completeness, row: RowCalls) -> Score | None:
    """The passing `Score` of `completeness` when enough asked-for fields are in the answer, else `None`."""
    answer = _answer(row)
    return None if answer is None else _passing(scorer.score_axis(_completeness(scorer, answer)))


@columnar_form(AnswerQuality)
def answer_quality_form(scorer: AnswerQuality, row: RowCalls) -> Score | None:
    """The passing `Score` of `answer_quality` when the weighted axes reach the threshold, else `None`."""
    answer = _answer(row)
    correct = None if answer is None else _correctness(scorer, answer)  # first: it may need the case
    grounded = None if answer is None or correct is None else _groundedness(scorer, row, answer)
    if answer is None or correct is None or grounded is None:
        return None
    axes = {"groundedness": grounded, "correctness": correct, "completeness": _completeness(scorer, answer)}
    return _passing(scorer.weighted(axes))
