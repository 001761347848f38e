"""Columnar forms of the answer axes: `groundedness`, `correctness`, `completeness`, `answer_quality`.

Answers, like every form, only for a sure pass with the reference's exact `Score` (see `forms.py`),
and computes each axis as the reference does (`scorers/answer.py`), from the row's columns:

- the answer is the `output` column, else the last model reply's text (`output.final_answer`); a
  row with no answer is left to the reference (the axes then fail or do not apply);
- groundedness's sources are the `input` column and the calls' results, each decoded from its JSON
  text and written back as the reference writes it (`json.dumps`: the table's compact text differs,
  and `[1,234]` would read as the number 1234). A call that started a nested agent (not a handoff)
  adds the nested run's results and answer, which live in other rows: left to the reference;
- correctness's facts are `facts`, else the key terms of `expected`; with neither, they come from
  the case's expected output, which a form is not given: left to the reference.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple, cast

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.columnar.calls import RowCalls
from evaltrace.evaluators.scoring.columnar.output import final_answer
from evaltrace.evaluators.scoring.scorers.answer import (
    AnswerQuality,
    Axis,
    Completeness,
    Correctness,
    Groundedness,
    contains_number,
    key_terms,
    mentions,
    numbers,
    parse_number,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.evidence import RECORD_HINT

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
    text = final_answer(row)
    return None if text is None else _Answer(text, numbers(text))


def _sources(row: RowCalls) -> str | None:
    """The reference's sources (input, then each call's result), or `None` when a nested agent adds to them."""
    nested = zip(row.call_values("child_row"), row.call_values("handoff"), strict=True)
    if any(child is not None and not handoff for child, handoff in nested):
        return None
    parts = [cast("str | None", row.value("input")) or ""]
    for text in cast("list[str | None]", row.call_values("result_json")):
        result = None if text is None else _loads(text)
        if result is not None:
            parts.append(result if isinstance(result, str) else _dumps(result))
    return "\n".join(parts)


def _found(scorer: AnswerScorer, term: str, text: str, text_numbers: list[float]) -> bool:
    """Whether `term` is in `text`: by value when it is a number, else through its aliases."""
    value = parse_number(term)
    if value is not None and contains_number(text_numbers, value):
        return True
    return mentions(text, [term, *scorer.aliases.get(term, [])])


def _number_label(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


def _groundedness(scorer: AnswerScorer, row: RowCalls, answer: _Answer) -> Axis | None:
    """The groundedness axis of a row with an answer, or `None` when its sources are in other rows."""
    if scorer.require_tool_call and not row.names:
        return Axis(0.0, "The agent answered without calling any tool.")
    sources = _sources(row)
    if sources is None:
        return None
    source_numbers = numbers(sources)
    claimed = [n for n in dict.fromkeys(answer.numbers) if abs(n) >= scorer.ignore_numbers_below]
    facts = [f for f in scorer.facts if parse_number(f) is None and _found(scorer, f, answer.text, answer.numbers)]
    claims = [_number_label(n) for n in claimed] + facts
    if claims and not sources.strip():
        why = f"The answer makes claims but no input or tool result was recorded to check them; {RECORD_HINT}."
        return Axis(None, why, unrecorded=True)
    unsupported = [_number_label(n) for n in claimed if not contains_number(source_numbers, n)]
    unsupported += [f for f in facts if not _found(scorer, f, sources, source_numbers)]
    if unsupported:
        listed = ", ".join(unsupported[:5])
        return Axis(0.0, f"Not found in the input or tool results: {listed}.", {"unsupported": unsupported})
    return Axis(1.0, f"All {len(claims)} checked claims appear in the input or tool results.", {"claims": claims})


def _correctness(scorer: AnswerScorer, answer: _Answer) -> Axis | None:
    """The correctness axis, or `None` when the facts would come from the case (not given to a form)."""
    if scorer.facts:
        facts = scorer.facts
    elif scorer.expected:
        facts = key_terms(scorer.expected)
    else:
        return None
    if not facts:
        return Axis(None, "No expected facts or expected answer are configured.")
    return _coverage(scorer, answer, facts, "expected facts")


def _completeness(scorer: AnswerScorer, answer: _Answer) -> Axis:
    wanted = scorer.fields or scorer.facts
    if not wanted:
        return Axis(None, "No fields or facts are configured.")
    return _coverage(scorer, answer, wanted, "fields")


def _coverage(scorer: AnswerScorer, answer: _Answer, terms: list[str], what: str) -> Axis:
    missing = [t for t in terms if not _found(scorer, t, answer.text, answer.numbers)]
    value = (len(terms) - len(missing)) / len(terms)
    reason = f"{len(terms) - len(missing)} of {len(terms)} {what} found"
    reason += f"; missing: {', '.join(missing)}." if missing else "."
    return Axis(value, reason, {"missing": missing})


def _passing(scorer: AnswerScorer, axis: Axis | None, passed: bool | None = None) -> Score | None:
    """The reference's `_score_axis` result when it passes, else `None`."""
    if axis is None or axis.value is None:
        return None
    if not (axis.value >= scorer.threshold if passed is None else passed):
        return None
    extra = {"unrecorded": True} if axis.unrecorded else {}
    return scorer.result(True, axis.value, axis.reason, **axis.details, **extra)


def groundedness_form(scorer: Groundedness, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `groundedness` when every claim of the answer is in the sources, else `None`."""
    answer = _answer(row)
    axis = None if answer is None else _groundedness(scorer, row, answer)
    return _passing(scorer, axis, True) if axis is not None and axis.value == 1.0 else None


def correctness_form(scorer: Correctness, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `correctness` when enough expected facts are in the answer, else `None`."""
    answer = _answer(row)
    return None if answer is None else _passing(scorer, _correctness(scorer, answer))


def completeness_form(scorer: Completeness, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `completeness` when enough asked-for fields are in the answer, else `None`."""
    answer = _answer(row)
    return None if answer is None else _passing(scorer, _completeness(scorer, answer))


def answer_quality_form(scorer: AnswerQuality, row: RowCalls, trace: Trace) -> Score | None:
    """The passing `Score` of `answer_quality` when the weighted axes reach the threshold, else `None`."""
    answer = _answer(row)
    correct = None if answer is None else _correctness(scorer, answer)  # first: it may need the case
    grounded = None if answer is None or correct is None else _groundedness(scorer, row, answer)
    if answer is None or correct is None or grounded is None:
        return None
    axes = {"groundedness": grounded, "correctness": correct, "completeness": _completeness(scorer, answer)}
    if scorer.spec_check:  # as the reference: a check counts an axis it could not see as 0
        axes = {
            k: Axis(0.0, a.reason, a.details, True) if a.unrecorded and a.value is None else a for k, a in axes.items()
        }
    return _quality(scorer, axes)


def _quality(scorer: AnswerQuality, axes: dict[str, Axis]) -> Score | None:
    """The reference's weighted score of `axes` when it passes, else `None`."""
    weights = scorer.weights.model_dump()
    applicable = {k: a for k, a in axes.items() if a.value is not None and weights[k] > 0}
    if not applicable:
        return None
    total = sum(weights[k] for k in applicable)
    value = sum(weights[k] * (a.value or 0.0) for k, a in applicable.items()) / total
    if not value >= scorer.threshold:
        return None
    summary = ", ".join(f"{k} {a.value:.2f}" for k, a in applicable.items())
    reason = f"Score {value:.2f} (threshold {scorer.threshold:.2f}; {summary})."
    axes_detail = {k: {"value": a.value, "reason": a.reason} for k, a in axes.items()}
    extra = {"unrecorded": True} if any(a.unrecorded for a in applicable.values()) else {}
    return scorer.result(True, value, reason, axes=axes_detail, **extra)


FORMS: dict[type[Scorer], Callable[[Any, RowCalls, Trace], Score | None]] = {
    Groundedness: groundedness_form,
    Correctness: correctness_form,
    Completeness: completeness_form,
    AnswerQuality: answer_quality_form,
}
"""The answer axes' forms, by the exact scorer class they answer for (merged into `forms.py`'s)."""
