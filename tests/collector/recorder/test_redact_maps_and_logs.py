"""Masking reaches OTLP map and bytes values, and every text a log file holds (issue 28, item 13).

Spans arrive as OTLP export requests (what `evaltrace collect` receives), decoded by evaltrace's
own decoder, with secrets inside map (`kvlist_value`) and `bytes_value` attribute values of the
span, its events and its resource. Log records are emitted through the real OTel SDK, whose log
attributes and bodies may be maps and bytes, with secrets also in the resource (service name),
the instrumentation scope, the severity text and the event name. Both are written by evaltrace's
exporters with a mask pattern and searched in the file's text; each test first checks that the
same input written without redaction does hold every secret.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource

from evaltrace.collector.otlp.wire.decode import all_or_error, decode_spans
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.log_exporter import ParquetLogExporter
from evaltrace.collector.recorder.redact import MASK, RedactionSettings

MASKED = RedactionSettings(mask_patterns=("acme-[0-9]+",))
PLAIN = RedactionSettings()
SECRET = re.compile(r"acme-[0-9]+")


def _file_text(folder: Path, pattern: str) -> str:
    """The raw bytes and every column (as JSON) of the files matching `pattern` in `folder`."""
    texts = []
    for path in sorted(folder.glob(pattern)):
        texts.append(path.read_bytes().decode("latin-1"))
        texts.append(json.dumps(pq.read_table(path).to_pylist(), ensure_ascii=False, default=str))
    assert texts, f"no {pattern} in {folder}"
    return "\n".join(texts)


def _value(value: Any) -> AnyValue:
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=[KeyValue(key=k, value=_value(v)) for k, v in value.items()]))
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    return AnyValue(string_value=value)


def _pairs(attributes: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=k, value=_value(v)) for k, v in attributes.items()]


def _request() -> ExportTraceServiceRequest:
    span = Span(
        trace_id=bytes(range(1, 17)),
        span_id=bytes(range(1, 9)),
        name="invoke_agent",
        start_time_unix_nano=1_700_000_000_000_000_000,
        end_time_unix_nano=1_700_000_001_000_000_000,
        attributes=_pairs({"request": {"headers": {"x-api-key": "acme-1"}}, "blob": b"token acme-2 \xff"}),
        events=[
            Span.Event(time_unix_nano=1_700_000_000_500_000_000, name="e", attributes=_pairs({"m": {"k": "acme-3"}}))
        ],
    )
    resource = ProtoResource(attributes=_pairs({"service.name": "svc", "deploy": {"key": "acme-4"}, "b": b"acme-5"}))
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=resource, scope_spans=[ScopeSpans(spans=[span])])]
    )


def _write_spans(folder: Path, settings: RedactionSettings) -> str:
    exporter = ParquetSpanExporter(folder, run_id="maps", redaction=settings)
    exporter.export(all_or_error(decode_spans(_request()), "span"))
    exporter.shutdown()
    return _file_text(folder, "*.parquet")


def test_map_and_bytes_attribute_values_are_masked(tmp_path: Path) -> None:
    plain = _write_spans(tmp_path / "plain", PLAIN)
    # The input holds them all; bytes that are not UTF-8 are kept whole, as base64.
    assert {"acme-1", "acme-3", "acme-4", "acme-5"} <= set(SECRET.findall(plain))
    blob = base64.b64encode(b"token acme-2 \xff").decode()
    assert blob in plain
    masked = _write_spans(tmp_path / "masked", MASKED)
    assert SECRET.search(masked) is None, SECRET.findall(masked)
    assert blob not in masked  # masked inside the bytes before they were encoded
    assert base64.b64encode(b"token " + MASK.encode() + b" \xff").decode() in masked
    assert MASK in masked


def _write_logs(folder: Path, settings: RedactionSettings) -> tuple[str, dict[str, Any]]:
    exporter = ParquetLogExporter(folder, run_id="logs", redaction=settings)
    provider = LoggerProvider(resource=Resource({"service.name": "svc-acme-1", "deploy.key": "acme-2"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("lib-acme-3", "acme-4")
    logger.emit(
        event_name="gen_ai.acme-5",
        severity_text="acme-6",
        body={"role": "user", "raw": b"acme-7"},
        attributes={"m": {"x": "acme-8"}, "b": b"key acme-9", "l": [b"acme-10"]},
    )
    provider.shutdown()
    (row,) = pq.read_table(next(folder.glob("*.logs.parquet"))).to_pylist()
    return _file_text(folder, "*.logs.parquet"), row


def test_every_text_of_a_log_file_is_masked(tmp_path: Path) -> None:
    plain, _ = _write_logs(tmp_path / "plain", PLAIN)
    assert {f"acme-{n}" for n in range(1, 11)} <= set(SECRET.findall(plain))  # the input holds them all
    masked, row = _write_logs(tmp_path / "masked", MASKED)
    assert SECRET.search(masked) is None, SECRET.findall(masked)
    # Only the matched text is replaced: names stay readable.
    assert row["service_name"] == f"svc-{MASK}"
    assert row["scope_name"] == f"lib-{MASK}"
    assert row["event_name"] == f"gen_ai.{MASK}"
    assert row["severity_text"] == MASK
    assert json.loads(row["body"])["role"] == "user"
