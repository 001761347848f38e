"""Who may send to `evaltrace collect`, and what one request may cost: issue 28 items 3, 4 (gRPC) and 5.

- a blank or whitespace `EVALTRACE_COLLECT_TOKEN` is refused at start (it turned auth off);
- a listener beyond loopback without a token is refused unless `--allow-unauthenticated`;
- gRPC checks the token from the call's metadata before the message is read: an oversized or
  undecodable message without the token is UNAUTHENTICATED (before: RESOURCE_EXHAUSTED, or a
  decoding error, after receiving up to 16 MB);
- a 2 MB request with a million empty events on one span holds the SDK's span limits (128 events,
  the rest counted as dropped and reported in a partial success) instead of growing the receiver
  by 330 MB; the queue weighs each request by its spans, events and links, not as one item.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from _receive_process import NO_PROXY, Collector, clean_env, rows, running_collector
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from pydantic import SecretStr
from test_receive_requests import PROTOBUF, _body, post

from evaltrace.collector.otlp.receive.config import Address, ReceiverConfig
from evaltrace.collector.otlp.receive.handling import Intake, Refused
from evaltrace.collector.otlp.receive.workqueue import Signal, WorkQueue

TOKEN = "s3cret-token-0123456789"
EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _collect(*args: str, env: dict[str, str], folder: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "evaltrace.cli", "collect", "--dir", str(folder), *args]
    # A receiver that starts runs until killed: the timeout bounds the test without the fix.
    return subprocess.run(command, capture_output=True, text=True, timeout=20, env=clean_env(env))


@pytest.mark.parametrize("token", ["", "   ", "\t"])
def test_a_blank_token_is_refused(tmp_path: Path, token: str) -> None:
    args = ("--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0")
    result = _collect(*args, env={"EVALTRACE_COLLECT_TOKEN": token}, folder=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr == "Error: $EVALTRACE_COLLECT_TOKEN is set but blank: set a token, or unset it to require none\n"
    )


def test_a_token_with_spaces_around_it_is_refused(tmp_path: Path) -> None:
    result = _collect("--http", "127.0.0.1:0", env={"EVALTRACE_COLLECT_TOKEN": " tok "}, folder=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "Error: $EVALTRACE_COLLECT_TOKEN must be printable ASCII without spaces around it\n"
    assert "tok" not in result.stderr.removeprefix("Error: $EVALTRACE_COLLECT_TOKEN")


@pytest.mark.parametrize("option", ["--http", "--grpc"])
def test_beyond_loopback_without_a_token_is_refused(tmp_path: Path, option: str) -> None:
    # Refused while the options are checked, before anything is bound.
    other = "--grpc" if option == "--http" else "--http"
    result = _collect(option, "0.0.0.0:0", other, "off", env={}, folder=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        f"Error: {option} 0.0.0.0:0 listens beyond this machine without $EVALTRACE_COLLECT_TOKEN: "
        "set a token, or pass --allow-unauthenticated to accept anyone who can connect\n"
    )


def test_beyond_loopback_is_allowed_with_a_token_or_the_flag() -> None:
    defaults = ReceiverConfig()
    assert defaults.http is not None and defaults.grpc is not None
    assert defaults.http.is_loopback and defaults.grpc.is_loopback and defaults.token is None
    exposed = Address("0.0.0.0", 0)
    assert ReceiverConfig(http=exposed, grpc=None, token=SecretStr(TOKEN)).token is not None
    assert ReceiverConfig(http=exposed, grpc=None, allow_unauthenticated=True).token is None


@pytest.fixture(scope="module")
def with_token(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    folder = tmp_path_factory.mktemp("token") / "runs"
    with running_collector(folder, "--max-request-mb", "1", env={"EVALTRACE_COLLECT_TOKEN": TOKEN}) as collector:
        yield collector


@pytest.mark.parametrize("message", [bytes(2 * 1024 * 1024), b"\xff\xff\xff\xff"], ids=["oversized", "undecodable"])
def test_grpc_refuses_a_missing_token_before_reading_the_message(with_token: Collector, message: bytes) -> None:
    with grpc.insecure_channel(str(with_token.grpc), options=NO_PROXY) as channel:
        export = channel.unary_unary(EXPORT)  # raw bytes, no serializer
        with pytest.raises(grpc.RpcError) as error:
            export(message, timeout=30)
        assert error.value.code() is grpc.StatusCode.UNAUTHENTICATED, error.value
        assert error.value.details() == "a valid bearer token is required"
        with pytest.raises(grpc.RpcError) as error:  # with the token, the message is read
            export(message, timeout=30, metadata=[("authorization", f"Bearer {TOKEN}")])
        assert error.value.code() is not grpc.StatusCode.UNAUTHENTICATED


def _rss_kb(collector: Collector, field: str) -> int:
    status = Path(f"/proc/{collector.process.pid}/status").read_text().splitlines()
    return int(next(line for line in status if line.startswith(field + ":")).split()[1])


def _many_events(count: int) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest.FromString(_body(1, "eventful"))
    span = request.resource_spans[0].scope_spans[0].spans[0]
    for _ in range(count):
        span.events.add()
    return request


def test_a_million_empty_events_keep_the_span_limits(tmp_path: Path) -> None:
    body = _many_events(1_000_000).SerializeToString()
    assert len(body) < 2_100_000
    folder = tmp_path / "runs"
    with running_collector(folder) as collector:
        assert post(collector, "/v1/traces", _body(1, "warm-up"), PROTOBUF)[0] == 200
        before = _rss_kb(collector, "VmRSS")
        status, _, answer = post(collector, "/v1/traces", body, PROTOBUF)
        grown_mb = (_rss_kb(collector, "VmHWM") - before) / 1024
        assert collector.stop() == 0
    assert status == 200
    partial = ExportTraceServiceResponse.FromString(answer).partial_success
    assert partial.rejected_spans == 0  # a warning: the span was taken
    assert partial.error_message == "over the SDK limits, dropped: 999872 events"
    assert grown_mb < 120, f"grew by {grown_mb:.0f} MB for a 2 MB request"  # 330 MB before
    (row,) = [r for r in rows(folder) if r["name"] == "eventful 0"]
    assert (len(row["events"]), row["dropped_events_count"]) == (128, 1_000_000 - 128)


def test_the_queue_weighs_a_request_by_its_events() -> None:
    # Before, a span with any number of events counted as one item.
    intake = Intake(WorkQueue(capacity=100))  # no writer: the queue only fills
    intake.accept(Signal.TRACES, _many_events(99))  # 1 span + 99 events: taken, the queue was empty
    with pytest.raises(Refused):
        intake.accept(Signal.TRACES, ExportTraceServiceRequest.FromString(_body(1, "one more")))
    assert intake.queue.items == 100


def test_the_flag_lets_an_unauthenticated_listener_beyond_loopback_start(tmp_path: Path) -> None:
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: past the option checks, the bind fails
    # and says so. Nothing is bound or sent beyond loopback.
    args = ("--http", "192.0.2.1:0", "--grpc", "off", "--allow-unauthenticated")
    result = _collect(*args, env={}, folder=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("Error: --http 192.0.2.1:0: cannot listen there"), result.stderr


def test_links_and_attributes_keep_the_limits_the_environment_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_EVENT_COUNT_LIMIT", "5")
    request = _many_events(9)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    for n in range(200):
        span.attributes.add(key=f"a{n}").value.int_value = n
        span.events[0].attributes.add(key=f"e{n}").value.int_value = n
    for _ in range(130):
        span.links.add(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)))
    queue = WorkQueue(capacity=1000)
    answer = Intake(queue).accept(Signal.TRACES, request)
    assert answer.partial_success.error_message == "over the SDK limits, dropped: 4 events, 2 links, 144 attributes"
    (work,) = queue.take(1000) or []
    (decoded,) = work.items
    assert (len(decoded.events), len(decoded.links), len(decoded.attributes)) == (5, 128, 128)
    assert (decoded.dropped_events, decoded.dropped_links, decoded.dropped_attributes) == (4, 2, 72)
    assert len(decoded.events[0].attributes) == 128
    assert work.weight == 1 + 5 + 128
