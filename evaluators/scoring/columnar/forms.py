"""The columnar forms of the built-in rule scorers, by scorer class.

`trajectory`'s form is in `trajectory.py`; the call-counting ones (`tool_errors`, `budget`) are in
`counts.py`, `usage`'s and `latency`'s in `limits.py`, the answer axes' (`groundedness`,
`correctness`, `completeness`, `answer_quality`) in `answer.py`, `output`'s, `steps`', `outcome`'s
and `cost`'s in `output.py`, the tool-use ones (`tool_call_validity`, `tool_correctness`, `tool_efficiency`,
`tool_name_reliability`, `tool_description_reliability`) in `tools.py`.

A form takes a scorer and a row's columns and returns the `Score` the reference would return when
it can tell for sure that the entry passes, else `None` (the reference then scores the entry, so
failures get their reason and details from it). A form answers only for its exact built-in class:
a subclass (a plugin) may score differently.

A module of forms is imported when a scorer it answers for is first looked up, as the registry
imports a built-in scorer's module when a spec first names it: a run that checks trajectories
alone never imports the output, answer and tool-use scorers (nor jsonschema), a sixth of its
start-up before this.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.columnar.calls import RowCalls
from evaltrace.evaluators.scoring.columnar.trajectory import trajectory_form as trajectory_form
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer

Form = Callable[[Any, RowCalls, Trace], Score | None]
"""A columnar form: (scorer, row, the row's trace) -> the sure passing `Score`, or `None` for the reference.

The trace is there for the rare detail the columns cannot settle; a form reads it only then."""

FormsByClass = dict[type[Scorer], Form]


def _trajectory_forms() -> FormsByClass:
    from evaltrace.evaluators.scoring.scorers.trajectory import Trajectory

    return {Trajectory: trajectory_form}


def _counts_forms() -> FormsByClass:
    from evaltrace.evaluators.scoring.columnar.counts import budget_form, tool_errors_form
    from evaltrace.evaluators.scoring.scorers.calls import Budget, ToolErrors

    return {ToolErrors: tool_errors_form, Budget: budget_form}


def _limits_forms() -> FormsByClass:
    from evaltrace.evaluators.scoring.columnar.limits import latency_form, usage_form
    from evaltrace.evaluators.scoring.scorers.limits import Latency, UsageLimits

    return {UsageLimits: usage_form, Latency: latency_form}


def _output_forms() -> FormsByClass:
    from evaltrace.evaluators.scoring.columnar.output import FORMS as OUTPUT_FORMS

    return OUTPUT_FORMS


def _answer_forms() -> FormsByClass:
    from evaltrace.evaluators.scoring.columnar.answer import FORMS as ANSWER_FORMS

    return ANSWER_FORMS


def _tools_forms() -> FormsByClass:
    from evaltrace.evaluators.scoring.columnar.tools import FORMS as TOOLS_FORMS

    return TOOLS_FORMS


_LOADERS: dict[str, Callable[[], FormsByClass]] = {
    "trajectory": _trajectory_forms,
    **dict.fromkeys(("tool_errors", "budget"), _counts_forms),
    **dict.fromkeys(("usage", "latency"), _limits_forms),
    **dict.fromkeys(("output", "steps", "outcome", "cost"), _output_forms),
    **dict.fromkeys(("groundedness", "correctness", "completeness", "answer_quality"), _answer_forms),
    **dict.fromkeys(
        (
            "tool_call_validity",
            "tool_correctness",
            "tool_efficiency",
            "tool_name_reliability",
            "tool_description_reliability",
        ),
        _tools_forms,
    ),
}
"""Where the forms are, by the name of the scorer they answer for (tests hold it complete)."""


class _Forms(dict[type[Scorer], Form]):
    """Forms by exact scorer class, each module's imported when one of its classes is first looked up.

    `clear()` empties it for good (nothing is loaded after it): the benchmarks clear the forms to
    time the reference alone.
    """

    def __init__(self) -> None:
        super().__init__()
        self._without: set[type[Scorer]] = set()
        """Classes looked up that have no form (a plugin's): asked about once."""
        self._cleared = False

    def __missing__(self, cls: type[Scorer]) -> Form:
        loader = _LOADERS.get(getattr(cls, "name", ""))
        if loader is None or cls in self._without or self._cleared:
            raise KeyError(cls)
        for known, form in loader().items():
            self.setdefault(known, form)  # a form put in by hand (a test's) stays
        if dict.__contains__(self, cls):
            return dict.__getitem__(self, cls)
        self._without.add(cls)  # a subclass, or a class named like a built-in: the reference scores it
        raise KeyError(cls)

    def get(self, cls: type[Scorer], default: Form | None = None, /) -> Form | None:  # type: ignore[override]
        """The form for `cls` (its module imported on the first look), or `default`."""
        try:
            return self[cls]
        except KeyError:
            return default

    def clear(self) -> None:
        """No forms, from now on: every scorer is scored by its reference."""
        self._cleared = True
        super().clear()


FORMS: dict[type[Scorer], Form] = _Forms()
"""Columnar forms by the exact scorer class they answer for."""


def form_of(scorer: Scorer) -> Form | None:
    """The columnar form for `scorer`'s exact class, or `None`."""
    return FORMS.get(type(scorer))
