"""`score --send-results [KIND:]URL`: every score sent to a results backend (`collector/otlp/send/targets.py`).

A `ReportFormat` like the file reports: it receives the entries as they are scored and sends one
result per scorer verdict of each scored sample (an entry's own `scores` summarise its samples'
and are not sent again), tied to the sample's trace and that trace's root span; in a multi-turn
case each turn's verdicts go to that turn's trace. Events are sent in batches while scoring runs,
the last batch at `finish`. The backend is checked (an empty OTLP request, or a REST request that
needs the key) when the writer opens, so a wrong URL or a refusing backend stops the command before
any scoring work. Results go as OTLP `gen_ai.evaluation.result` events, Phoenix span annotations or
Langfuse scores, by the target's kind.

The event's label is `pass`, `fail` or `not_applicable`; its value is the scorer's value when it
gave one; its explanation the scorer's reason; `error.type` the error of a scorer that could not
run. `evaltrace.case_id` and `evaltrace.turn` say which case (and turn) the verdict belongs to.
"""

from __future__ import annotations

from collections.abc import Iterator

from evaltrace.collector.otlp.send.results import EvaluationResult
from evaltrace.collector.otlp.send.targets import ResultsTarget, open_results
from evaltrace.evaluators.results.report.model import EntryResult, Report, SampleResult, ScoreResult
from evaltrace.evaluators.results.report.writer import ReportEntry

_LABELS = {True: "pass", False: "fail", None: "not_applicable"}


class ResultsWriter:
    """A `ReportFormat` sending each score to `target` (see the module docstring)."""

    def __init__(self, target: ResultsTarget, judges: frozenset[str] = frozenset()) -> None:
        self._sender = open_results(target)
        self._judges = judges
        """Scorers whose verdicts an LLM judge gives."""
        try:
            self._sender.check()
        except BaseException:
            self._sender.close()
            raise

    def summary(self) -> str:
        """What was sent where, for the line printed after scoring."""
        return self._sender.summary()

    def add(self, entry: ReportEntry) -> None:
        """Queue one result per score of the entry's samples (full batches are sent at once)."""
        for result in evaluation_results(entry.result(), self._judges):
            self._sender.add(result)

    def finish(self, report: Report) -> None:
        """Send the last batch and close the exporter."""
        try:
            self._sender.flush()
        finally:
            self._sender.close()

    def abort(self) -> None:
        """Drop the events not yet sent (those sent stay with the backend)."""
        self._sender.close()


def evaluation_results(entry: EntryResult, judges: frozenset[str] = frozenset()) -> Iterator[EvaluationResult]:
    """The results of one entry: one per score of each sample that names a trace (`judges`: judged by an LLM)."""
    for sample in entry.samples:
        for score in sample.scores:
            located = _trace_of(sample, score)
            if located is None:
                continue
            trace_id, span_id = located
            extra = {"evaltrace.case_id": entry.case_id, "evaltrace.turn": score.turn}
            yield EvaluationResult(
                name=score.scorer,
                trace_id=trace_id,
                span_id=span_id,
                score_value=score.value,
                score_label=_LABELS[score.passed],
                explanation=score.reason,
                error_type=score.error,
                judged=score.scorer in judges,
                extra={k: v for k, v in extra.items() if v is not None},
            )


def _trace_of(sample: SampleResult, score: ScoreResult) -> tuple[str, str | None] | None:
    """The trace (and its root span) a score is about: its turn's trace, else the sample's first."""
    ids = sample.trace_ids or ([sample.trace_id] if sample.trace_id else [])
    if not ids:
        return None
    index = score.turn - 1 if score.turn is not None and 0 < score.turn <= len(ids) else 0
    roots = sample.root_span_ids
    return ids[index], roots[index] if index < len(roots) else None
