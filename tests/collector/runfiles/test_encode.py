"""The batch encoder's shortcuts give the same rows as the plain per-span path."""

from __future__ import annotations

import base64
import math
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.collector.runfiles.batches import encode_spans
from evaltrace.collector.runfiles.encode import dumps_many
from evaltrace.collector.runfiles.jsonvalue import loads_attributes


def _spans(attribute_sets: list[dict[str, Any]]) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for i, attrs in enumerate(attribute_sets):
        with tracer.start_as_current_span(f"s{i}", attributes=attrs):
            pass
    return list(memory.get_finished_spans())


def test_dumps_many_survives_values_that_look_like_object_boundaries() -> None:
    objects: list[dict[str, Any]] = [{"a": "x}, {"}, {}, {"b": 'y}, {"z', "c": 1}, {"d": [1, 2]}]
    texts = dumps_many(objects)
    assert [loads_attributes(t) for t in texts] == objects


def test_dumps_many_keeps_non_finite_floats() -> None:
    texts = dumps_many([{"a": 1}, {"n": math.nan, "i": (math.inf, 1.0)}])
    assert loads_attributes(texts[0]) == {"a": 1}
    decoded = loads_attributes(texts[1])
    assert math.isnan(decoded["n"]) and decoded["i"] == [math.inf, 1.0]


def test_plain_mapping_spans_encode_like_sdk_spans() -> None:
    """A span not built by the SDK (plain dict attributes) takes the public path, same rows."""
    sdk = _spans([{"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[]", "n": 3}, {}])
    plain = [
        ReadableSpan(
            name=s.name,
            context=s.context,
            parent=s.parent,
            resource=s.resource,
            attributes=dict(s.attributes or {}),
            kind=s.kind,
            status=s.status,
            start_time=s.start_time,
            end_time=s.end_time,
            instrumentation_scope=s.instrumentation_scope,
        )
        for s in sdk
    ]
    assert encode_spans(plain, "r").equals(encode_spans(sdk, "r"))


def test_promoted_value_is_copied_even_from_a_large_payload() -> None:
    long_id = "c" * 2000
    batch = encode_spans(_spans([{"gen_ai.conversation.id": long_id, "session.id": "s"}]), "r")
    (row,) = batch.drop_columns(["start_time", "end_time"]).to_pylist()  # ns timestamps: no datetime
    assert row["gen_ai_conversation_id"] == long_id  # the preferred key wins over session.id
    assert dict(row["large_attributes"]) == {"gen_ai.conversation.id": long_id}
    assert loads_attributes(row["attributes"]) == {"session.id": "s"}
    assert row["events"] == [] and row["links"] == []


def test_promoted_int_columns_take_only_int64_values_and_never_fail_the_batch() -> None:
    values: list[Any] = [2**70, -(2**63), "²", "--5", " 42 ", "9" * 30, 1e30, 7.0]
    batch = encode_spans(_spans([{"gen_ai.usage.input_tokens": v} for v in values]), "r")
    column = batch.column("gen_ai_usage_input_tokens").to_pylist()
    assert column == [None, -(2**63), None, None, 42, None, None, 7]
    # The attribute itself is still stored whole (as text: JSON has no int64 limit).
    assert loads_attributes(batch.column("attributes")[0].as_py()) == {"gen_ai.usage.input_tokens": 2**70}


def test_otlp_map_and_bytes_values_nested_at_any_depth_round_trip() -> None:
    # OTLP values may be maps and bytes inside maps and arrays (kvlistValue, arrayValue, bytesValue);
    # the encoder raised TypeError on nested bytes, failing a whole import with a traceback.
    nested = {"m": {"b": b"\x00\x01ok", "inner": [{"nan": math.nan, "n": 1}, b"x"]}, "f": -math.inf}
    [text] = dumps_many([nested])
    decoded = loads_attributes(text)
    assert decoded["m"]["b"] == "\x00\x01ok"
    assert decoded["m"]["inner"][1] == "x"
    assert math.isnan(decoded["m"]["inner"][0]["nan"]) and decoded["m"]["inner"][0]["n"] == 1
    assert decoded["f"] == -math.inf


def test_bytes_that_are_not_utf8_are_kept_whole_as_base64() -> None:
    # A binary log body or attribute (an image, a digest) must not lose its bytes to replacement
    # characters: the encoder once wrote b"\xff\xd8" as two U+FFFD, which nothing could undo.
    binary = bytes(range(256))
    [text] = dumps_many([{"body": binary, "list": [b"\xff\xd8\xff"]}])
    decoded = loads_attributes(text)
    assert base64.b64decode(decoded["body"]) == binary
    assert base64.b64decode(decoded["list"][0]) == b"\xff\xd8\xff"
