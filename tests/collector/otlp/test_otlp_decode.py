"""OTLP requests -> SDK objects (`collector/otlp`): every field kept, invalid items counted, OTLP/JSON read.

Spans and log records are recorded by the real SDK; the SDK's own OTLP encoders (protobuf, and
the official JSON encoder) make the requests. What `decode` returns, encoded again by the same
encoder, must be the same request (so nothing the wire carries is lost), and the store's
encoders must give the same Arrow batches for the decoded objects as for the recorded ones
(so run files written from OTLP equal the in-process exporter's).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.json.common._log_encoder import encode_logs as json_encode_logs
from opentelemetry.exporter.otlp.json.common.trace_encoder import encode_spans as json_encode_spans
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.wire import decode, jsonformat
from evaltrace.collector.runfiles import batches

_REMOTE = SpanContext(
    0x0AF7651916CD43DD8448EB211C80319C,
    0x00F067AA0BA902B7,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("vendor", "value"), ("other", "x")]),
)
_EVERY_TYPE: dict[str, Any] = {
    "s": "text ünïcode",
    "b": True,
    "i": -(2**62),
    "f": 1.25,
    "ss": ("a", "b"),
    "ii": (1, 2, 3),
    "ff": (0.5, 1.5),
    "bb": (True, False),
}


def _record_spans() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    spans_by_resource = [
        Resource(
            {"service.name": "agent", "deploy.n": 3, "tags": ("x", "y")}, "https://opentelemetry.io/schemas/1.24.0"
        ),
        Resource({"service.name": "tool"}),
    ]
    for resource in spans_by_resource:
        provider = TracerProvider(resource=resource, span_limits=SpanLimits(max_span_attributes=12, max_events=2))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("agent.lib", "1.2.3", "https://schema/scope", {"scope.attr": "yes", "n": 1})
        _record_trace(tracer, provider)
    return list(exporter.get_finished_spans())


def _record_trace(tracer: trace.Tracer, provider: TracerProvider) -> None:
    remote = trace.set_span_in_context(NonRecordingSpan(_REMOTE))
    link = Link(_REMOTE, {"link.attr": "l", "link.n": 2})
    with tracer.start_as_current_span("invoke_agent", remote, kind=SpanKind.SERVER, links=[link]) as root:
        root.set_attributes(_EVERY_TYPE)
        for n in range(8):  # over the limit of 12: some are dropped and counted
            root.set_attribute(f"extra.{n}", n)
        for n in range(3):  # over the limit of 2 events
            root.add_event(f"event {n}", {"e.n": n, "e.list": ("p", "q")})
        with tracer.start_as_current_span("execute_tool", kind=SpanKind.CLIENT) as child:
            child.set_status(Status(StatusCode.ERROR, "tool failed"))
        for kind in (SpanKind.PRODUCER, SpanKind.CONSUMER, SpanKind.INTERNAL):
            with tracer.start_as_current_span(f"k {kind.name}", kind=kind) as span:
                span.set_status(Status(StatusCode.OK))
    provider.force_flush()


def _record_logs() -> list[ReadableLogRecord]:
    exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    provider = LoggerProvider(resource=Resource({"service.name": "agent"}, "https://schema/res"))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("genai.events", "0.1", "https://schema/logs", {"a": 1})
    tracer = TracerProvider().get_tracer("t")
    body = {"role": "user", "parts": [{"type": "text", "content": "hi"}], "raw": b"\x00\xff", "n": None}
    with tracer.start_as_current_span("chat"):
        logger.emit(
            body=body,
            event_name="gen_ai.user.message",
            severity_number=SeverityNumber.INFO,
            severity_text="INFO",
            attributes={"gen_ai.system": "openai", "nested": {"k": [1, "two"]}},
            timestamp=1_700_000_000_000_000_123,
        )
    token = otel_context.attach(otel_context.Context())  # outside any span: no ids
    try:
        logger.emit(body="plain text", attributes={"i": 7})
    finally:
        otel_context.detach(token)
    provider.force_flush()
    return list(exporter.get_finished_logs())


def _wire(request: Any) -> Any:
    """The request after a trip through its protobuf bytes, as a receiver gets it."""
    parsed = type(request)()
    parsed.ParseFromString(request.SerializeToString())
    return parsed


def test_every_span_field_survives_decoding() -> None:
    recorded = _record_spans()
    request = _wire(encode_spans(recorded))
    decoded = decode.decode_spans(request)
    assert decoded.rejected == 0 and decoded.first_error == ""
    assert len(decoded.items) == len(recorded) == 10
    # The SDK's encoder writes every field OTLP carries: the same request back means none is lost.
    assert encode_spans(decoded.items) == request
    root = next(s for s in decoded.items if s.name == "invoke_agent")
    assert root.parent is not None and root.parent.is_remote and root.parent.span_id == _REMOTE.span_id
    assert root.dropped_attributes == 4 and root.dropped_events == 1
    assert root.context.trace_state == _REMOTE.trace_state  # inherited from the remote parent


def test_link_flags_and_trace_state_are_kept() -> None:
    # The Python SDK's encoder writes neither for links; other SDKs do.
    request = encode_spans(_record_spans()[:1])
    link = (
        request.resource_spans[0]
        .scope_spans[0]
        .spans[0]
        .links.add(trace_id=b"\x01" * 16, span_id=b"\x02" * 8, trace_state="k=v", flags=0x301)
    )
    link.attributes.add(key="a").value.int_value = 5
    (span,) = decode.all_or_error(decode.decode_spans(request), "span")
    context = span.links[-1].context
    assert (context.trace_state, context.trace_flags, context.is_remote) == (TraceState([("k", "v")]), 1, True)
    assert dict(span.links[-1].attributes or {}) == {"a": 5}


def test_decoded_spans_encode_to_the_same_run_file_rows() -> None:
    recorded = _record_spans()
    decoded = decode.all_or_error(decode.decode_spans(_wire(encode_spans(recorded))), "span")
    expected = batches.encode_spans(recorded, "run-1")
    got = batches.encode_spans(decoded, "run-1")
    assert got.schema == expected.schema
    assert got.to_pylist() == expected.to_pylist()


def test_every_log_field_survives_decoding_and_encodes_to_the_same_rows() -> None:
    recorded = _record_logs()
    request = _wire(encode_logs(recorded))
    decoded = decode.decode_log_records(request)
    assert decoded.rejected == 0
    assert encode_logs(decoded.items) == request
    rows = batches.LogEncoder("run-1", None).encode(decoded.items, "w").to_pylist()
    assert rows == batches.LogEncoder("run-1", None).encode(recorded, "w").to_pylist()
    assert rows[0]["trace_id"] is not None and rows[1]["trace_id"] is None and rows[1]["time"] is None
    assert json.loads(rows[0]["body"])["parts"][0]["content"] == "hi"


def _bad_spans_request() -> ExportTraceServiceRequest:
    request = encode_spans(_record_spans()[:5])
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[1].trace_id = b"\x01" * 15
    spans[2].span_id = b"\x00" * 8
    spans[3].parent_span_id = b"\x01\x02\x03"
    spans[4].links.add(trace_id=b"\x01" * 16, span_id=b"")
    return request


def test_invalid_spans_are_counted_and_the_valid_ones_kept() -> None:
    request = _bad_spans_request()
    decoded = decode.decode_spans(request)
    assert decoded.rejected == 4
    assert [s.name for s in decoded.items] == [request.resource_spans[0].scope_spans[0].spans[0].name]
    assert decoded.first_error == "resource_spans[0].scope_spans[0].spans[1]: trace_id has 15 bytes, expected 16"
    with pytest.raises(InputError, match=r"^4 invalid spans; the first at resource_spans\[0\]"):
        decode.all_or_error(decode.decode_spans(request), "span")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("trace_id", b"\x01" * 17, "trace_id has 17 bytes, expected 16 or none"),
        ("span_id", b"\x01" * 4, "span_id has 4 bytes, expected 8 or none"),
    ],
)
def test_a_log_record_with_a_bad_id_is_rejected(field: str, value: bytes, message: str) -> None:
    request = encode_logs(_record_logs())
    setattr(request.resource_logs[0].scope_logs[0].log_records[1], field, value)
    decoded = decode.decode_log_records(request)
    assert (len(decoded.items), decoded.rejected) == (1, 1)
    assert decoded.first_error == f"resource_logs[0].scope_logs[0].log_records[1]: {message}"
    with pytest.raises(InputError, match="1 invalid log record; the first at"):
        decode.all_or_error(decode.decode_log_records(request), "log record")


def test_official_otlp_json_reads_as_the_protobuf_request() -> None:
    spans, logs = _record_spans(), _record_logs()
    # What the official OTLP JSON file exporter writes per line, through the JSON text.
    span_doc = json.loads(json.dumps(json_encode_spans(spans).to_dict()))
    log_doc = json.loads(json.dumps(json_encode_logs(logs).to_dict()))
    assert encode_spans(decode.all_or_error(jsonformat.decode_spans(span_doc), "span")) == encode_spans(spans)
    assert encode_logs(decode.all_or_error(jsonformat.decode_log_records(log_doc), "log record")) == encode_logs(logs)
    body = json.dumps(json_encode_spans(spans).to_dict()).encode()
    assert encode_spans(jsonformat.decode_spans(jsonformat.document(body)).items) == encode_spans(spans)


def test_otlp_json_mapping_details() -> None:
    # Upper-case hex, 64-bit integers as strings or numbers, enums as integers, proto field names,
    # unknown fields ignored (a newer sender), bytes values as base64.
    line = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
                "scope_spans": [
                    {
                        "spans": [
                            {
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "eee19b7ec3c1b174",
                                "parentSpanId": "",
                                "name": "op",
                                "kind": 3,
                                "startTimeUnixNano": "1544712660000000000",
                                "end_time_unix_nano": 1544712661000000000,
                                "attributes": [{"key": "raw", "value": {"bytesValue": "AAE="}}],
                                "status": {"code": 2, "message": "bad"},
                                "futureField": {"x": 1},
                            }
                        ]
                    }
                ],
            }
        ]
    }
    (span,) = decode.all_or_error(jsonformat.decode_spans(line), "span")
    assert f"{span.context.trace_id:032x}" == "5b8efff798038103d269b633813fc60c"
    assert span.parent is None and span.kind is SpanKind.CLIENT
    assert (span.start_time, span.end_time) == (1544712660000000000, 1544712661000000000)
    assert dict(span.attributes or {}) == {"raw": b"\x00\x01"}
    assert (span.status.status_code, span.status.description) == (StatusCode.ERROR, "bad")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", r"^not valid JSON \(Expecting property name"),
        (b"\xff\xfe", r"^not UTF-8 text$"),
        (b"[1]", r"^not an OTLP/JSON request \(expected a JSON object\)$"),
        (b'{"resourceSpans": 3}', r"^not a valid OTLP/JSON request: .*resourceSpans"),
        (
            b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"xyz"}]}]}]}',
            r"^not a valid OTLP/JSON request: resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]\.traceId: "
            r"not a hex id \(3 characters\)$",
        ),
        (
            b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"soon"}]}]}]}',
            r"^not a valid OTLP/JSON request: .*startTimeUnixNano",
        ),
    ],
)
def test_bad_otlp_json_is_one_clear_error(body: bytes, message: str) -> None:
    with pytest.raises(InputError, match=message):
        jsonformat.decode_spans(jsonformat.document(body))


def test_bad_json_ids_in_links_and_log_records_are_named() -> None:
    link = b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"links":[{"spanId":"12345"}]}]}]}]}'
    with pytest.raises(InputError, match=r"spans\[0\]\.links\[0\]\.spanId: not a hex id"):
        jsonformat.decode_spans(jsonformat.document(link))
    record = b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"g0"}]}]}]}'
    with pytest.raises(InputError, match=r"logRecords\[0\]\.traceId: not a hex id"):
        jsonformat.decode_log_records(jsonformat.document(record))


def test_an_empty_request_decodes_to_nothing() -> None:
    assert decode.decode_spans(ExportTraceServiceRequest()).items == []
    assert decode.decode_log_records(ExportLogsServiceRequest()).items == []
    assert jsonformat.decode_spans(jsonformat.document(b"{}")).items == []


def test_a_malformed_trace_state_is_dropped_without_logging_it(caplog: pytest.LogCaptureFixture) -> None:
    request = encode_spans(_record_spans()[:2])
    spans = request.resource_spans[0].scope_spans[0].spans
    spans[0].trace_state = "a=1,\x1b[2Jevil=\x1b]8;;x"
    spans[1].trace_state = "a=1, b@vendor=x y"
    with caplog.at_level("DEBUG"):
        first, second = decode.all_or_error(decode.decode_spans(request), "span")
    assert first.context.trace_state == TraceState()
    assert second.context.trace_state == TraceState([("a", "1"), ("b@vendor", "x y")])
    assert "\x1b" not in caplog.text


def test_a_json_number_too_long_to_read_is_one_clear_error() -> None:
    # Python refuses to turn more than 4300 digits into an int: a ValueError that is not a JSONDecodeError.
    body = b'{"resourceSpans": [], "x": ' + b"1" * 5000 + b"}"
    with pytest.raises(InputError, match=r"^a JSON number has more than \d+ digits$"):
        jsonformat.document(body)


@pytest.mark.parametrize(
    ("field", "named"),
    [
        ('"kind": Infinity', r"spans\[0\]\.kind: not an enum value"),
        ('"status": {"code": -Infinity}', r"spans\[0\]\.status\.code: not an enum value"),
        ('"startTimeUnixNano": "' + "9" * 4000 + '"', r"spans\[0\]\.startTimeUnixNano: a 4000-digit number is out"),
    ],
)
def test_hostile_json_numbers_are_one_short_error_naming_the_field(field: str, named: str) -> None:
    # int(inf) raises OverflowError (was a traceback); a number out of range is not quoted whole.
    span = '{"traceId": "' + "1" * 32 + '", "spanId": "' + "1" * 16 + '", ' + field + "}"
    body = '{"resourceSpans": [{"scopeSpans": [{"spans": [' + span + "]}]}]}"
    with pytest.raises(InputError, match=named) as raised:
        jsonformat.decode_spans(jsonformat.document(body.encode()))
    assert len(str(raised.value)) < 300
