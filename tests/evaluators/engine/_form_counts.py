"""Counting the verdicts the columnar forms give, to show which checks a run left to the reference."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring import columns as forms
from evaltrace.evaluators.scoring.columns import RowCalls
from evaltrace.evaluators.scoring.scorers.base import Score

Form = Callable[[Any, RowCalls, Trace], Score | None]


def count_form_answers(monkeypatch: pytest.MonkeyPatch, scorers: Iterable[type]) -> Counter[str]:
    """Wrap the forms of `scorers` (scorer classes): the counter returned counts, per scorer name, their verdicts."""
    answered: Counter[str] = Counter()

    def counted(form: Form) -> Form:
        def count(scorer: Any, row: RowCalls) -> Score | None:
            found = form(scorer, row)
            answered[scorer.name] += found is not None
            return found

        return count

    for scorer in scorers:
        monkeypatch.setitem(forms.FORMS, scorer, counted(forms.FORMS[scorer]))
    return answered
