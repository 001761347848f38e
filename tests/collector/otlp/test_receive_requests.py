"""`evaltrace collect` answers every kind of request as the OTLP specification says, and keeps running.

One receiver (a subprocess, 1 MB request limit) takes the whole sequence: valid protobuf, JSON,
gzip and chunked requests; invalid items (partial success); undecodable, oversized, wrongly typed
or encoded requests and a gzip bomb; wrong methods and paths; the same over gRPC. At the end it
still answers, and its files hold exactly the spans it acknowledged. A second receiver requires a
bearer token.
"""

from __future__ import annotations

import gzip
import http.client
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from _receive_process import NO_PROXY, Collector, rows, running_collector
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
LIMIT = 1024 * 1024


def _spans(count: int, prefix: str) -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("requests-test")
    for n in range(count):
        with tracer.start_as_current_span(f"{prefix} {n}"):
            pass
    return list(exporter.get_finished_spans())


def _body(count: int, prefix: str) -> bytes:
    return bytes(encode_spans(_spans(count, prefix)).SerializeToString())


def _json_body(count: int, prefix: str) -> bytes:
    spans = []
    for span in _spans(count, prefix):
        context = span.get_span_context()
        assert context is not None
        spans.append(
            {
                "traceId": f"{context.trace_id:032X}",
                "spanId": f"{context.span_id:016x}",
                "name": span.name,
                "kind": 1,
                "startTimeUnixNano": str(span.start_time),
                "endTimeUnixNano": str(span.end_time),
            }
        )
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def post(
    collector: Collector, path: str, body: bytes, headers: dict[str, str], method: str = "POST"
) -> tuple[int, dict[str, str], bytes]:
    """One request on a new connection: status, headers, body."""
    host, port = str(collector.http).rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        # An over-large body is answered before it is read; the receiver's lingering close lets
        # the send finish, so a failing send here is a receiver bug.
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def _status(body: bytes) -> status_pb2.Status:
    status = status_pb2.Status()
    status.ParseFromString(body)
    return status


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with running_collector(tmp_path_factory.mktemp("collect") / "runs", "--max-request-mb", "1") as running:
        yield running


def test_valid_requests_in_every_encoding_are_taken(collector: Collector) -> None:
    status, headers, body = post(collector, "/v1/traces", _body(3, "proto"), PROTOBUF)
    assert (status, headers["Content-Type"]) == (200, "application/x-protobuf")
    assert not ExportTraceServiceResponse.FromString(body).HasField("partial_success")
    status, headers, body = post(collector, "/v1/traces", _json_body(2, "json"), JSON)
    assert (status, headers["Content-Type"], json.loads(body)) == (200, "application/json", {})
    gzipped = {**PROTOBUF, "Content-Encoding": "gzip"}
    assert post(collector, "/v1/traces", gzip.compress(_body(4, "gzip")), gzipped)[0] == 200
    # Chunked transfer encoding (http.client chunks an iterable body without a length).
    connection = http.client.HTTPConnection(*str(collector.http).rsplit(":", 1), timeout=30)
    body_parts = iter([_body(1, "chunked")[:10], _body(1, "chunked2")])
    connection.request("POST", "/v1/traces", body=body_parts, headers=PROTOBUF, encode_chunked=True)
    assert connection.getresponse().status == 400  # two different requests glued: not one message
    connection.close()
    whole = _body(2, "chunked")
    connection = http.client.HTTPConnection(*str(collector.http).rsplit(":", 1), timeout=30)
    connection.request("POST", "/v1/traces", body=iter([whole[:7], whole[7:]]), headers=PROTOBUF, encode_chunked=True)
    assert connection.getresponse().status == 200
    connection.close()
    assert post(collector, "/v1/logs", bytes(ExportLogsServiceRequest().SerializeToString()), PROTOBUF)[0] == 200
    record = {"timeUnixNano": "1700000000000000000", "traceId": "0AF7651916CD43DD8448EB211C80319C", "spanId": ""}
    record["body"] = {"kvlistValue": {"values": [{"key": "role", "value": {"stringValue": "user"}}]}}
    logs = {"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}
    gzipped_json = {**JSON, "Content-Encoding": "gzip"}
    status, _, body = post(collector, "/v1/logs", gzip.compress(json.dumps(logs).encode()), gzipped_json)
    assert (status, json.loads(body)) == (200, {})


def test_invalid_items_get_a_partial_success(collector: Collector) -> None:
    request = encode_spans(_spans(3, "partial"))
    request.resource_spans[0].scope_spans[0].spans[1].span_id = b"\x01\x02"
    status, _, body = post(collector, "/v1/traces", request.SerializeToString(), PROTOBUF)
    partial = ExportTraceServiceResponse.FromString(body).partial_success
    assert status == 200 and partial.rejected_spans == 1
    assert partial.error_message == (
        "1 invalid span; the first at resource_spans[0].scope_spans[0].spans[1]: span_id has 2 bytes, expected 8"
    )


TRUNCATED_GZIP = gzip.compress(b"x" * 100, mtime=0)[:-9]
"""mtime=0: the same bytes in every process, so the same test id in each pytest-xdist worker."""


@pytest.mark.parametrize(
    ("body", "headers", "code", "message"),
    [
        (b"\xff\xff\xff\xff", PROTOBUF, 400, "not a valid OTLP protobuf traces request"),
        (b'{"resourceSpans": [', JSON, 400, "not valid JSON"),
        (b"x", {"Content-Type": "text/plain"}, 415, "content type 'text/plain'"),
        (b"x", {}, 415, "content type 'none'"),
        (b"x", {**PROTOBUF, "Content-Encoding": "br"}, 415, "content encoding: use gzip or none"),
        (TRUNCATED_GZIP, {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "gzip body is truncated"),
        (b"not gzip", {**PROTOBUF, "Content-Encoding": "gzip"}, 400, "gzip body is corrupt"),
        (b"x" * (LIMIT + 1), PROTOBUF, 413, f"over the limit of {LIMIT}"),
    ],
)
def test_bad_requests_get_clear_errors(
    collector: Collector, body: bytes, headers: dict[str, str], code: int, message: str
) -> None:
    status, answer_headers, answer = post(collector, "/v1/traces", body, headers)
    assert status == code
    is_json = headers.get("Content-Type") == JSON["Content-Type"]
    text = json.loads(answer)["message"] if is_json else _status(answer).message
    assert message in text


def test_a_gzip_bomb_is_refused_without_inflating_it(collector: Collector) -> None:
    # 200 MB of zeros in about 200 KB: the receiver stops at its 1 MB limit.
    inflater = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = bytes(1024 * 1024)
    bomb = b"".join(inflater.compress(chunk) for _ in range(200)) + inflater.flush()
    assert len(bomb) < LIMIT
    status, _, answer = post(collector, "/v1/traces", bomb, {**PROTOBUF, "Content-Encoding": "gzip"})
    assert status == 413 and "once decompressed" in _status(answer).message
    peak_kb = int(next(line for line in _proc_status(collector) if line.startswith("VmHWM:")).split()[1])
    assert peak_kb < 200 * 1024  # far below the bomb's 200 MB


def _proc_status(collector: Collector) -> list[str]:
    return Path(f"/proc/{collector.process.pid}/status").read_text().splitlines()


def test_a_declared_oversized_body_is_refused_before_it_is_sent(collector: Collector) -> None:
    host, port = str(collector.http).rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.putrequest("POST", "/v1/traces")
    connection.putheader("Content-Type", "application/x-protobuf")
    connection.putheader("Content-Length", str(10**9))
    connection.endheaders()
    response = connection.getresponse()
    assert (response.status, response.getheader("Connection")) == (413, "close")
    connection.close()


def test_paths_and_methods(collector: Collector) -> None:
    status, headers, _ = post(collector, "/v1/traces", b"", {}, method="GET")
    assert (status, headers["Allow"]) == (405, "POST")
    assert post(collector, "/v1/metrics", b"x", PROTOBUF)[0] == 404
    assert post(collector, "/", b"", {}, method="GET")[0] == 404
    assert post(collector, "/v1/traces", b"", {}, method="HEAD")[0] == 405


def test_grpc_answers(collector: Collector) -> None:
    with grpc.insecure_channel(str(collector.grpc), options=NO_PROXY) as channel:
        traces = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
        ok = traces.Export(encode_spans(_spans(5, "grpc")), timeout=30)
        assert not ok.HasField("partial_success")
        request = encode_spans(_spans(2, "grpc-partial"))
        request.resource_spans[0].scope_spans[0].spans[0].trace_id = b""
        assert traces.Export(request, timeout=30).partial_success.rejected_spans == 1
        big = ExportTraceServiceRequest()
        big.resource_spans.add().scope_spans.add().spans.add(name="x" * (LIMIT + 10))
        for compression in (None, grpc.Compression.Gzip):  # gzip: the limit holds once decompressed
            with pytest.raises(grpc.RpcError) as error:
                traces.Export(big, timeout=30, compression=compression)
            assert error.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
        logs = logs_service_pb2_grpc.LogsServiceStub(channel)  # type: ignore[no-untyped-call]
        assert not logs.Export(ExportLogsServiceRequest(), timeout=30).HasField("partial_success")


def test_a_json_number_too_long_to_read_is_a_400(collector: Collector) -> None:
    # More than 4300 digits: Python's int() refuses it with a ValueError, which must not drop the connection.
    body = b'{"resourceSpans": [], "x": ' + b"1" * 5000 + b"}"
    status, _, answer = post(collector, "/v1/traces", body, JSON)
    assert status == 400 and "a JSON number has more than" in json.loads(answer)["message"]


def test_zz_still_running_and_the_files_hold_what_was_acknowledged(collector: Collector) -> None:
    # Runs last (module order): after every bad request above, the receiver still takes requests.
    assert post(collector, "/v1/traces", _body(1, "last"), PROTOBUF)[0] == 200
    assert collector.stop() == 0, collector.err
    # Acknowledged: proto 3 + json 2 + gzip 4 + chunked 2 + partial 2 + grpc 5 + grpc partial 1 + last 1.
    folder = Path(collector.process.args[collector.process.args.index("--dir") + 1])
    names = [r["name"] for r in rows(folder)]
    assert len(names) == 20 and len(set(names)) == 20
    assert "received 20 spans and 1 log record in" in collector.stdout
    (record,) = rows(folder, logs=True)
    assert (record["trace_id"], record["span_id"]) == ("0af7651916cd43dd8448eb211c80319c", None)
    assert json.loads(record["body"]) == {"role": "user"}
    assert "2 invalid items rejected" in collector.stdout


def test_a_bearer_token_is_required_when_configured(tmp_path: Path) -> None:
    token = "s3cret-token-0123456789"
    folder = tmp_path / "runs"
    with running_collector(folder, env={"EVALTRACE_COLLECT_TOKEN": token}) as collector:
        status, headers, _ = post(collector, "/v1/traces", _body(1, "no token"), PROTOBUF)
        assert (status, headers["WWW-Authenticate"]) == (401, "Bearer")
        wrong = {**PROTOBUF, "Authorization": f"Bearer {token}x"}
        assert post(collector, "/v1/traces", _body(1, "wrong"), wrong)[0] == 401
        right = {**PROTOBUF, "Authorization": f"Bearer {token}"}
        assert post(collector, "/v1/traces", _body(1, "right"), right)[0] == 200
        lower = {**PROTOBUF, "Authorization": f"bearer {token}"}  # the scheme is case-insensitive
        assert post(collector, "/v1/traces", _body(1, "lower"), lower)[0] == 200
        with grpc.insecure_channel(str(collector.grpc), options=NO_PROXY) as channel:
            stub = trace_service_pb2_grpc.TraceServiceStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.RpcError) as error:
                stub.Export(encode_spans(_spans(1, "grpc no token")), timeout=30)
            assert error.value.code() is grpc.StatusCode.UNAUTHENTICATED
            metadata = [("authorization", f"Bearer {token}")]
            stub.Export(encode_spans(_spans(1, "grpc right")), timeout=30, metadata=metadata)
        assert collector.stop() == 0
    assert sorted(r["name"] for r in rows(folder)) == ["grpc right 0", "lower 0", "right 0"]
    assert "bearer token in $EVALTRACE_COLLECT_TOKEN" in collector.stdout
    assert token not in collector.stdout + collector.err
    assert all(token.encode() not in path.read_bytes() for path in folder.iterdir())
