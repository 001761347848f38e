"""Scoring one trace through its traces table on the columnar path, for the columnar tests."""

from __future__ import annotations

from evaltrace.collector.traces.records import Trace
from evaltrace.collector.traces.table import from_table, to_table
from evaltrace.evaluators.scoring.columns import _MANY, FORMS, BatchCalls, Forms, RowCalls, ask_rows
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer, run_scorer


def columnar(trace: Trace, scorer: Scorer) -> tuple[Score | None, Trace]:
    """The columnar verdict on `trace` read back from its traces table (its form on its row), and the decoded trace."""
    table = to_table([trace])
    row = BatchCalls(table.to_batches()[0]).row(trace.trace_id)
    form = FORMS.get(type(scorer))
    return (None if form is None or row is None else form(scorer, row)), from_table(table)[0]


def check_rows(traces: list[Trace], scorer: Scorer) -> list[Score | None]:
    """`check_same` on each of `traces`, all rows of one table batch: the rows share the form's per-batch memos.

    The batch's rows are asked at once too (`ask_rows`, as the engine asks them): the same answers.
    """
    named = [trace.model_copy(update={"trace_id": f"{index + 1:032x}"}) for index, trace in enumerate(traces)]
    table = to_table(named)
    batch, form = BatchCalls(table.to_batches()[0]), FORMS.get(type(scorer))
    found: list[Score | None] = []
    for trace, decoded in zip(named, from_table(table), strict=True):
        row = batch.row(trace.trace_id)
        score = None if form is None or row is None else form(scorer, row)
        if score is not None:
            assert score == run_scorer(scorer, decoded)
        found.append(score)
    if form is not None:
        rows = [index for _, index in batch.rows()]
        assert ask_rows([scorer] * len(rows), BatchCalls(table.to_batches()[0]), rows) == found
        assert batch_form(scorer)([scorer] * len(rows), BatchCalls(table.to_batches()[0]), rows) in (found, None)
    return found


def batch_form(scorer: Scorer) -> Forms:
    """The batch form of `scorer`'s class asked directly: an exception it raises fails a test (`ask_rows` hides it)."""
    many = _MANY.get(type(scorer))
    return (lambda *_: None) if many is None or many[0] is not FORMS[type(scorer)] else many[1]


def check_same(trace: Trace, scorer: Scorer) -> Score | None:
    """Assert the columnar verdict (where given) is the reference's; return it."""
    found, decoded = columnar(trace, scorer)
    if found is not None:
        assert found == run_scorer(scorer, decoded)
    return found


def check_own(cases: list[tuple[Trace, Scorer]]) -> list[Score | None]:
    """Rows of one batch, each with its own scorer (one class), asked at once as the engine asks a case's scorers.

    Each answer given is the reference's on the decoded trace (a pass, or a failure); each is the answer the
    row gets asked alone (its one-row form).
    """
    named = [trace.model_copy(update={"trace_id": f"{index + 1:032x}"}) for index, (trace, _) in enumerate(cases)]
    table = to_table(named)
    batch, scorers = BatchCalls(table.to_batches()[0]), [scorer for _, scorer in cases]
    rows = [index for _, index in batch.rows()]
    found = ask_rows(scorers, batch, rows)
    assert batch_form(scorers[0])(scorers, BatchCalls(table.to_batches()[0]), rows) in (found, None)
    for scorer, decoded, index, score in zip(scorers, from_table(table), rows, found, strict=True):
        alone = FORMS[type(scorer)](scorer, RowCalls(BatchCalls(table.to_batches()[0]), index))
        assert score == alone
        if score is not None:
            assert score == run_scorer(scorer, decoded)
    return found
