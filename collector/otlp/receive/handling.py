"""One export request, whatever the transport: parse, decode, queue, answer.

`Intake.accept` holds a request to the SDK's limits (`otlp/limits.py`), decodes it into SDK objects,
offers the valid ones to the queue (weighed by their spans, events and links) and returns the OTLP
response: empty when everything was taken, a partial success naming how many items were rejected
and why the first was (the OTLP specification's answer to invalid items, which the client must
not retry), and what was dropped beyond the limits. When the queue is full or closing it raises `Refused`, which
the transports turn into their retryable answers. `parse_body` reads the two HTTP encodings.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import SpanLimits

from evaltrace.collector.otlp.receive.refusals import RefusalLog
from evaltrace.collector.otlp.receive.workqueue import Signal, Work, WorkQueue
from evaltrace.collector.otlp.wire import decode, jsonformat, limits

Request = ExportTraceServiceRequest | ExportLogsServiceRequest
Response = ExportTraceServiceResponse | ExportLogsServiceResponse


class Refused(Exception):
    """The request cannot be taken now (queue full, or shutting down): the client should retry."""


@dataclass
class Counts:
    """What a receiver has taken and turned away since it started."""

    requests: int = 0
    spans: int = 0
    log_records: int = 0
    rejected_items: int = 0
    """Invalid spans and log records (answered with a partial success)."""
    dropped_items: int = 0
    """Events, links and attributes beyond the SDK's limits (counted in the files, reported as a warning)."""
    refused_requests: int = 0
    """Requests refused as retryable (queue full or shutting down)."""
    bad_requests: int = 0
    """Requests that could not be read (answered with an error)."""


class Intake:
    """Decodes requests and queues their items; counts what it took (thread-safe)."""

    def __init__(
        self,
        queue: WorkQueue,
        wait: float = 0.0,
        span_limits: SpanLimits | None = None,
        refusals: RefusalLog | None = None,
    ) -> None:
        self.queue = queue
        self.wait = wait
        """Seconds a request may wait for room in a full queue."""
        self.limits = span_limits or SpanLimits()
        """The SDK's limits (read from the environment as the SDK reads them)."""
        self.counts = Counts()
        self.refusals = refusals or RefusalLog()
        """Every refused request by kind (both transports note theirs here)."""
        self._lock = threading.Lock()

    def accept(self, signal: Signal, request: Request | decode.Decoded[Any]) -> Response:
        """The answer to one export request whose items have been queued.

        Raises:
            Refused: the queue is full or closed; nothing of the request was taken.
        """
        if isinstance(request, decode.Decoded):  # OTLP/JSON: decoded with the limits held (`parse_body`)
            decoded: decode.Decoded[Any] = request
            dropped = request.dropped
        elif isinstance(request, ExportTraceServiceRequest):
            dropped = limits.hold_span_limits(request, self.limits)
            decoded = decode.decode_spans(request)
        else:
            dropped = limits.hold_log_limits(request, self.limits)
            decoded = decode.decode_log_records(request)
        work = Work(signal, decoded.items, limits.weight(decoded.items))
        if decoded.items and not self.queue.offer(work, self.wait):
            self.count(refused_requests=1)
            raise Refused("the receiver is busy writing; retry later")
        items = "spans" if signal is Signal.TRACES else "log_records"
        lost = dropped.events + dropped.links + dropped.attributes
        self.count(requests=1, rejected_items=decoded.rejected, dropped_items=lost, **{items: len(decoded.items)})
        rejection = decoded.rejection("span" if signal is Signal.TRACES else "log record")
        message = "; ".join(m for m in (rejection, dropped.message()) if m)
        return response(signal, decoded.rejected, message)

    def count(self, **increments: int) -> None:
        """Add to the counters."""
        with self._lock:
            for name, value in increments.items():
                setattr(self.counts, name, getattr(self.counts, name) + value)

    def snapshot(self) -> Counts:
        """A copy of the counters."""
        with self._lock:
            return Counts(**{f.name: getattr(self.counts, f.name) for f in fields(Counts)})


def response(signal: Signal, rejected: int = 0, message: str = "") -> Response:
    """An export response, with a partial success when items were rejected or a warning is `message`."""
    if signal is Signal.TRACES:
        if not rejected and not message:
            return ExportTraceServiceResponse()
        partial = ExportTracePartialSuccess(rejected_spans=rejected, error_message=message)
        return ExportTraceServiceResponse(partial_success=partial)
    if not rejected and not message:
        return ExportLogsServiceResponse()
    logs = ExportLogsPartialSuccess(rejected_log_records=rejected, error_message=message)
    return ExportLogsServiceResponse(partial_success=logs)


def parse_body(
    signal: Signal, body: bytes, is_json: bool, span_limits: SpanLimits | None = None
) -> Request | decode.Decoded[Any]:
    """An HTTP request body (protobuf or OTLP/JSON, already decompressed) as its export request.

    OTLP/JSON is decoded straight to SDK objects, `span_limits` held on the way (no protobuf
    request in between: parsing one from JSON cost ~10x the protobuf path).

    Raises:
        InputError: the body is not a valid request of that encoding.
    """
    if is_json:
        document = jsonformat.document(body)
        if signal is Signal.TRACES:
            return jsonformat.decode_spans(document, span_limits)
        return jsonformat.decode_log_records(document, span_limits)
    empty: Request = ExportTraceServiceRequest() if signal is Signal.TRACES else ExportLogsServiceRequest()
    return decode.parse_request(empty, body, f"a valid OTLP protobuf {signal.value} request")
