"""Evaluation results as OTel GenAI `gen_ai.evaluation.result` events, sent as OTLP log records.

The GenAI semantic conventions define this event for exactly what `score --send-results` reports:
one event per evaluation, named by the log record's `event_name`, with the attributes
`gen_ai.evaluation.name` (required), `gen_ai.evaluation.score.value` and
`gen_ai.evaluation.score.label` (when there is one), `gen_ai.evaluation.explanation` and
`error.type` (when the evaluation itself failed). The event should be parented to the span it
evaluates: each record carries the evaluated trace's trace id and the span id of its root span,
so a backend shows the score on that trace.

The records come from a resource of their own (`service.name=evaltrace`, overridable with the
standard `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES`) and the instrumentation scope
`evaltrace`. They are sent in batches through the SDK's OTLP log exporter (`exporters.Sender`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from evaltrace.collector.otlp.send.exporters import OtlpTarget, Sender, shown_endpoint, signal_url
from evaltrace.collector.otlp.send.sdk_objects import SAMPLED, hex_id
from evaltrace.collector.otlp.wire import decode
from evaltrace.collector.terminal import plural

EVENT_NAME = "gen_ai.evaluation.result"
SCOPE_NAME = "evaltrace"
DEFAULT_BATCH = 512


@dataclass(frozen=True)
class EvaluationResult:
    """One evaluation of one trace, as the event reports it."""

    name: str
    """The evaluator (scorer) name."""
    trace_id: str
    """The evaluated trace (32 hex digits)."""
    span_id: str | None
    """Its root span (16 hex digits), `None` when the trace has no root span."""
    score_value: float | None = None
    score_label: str | None = None
    explanation: str | None = None
    error_type: str | None = None
    judged: bool = False
    """Whether an LLM judge gave the verdict (Phoenix's annotator kind; not an OTLP attribute)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """More attributes (`evaltrace.case_id`, ...)."""

    def attributes(self) -> dict[str, Any]:
        """The event's attributes by the conventions (absent values left out), then `extra`."""
        named = {
            "gen_ai.evaluation.name": self.name,
            "gen_ai.evaluation.score.value": self.score_value,
            "gen_ai.evaluation.score.label": self.score_label,
            "gen_ai.evaluation.explanation": self.explanation,
            "error.type": self.error_type,
        }
        return {k: v for k, v in {**named, **self.extra}.items() if v is not None}


class ResultsSink:
    """A results backend as scoring sees it: queues, batches and counts results; subclasses send a batch.

    Every kind of `--send-results` (`targets.py`) is one, so scoring neither knows nor asks which it writes to.
    """

    unit = "result"
    """What one sent result is called in the summary line."""
    batch_size = 1
    skip_note = ""
    """Why results this backend cannot hold were not sent (see `accepts`)."""

    def __init__(self, connection: Any, where: str) -> None:
        self._connection = connection
        """What sends: closed by `close`."""
        self.where = where
        """The backend, as it may be shown."""
        self._pending: list[Any] = []
        self.sent = 0
        """Results the backend has accepted."""
        self.skipped = 0
        """Results this backend cannot hold."""

    def summary(self) -> str:
        """What was sent, for the line printed after scoring."""
        skipped = f" ({self.skipped} not sent: {self.skip_note})" if self.skipped else ""
        return f"results sent: {plural(self.sent, self.unit)} to {self.where}{skipped}"

    def add(self, result: EvaluationResult) -> None:
        """Queue one result; a full batch is sent at once.

        Raises:
            InputError: the backend could not be reached or refused a batch.
        """
        if not self.accepts(result):
            self.skipped += 1
            return
        self._pending.append(self.queued(result))
        if len(self._pending) >= self.batch_size:
            self.flush()

    def flush(self) -> None:
        """Send what is queued.

        Raises:
            InputError: the backend could not be reached or refused the batch.
        """
        batch, self._pending = self._pending, []
        if batch:
            self.send(batch)
            self.sent += len(batch)

    def close(self) -> None:
        """Drop what is still queued and close the connections."""
        self._pending = []
        self._connection.close()

    def accepts(self, result: EvaluationResult) -> bool:
        """Whether this backend can hold `result`."""
        return True

    def queued(self, result: EvaluationResult) -> Any:
        """What is queued for `result` (the result itself, or what is sent of it)."""
        return result

    def check(self) -> None:
        """Reach the backend before any scoring.

        Raises:
            InputError: the backend could not be reached, refused the request or the key.
        """
        raise NotImplementedError

    def send(self, batch: list[Any]) -> None:
        """Send one batch (every item accepted, or an `InputError`)."""
        raise NotImplementedError


class ResultsSender(ResultsSink):
    """Sends `EvaluationResult`s to one OTLP backend as log records, `batch_size` records per request."""

    unit = "evaluation event"

    def __init__(self, target: OtlpTarget, batch_size: int = DEFAULT_BATCH) -> None:
        from opentelemetry.sdk.resources import Resource

        url = target.endpoint if target.protocol == "grpc" else signal_url(target.endpoint, "logs")
        self._sender = Sender(target, "logs")
        super().__init__(self._sender, shown_endpoint(url))
        self.batch_size = batch_size
        # `Resource.create` adds OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES and the SDK's own attributes.
        self._resource = Resource.create({"service.name": SCOPE_NAME})
        self._scope = decode.new_scope(SCOPE_NAME, _version(), "", {})

    def check(self) -> None:
        """Send an empty request, so an unreachable or refusing backend is found before any scoring.

        Raises:
            InputError: the backend could not be reached or refused the request.
        """
        self._sender.send_empty()

    def send(self, batch: list[Any]) -> None:
        """One export request with the batch's log records."""
        self._sender.send(batch)

    def queued(self, result: EvaluationResult) -> Any:
        """The result's log record, made when it is queued (its time is the evaluation's)."""
        now = time.time_ns()
        fields = decode.LogFields(
            time=now,
            observed_time=now,
            severity_number=0,
            severity_text="",
            body=None,
            attributes=result.attributes(),
            event_name=EVENT_NAME,
            ids=(hex_id(result.trace_id), hex_id(result.span_id)),
            flags=SAMPLED,  # the evaluated trace was recorded, hence sampled
            dropped_attributes=0,
        )
        return decode.new_log_record(fields, self._resource, self._scope)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("evaltrace")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return ""
