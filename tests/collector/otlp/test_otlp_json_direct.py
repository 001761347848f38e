"""OTLP/JSON decoded straight to SDK objects (`otlp/jsonformat.py`) equals the protobuf round trip.

For varied seeded requests (`_otlp_json_gen.py`: every attribute type, events, links, statuses,
resources, scopes, key and number spellings, invalid ids), the direct decoder must give what
JSON -> protobuf (`json_format.ParseDict`) -> `decode.py` gives: the same spans and log records
(compared through the SDK's own protobuf encoder, which writes every field, and through the
store's encoders, which make the run files), the same dropped counts, the same rejections; with
the receiver's SDK limits, the same cuts as `otlp/limits.py` makes on the protobuf request.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import SpanLimits

from evaltrace.collector.errors import InputError
from evaltrace.collector.otlp.receive.handling import Intake, parse_body
from evaltrace.collector.otlp.receive.workqueue import Signal, WorkQueue
from evaltrace.collector.otlp.wire import decode, jsonformat
from evaltrace.collector.otlp.wire import limits as receive_limits
from evaltrace.collector.runfiles import batches
from tests.collector.otlp._otlp_json_gen import Gen, via_protobuf

_SEEDS = range(60)


def _rows(items: list[Any], logs: bool) -> Any:
    """The run-file rows of `items`, or the error the store's encoder raises (both ways must agree)."""
    try:
        if logs:
            return batches.LogEncoder("r", None).encode(items, "w").to_pylist()
        return batches.encode_spans(items, "r").to_pylist()
    except (TypeError, ValueError) as exc:  # e.g. bytes nested in a key-value list: not JSON-encodable
        return type(exc)


def _same(direct: decode.Decoded[Any], reference: decode.Decoded[Any], logs: bool) -> None:
    assert (direct.rejected, direct.first_error) == (reference.rejected, reference.first_error)
    assert len(direct.items) == len(reference.items)
    encode = encode_logs if logs else encode_spans
    assert encode(direct.items) == encode(reference.items)
    assert _rows(direct.items, logs) == _rows(reference.items, logs)
    for a, b in zip(direct.items, reference.items, strict=True):
        assert a.dropped_attributes == b.dropped_attributes
        assert a.resource.dropped_attributes == b.resource.dropped_attributes  # type: ignore[attr-defined]
        if not logs:
            assert (a.dropped_events, a.dropped_links) == (b.dropped_events, b.dropped_links)
            assert a.status.description == b.status.description


@pytest.mark.parametrize("seed", _SEEDS)
@pytest.mark.parametrize("logs", [False, True], ids=["spans", "logs"])
def test_direct_json_decoding_equals_the_protobuf_round_trip(seed: int, logs: bool) -> None:
    document = json.loads(json.dumps(Gen(seed).request(logs)))
    reference = (decode.decode_log_records if logs else decode.decode_spans)(via_protobuf(document, logs))
    direct = (jsonformat.decode_log_records if logs else jsonformat.decode_spans)(document)
    _same(direct, reference, logs)


def test_the_generated_requests_cover_every_case() -> None:
    """The table above is only as good as its cases: each kind of value and field occurs."""
    text = json.dumps([Gen(seed).request(logs) for seed in _SEEDS for logs in (False, True)])
    for needle in (
        "stringValue", "string_value", "boolValue", "int_value", "doubleValue", "bytesValue", "arrayValue",
        "kvlistValue", "kvlist_value", '"1e3"', "SPAN_KIND_SERVER", "STATUS_CODE_ERROR", "SEVERITY_NUMBER_WARN",
        "parent_span_id", "start_time_unix_nano", "traceState", "droppedLinksCount", "links", "events", "body",
    ):  # fmt: skip
        assert needle in text, needle
    rejected = sum(jsonformat.decode_spans(Gen(seed).request(False)).rejected for seed in _SEEDS)
    assert rejected > 0  # some ids of the wrong length


_TIGHT = SpanLimits(max_span_attributes=2, max_events=1, max_links=1, max_event_attributes=1, max_link_attributes=1)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("logs", [False, True], ids=["spans", "logs"])
def test_limits_cut_as_the_receiver_cuts_a_protobuf_request(seed: int, logs: bool) -> None:
    limits = SpanLimits(max_attributes=2) if logs else _TIGHT
    document = json.loads(json.dumps(Gen(seed).request(logs)))
    request = via_protobuf(document, logs)
    if logs:
        dropped = receive_limits.hold_log_limits(request, limits)
        reference = decode.decode_log_records(request)
        direct = jsonformat.decode_log_records(document, limits)
    else:
        dropped = receive_limits.hold_span_limits(request, limits)
        reference = decode.decode_spans(request)
        direct = jsonformat.decode_spans(document, limits)
    _same(direct, reference, logs)
    assert direct.dropped == dropped


_SPAN = '{"resourceSpans": [{"scopeSpans": [{"spans": [%s]}]}]}'
_BAD = [
    '{"resourceSpans": 3}',
    _SPAN % '{"startTimeUnixNano": "soon"}',
    _SPAN % '{"startTimeUnixNano": 1.5}',
    _SPAN % '{"flags": -1}',
    _SPAN % '{"name": 5}',
    _SPAN % '{"traceId": "xyz"}',
    _SPAN % '{"attributes": [{"key": "a", "value": {"intValue": "1", "stringValue": "x"}}]}',
    _SPAN % '{"attributes": [{"key": "a", "value": {"boolValue": "yes"}}]}',
    _SPAN % '{"attributes": [{"key": "a", "value": {"doubleValue": "nan"}}]}',
    _SPAN % '{"attributes": [{"key": "a", "value": {"bytesValue": "A"}}]}',
    _SPAN % '{"events": [{"name": "e", "timeUnixNano": "x"}]}',
    _SPAN % '{"links": [{"spanId": "12345"}]}',
    '{"resourceSpans": [{"resource": {"attributes": 1}}]}',
    _SPAN % '{"name": "\\ud800"}',
]


@pytest.mark.parametrize("body", _BAD)
def test_a_request_the_json_mapping_refuses_is_refused_whole(body: str) -> None:
    document = json.loads(body)
    with pytest.raises((json_format.ParseError, ValueError)):
        via_protobuf(document, logs=False)
    with pytest.raises(InputError, match=r"^not a valid OTLP/JSON request: resourceSpans\[0\]"):
        jsonformat.decode_spans(document)


def test_errors_name_the_field_and_item() -> None:
    event = '{"attributes": [{"key": "k", "value": {"intValue": "x"}}]}'
    body = '{"resourceSpans": [{"scopeSpans": [{}, {"spans": [{}, {"events": [{}, EVENT]}]}]}]}'.replace("EVENT", event)
    with pytest.raises(InputError) as caught:
        jsonformat.decode_spans(json.loads(body))
    assert str(caught.value) == (
        "not a valid OTLP/JSON request: resourceSpans[0].scopeSpans[1].spans[1].events[1].attributes[0]"
        ".value.intValue: not an integer (1 characters)"
    )


@pytest.mark.parametrize(
    ("span", "message"),
    [
        ('"x"', "spans[1]: expected a JSON object, got a string"),
        ('{"startTimeUnixNano": "1", "start_time_unix_nano": "2"}', "startTimeUnixNano: given twice"),
        ('{"spanId": "0102030405060708", "span_id": null}', "spanId: given twice (also as span_id)"),
    ],
)
def test_stricter_than_protobufs_python_parser(span: str, message: str) -> None:
    # Protobuf's Python parser reads a string in a list of messages as an empty message, and a
    # field given under both its names as the later one (null clearing it); Go's and C++'s
    # parsers refuse both, as the JSON mapping has no such forms. Refused here too.
    with pytest.raises(InputError, match=re.escape(message)):
        jsonformat.decode_spans(json.loads(_SPAN % ("{}, " + span)))


def _otlp_json(message: Any) -> bytes:
    """A protobuf request in OTLP/JSON (protobuf's JSON mapping with hex ids)."""

    def hex_ids(node: Any) -> Any:
        if isinstance(node, list):
            return [hex_ids(item) for item in node]
        if not isinstance(node, dict):
            return node
        ids = ("traceId", "spanId", "parentSpanId")
        return {k: base64.b64decode(v).hex() if k in ids else hex_ids(v) for k, v in node.items()}

    return json.dumps(hex_ids(json_format.MessageToDict(message))).encode()


def test_the_receiver_takes_json_as_it_takes_protobuf() -> None:
    # Over the limits everywhere: spans' attributes, events, links, events' and links' attributes.
    spans = Gen(3).request(logs=False)
    span = spans["resourceSpans"][0]["scopeSpans"][0]["spans"]
    span[:] = [Gen(4).span() for _ in range(3)]
    for item in span:
        item.update(traceId="ab" * 16, spanId="cd" * 8)
        item["attributes"] = [{"key": f"a{n}", "value": {"intValue": n}} for n in range(9)]
        item["events"] = [{"name": "e", "attributes": item["attributes"]} for _ in range(4)]
        item["links"] = [{"traceId": "01" * 16, "spanId": "02" * 8, "attributes": item["attributes"]} for _ in range(3)]
    protobuf = via_protobuf(spans, logs=False)
    answers, queued = [], []
    for body, is_json in ((protobuf.SerializeToString(), False), (_otlp_json(protobuf), True)):
        queue = WorkQueue(capacity=10_000)
        intake = Intake(queue, span_limits=_TIGHT)
        answers.append(intake.accept(Signal.TRACES, parse_body(Signal.TRACES, body, is_json, intake.limits)))
        (work,) = queue.take(10_000) or []
        queued.append((work.weight, encode_spans(work.items), intake.snapshot()))
    assert answers[0] == answers[1]
    assert answers[1].partial_success.error_message == "over the SDK limits, dropped: 9 events, 6 links, 69 attributes"
    assert queued[0] == queued[1]
