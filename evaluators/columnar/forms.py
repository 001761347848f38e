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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evaltrace.collector.convert.records import Trace
from evaltrace.evaluators.columnar.answer import FORMS as ANSWER_FORMS
from evaltrace.evaluators.columnar.calls import RowCalls
from evaltrace.evaluators.columnar.counts import budget_form, tool_errors_form
from evaltrace.evaluators.columnar.limits import latency_form, usage_form
from evaltrace.evaluators.columnar.output import FORMS as OUTPUT_FORMS
from evaltrace.evaluators.columnar.tools import FORMS as TOOLS_FORMS
from evaltrace.evaluators.columnar.trajectory import trajectory_form as trajectory_form
from evaltrace.evaluators.scorers.base import Score, Scorer
from evaltrace.evaluators.scorers.calls import Budget, ToolErrors
from evaltrace.evaluators.scorers.limits import Latency, UsageLimits
from evaltrace.evaluators.scorers.trajectory import Trajectory

Form = Callable[[Any, RowCalls, Trace], Score | None]
"""A columnar form: (scorer, row, the row's trace) -> the sure passing `Score`, or `None` for the reference.

The trace is there for the rare detail the columns cannot settle; a form reads it only then."""

FORMS: dict[type[Scorer], Form] = {
    Trajectory: trajectory_form,
    ToolErrors: tool_errors_form,
    Budget: budget_form,
    UsageLimits: usage_form,
    Latency: latency_form,
    **OUTPUT_FORMS,
    **ANSWER_FORMS,
    **TOOLS_FORMS,
}
"""Columnar forms by the exact scorer class they answer for."""


def form_of(scorer: Scorer) -> Form | None:
    """The columnar form for `scorer`'s exact class, or `None`."""
    return FORMS.get(type(scorer))
