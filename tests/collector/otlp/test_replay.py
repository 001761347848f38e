"""`evaltrace replay`: a run recorded by the real exporters, sent as a real subprocess to OTLP receivers.

The receiver here stands at Langfuse's OTLP path (`/api/public/otel/v1/traces`) and refuses requests
without Langfuse's Basic auth header; it decodes the protobuf requests with the official classes, and
every field the store keeps is compared with what arrived. `test_replay_phoenix.py` sends to a real
Phoenix.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from _send_fixtures import OtlpReceiver, attributes, evaltrace, record_run, running_receiver

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans, split_signals
from evaltrace.collector.runfiles.spans import Span

LANGFUSE_PATH = "/api/public/otel"
SECRET = base64.b64encode(b"pk-lf-public:sk-lf-very-secret").decode()
AUTH = ("Authorization", f"Basic {SECRET}")
_KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    record_run(folder)
    return folder


def stored_spans(runs: Path) -> dict[str, Span]:
    span_files, _ = split_signals(resolve_paths([runs]))
    return {span.span_id: span for span in read_spans(span_files)}


def received_span(resource_spans: Any, scope_spans: Any, span: Any) -> dict[str, Any]:
    """A received span in the shape of the store's `Span`, for comparing field by field."""
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex() or None,
        "name": span.name,
        "kind": _KINDS[span.kind],
        "status_code": _STATUS[span.status.code],
        "status_message": span.status.message or None,
        "start_time_ns": span.start_time_unix_nano,
        "end_time_ns": span.end_time_unix_nano,
        "attributes": attributes(span.attributes),
        "events": [(e.name, e.time_unix_nano, attributes(e.attributes)) for e in span.events],
        "links": [(lk.trace_id.hex(), lk.span_id.hex(), attributes(lk.attributes)) for lk in span.links],
        "resource": attributes(resource_spans.resource.attributes),
        "scope": (scope_spans.scope.name, scope_spans.scope.version or None),
        "dropped": (span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count),
    }


def expected_span(span: Span) -> dict[str, Any]:
    return {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "kind": span.kind,
        "status_code": span.status_code,
        "status_message": span.status_message,
        "start_time_ns": span.start_time_ns,
        "end_time_ns": span.end_time_ns,
        "attributes": span.attributes,
        "events": [(e.name, e.time_ns, e.attributes) for e in span.events],
        "links": [(lk.trace_id, lk.span_id, lk.attributes) for lk in span.links],
        "resource": span.resource,
        "scope": (span.scope_name, span.scope_version),
        "dropped": (span.dropped_attributes_count, span.dropped_events_count, span.dropped_links_count),
    }


def test_the_recording_holds_what_replay_must_keep(runs: Path) -> None:
    # Guards the comparison below: every field it checks is really present in the store.
    spans = stored_spans(runs)
    assert len(spans) == 4 and len({s.trace_id for s in spans.values()}) == 2
    by_name = {s.name: s for s in spans.values()}
    assert by_name["chat fake-model"].events and by_name["invoke_agent second"].links
    assert by_name["execute_tool get_weather"].dropped_attributes_count == 3
    assert by_name["execute_tool get_weather"].status_message == "tool failed"
    assert len(by_name["invoke_agent first"].attributes["input.value"]) > 1024
    assert {s.scope_name for s in spans.values()} == {"agent.lib", "tool.lib"}


def test_replay_to_a_langfuse_style_endpoint_delivers_every_field_and_the_auth_header(runs: Path) -> None:
    receiver = OtlpReceiver(prefix=LANGFUSE_PATH, required_header=AUTH)
    with running_receiver(receiver):
        done = evaltrace(
            "replay",
            runs,
            "--endpoint",
            receiver.endpoint,
            "--header",
            "x-langfuse-ingestion-version=4",
            # The secret comes from the standard variable (percent-encoded as the OTel spec writes it).
            env={"OTEL_EXPORTER_OTLP_HEADERS": f"Authorization=Basic%20{SECRET}"},
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"sent 2 traces, 4 spans, 1 log record to {receiver.endpoint} over http/protobuf"
    assert SECRET not in done.stdout + done.stderr
    assert {r.path for r in receiver.requests} == {f"{LANGFUSE_PATH}/v1/traces", f"{LANGFUSE_PATH}/v1/logs"}
    for request in receiver.requests:
        assert request.headers["authorization"] == AUTH[1]
        assert request.headers["x-langfuse-ingestion-version"] == "4"
    got = {s["span_id"]: s for s in (received_span(*found) for found in receiver.spans())}
    assert got == {span_id: expected_span(span) for span_id, span in stored_spans(runs).items()}


def test_replay_sends_the_log_records_as_recorded(runs: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        done = evaltrace("replay", runs, "--endpoint", receiver.endpoint + "/")
    assert done.returncode == 0, done.stderr
    [(resource_logs, scope_logs, record)] = receiver.log_records()
    chat = next(s for s in stored_spans(runs).values() if s.name == "chat fake-model")
    assert (record.trace_id.hex(), record.span_id.hex()) == (chat.trace_id, chat.span_id)
    assert record.event_name == "gen_ai.user.message"
    assert record.severity_number == 9 and record.severity_text == "INFO"
    assert attributes([*_body_pairs(record)]) == {"content": "weather in Rome?", "role": "user"}
    assert attributes(record.attributes) == {"gen_ai.provider.name": "openai"}
    assert chat.start_time_ns <= record.time_unix_nano <= record.observed_time_unix_nano <= chat.end_time_ns
    assert (scope_logs.scope.name, scope_logs.scope.version) == ("genai.events", "2.0")
    assert attributes(resource_logs.resource.attributes)["service.name"] == "replay-app"


def _body_pairs(record: Any) -> Any:
    return record.body.kvlist_value.values


def test_replay_in_small_batches_splits_requests_and_loses_nothing(runs: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        done = evaltrace("replay", runs, "--endpoint", receiver.endpoint, "--no-logs", "--batch-size", "1")
    assert done.returncode == 0, done.stderr
    assert len(receiver.requests) == 4 and not receiver.log_records()
    assert sorted(s.span_id.hex() for _, _, s in receiver.spans()) == sorted(stored_spans(runs))


def test_dry_run_counts_and_sends_nothing(runs: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        done = evaltrace("replay", runs, "--endpoint", receiver.endpoint, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "would send 2 traces, 4 spans, 1 log record (dry run: nothing sent)"
    assert receiver.requests == []


def test_unreachable_endpoint_is_one_error_line_with_exit_2(runs: Path, tmp_path: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        port = receiver.port  # free again once the receiver stops: nothing listens there
    done = evaltrace("replay", runs, "--endpoint", f"http://127.0.0.1:{port}", "--timeout", "1", "--no-logs")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --endpoint http://127.0.0.1:{port}/v1/traces: could not connect: is an OTLP/HTTP receiver "
        "listening there?; spans not delivered"
    ]


def test_a_refusing_backend_is_named_with_its_status_and_no_secret(runs: Path) -> None:
    receiver = OtlpReceiver(prefix=LANGFUSE_PATH, required_header=AUTH)
    with running_receiver(receiver):
        done = evaltrace(
            "replay", runs, "--endpoint", receiver.endpoint, "--header", "Authorization=Basic d3Jvbmc6a2V5"
        )
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    # The logs endpoint is asked first (an empty request), so nothing is sent before the refusal.
    assert (
        line
        == f"Error: --endpoint {receiver.endpoint}/v1/logs: the backend answered HTTP 401 Unauthorized; nothing sent"
    )
    assert receiver.requests == []
    assert "d3Jvbmc6a2V5" not in done.stdout + done.stderr


def test_a_backend_without_logs_gets_a_hint(runs: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        done = evaltrace("replay", runs, "--endpoint", receiver.endpoint + "/v1/traces")
    assert done.returncode == 0, done.stderr  # a signal URL is taken as the base of both signals
    traces_only = OtlpReceiver(serve_logs=False)
    with running_receiver(traces_only):
        done = evaltrace("replay", runs, "--endpoint", traces_only.endpoint)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line == (
        f"Error: --endpoint {traces_only.endpoint}/v1/logs: the backend answered HTTP 404 Not Found; nothing sent "
        "(does the backend take OTLP logs? --no-logs sends spans only)"
    )
    assert traces_only.requests == []  # found out before any span was sent: a second run sends none twice


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--endpoint", "ftp://127.0.0.1:1"],
            "Error: --endpoint ftp://127.0.0.1:1: expected an http:// or https:// URL",
        ),
        (["--endpoint", "http://127.0.0.1:1", "--protocol", "thrift"], "Error: --protocol 'thrift': not a protocol"),
        (["--endpoint", "http://127.0.0.1:1", "--header", "no-equals"], "Error: --header: expected NAME=VALUE"),
        ([], "Error: --endpoint URL is required"),
    ],
)
def test_bad_options_are_refused_before_reading(runs: Path, args: list[str], message: str) -> None:
    done = evaltrace("replay", runs, *args)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(message), line


def test_a_damaged_run_file_is_named_in_one_error_line(runs: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "damaged.parquet"
    damaged.write_bytes(next(runs.glob("*.parquet")).read_bytes()[:300])
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        done = evaltrace("replay", damaged, "--endpoint", receiver.endpoint)
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: {damaged}")
    assert receiver.requests == []


def test_unreachable_grpc_endpoint_is_one_error_line_with_exit_2(runs: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        port = receiver.port
    done = evaltrace("replay", runs, "--endpoint", f"http://127.0.0.1:{port}", "--protocol", "grpc", "--timeout", "1")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --endpoint http://127.0.0.1:{port}: could not connect over gRPC (status UNAVAILABLE): is an OTLP "
        "receiver listening there?; nothing sent"
    ]


def test_a_log_record_in_two_files_is_sent_once(runs: Path, tmp_path: Path) -> None:
    copied = tmp_path / "runs"
    copied.mkdir()
    for path in runs.glob("*.parquet"):
        (copied / path.name).write_bytes(path.read_bytes())
    [logs] = runs.glob("*.logs.parquet")
    (copied / ("copy-" + logs.name)).write_bytes(logs.read_bytes())  # as a crashed compaction may leave
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        done = evaltrace("replay", copied, "--endpoint", receiver.endpoint)
    assert done.returncode == 0, done.stderr
    assert len(receiver.log_records()) == 1
    assert done.stderr.strip() == "1 log record found twice in the files, sent once"


def test_secrets_in_the_endpoint_url_are_never_printed(runs: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        port = receiver.port
    url = f"http://user:hunter2@127.0.0.1:{port}/otel?api_key=s3cr3t"
    done = evaltrace("replay", runs, "--endpoint", url, "--timeout", "1", "--no-logs")
    assert done.returncode == 2
    assert done.stderr.startswith(f"Error: --endpoint http://127.0.0.1:{port}/otel/v1/traces: could not connect")
    assert "hunter2" not in done.stderr and "s3cr3t" not in done.stderr
