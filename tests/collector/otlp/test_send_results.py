"""`evaltrace score --send-results URL`: one `gen_ai.evaluation.result` event per score, on its trace.

The shipped sample run is scored (a real subprocess) with the sample spec, the sample custom scorer
(values and "does not apply") and a scorer that raises (an error result), while a local OTLP/HTTP
receiver decodes what arrives. Every score of the JSON report written by the same command must
arrive exactly once, with the GenAI conventions' attributes, the evaluated trace's id and its root
span's id, which are checked against the recorded spans themselves.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from _send_fixtures import OtlpReceiver, attributes, evaltrace, running_receiver

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_RUNS = ROOT / "samples" / "runs"
EXPLODING_SCORER = """
from typing import Any, ClassVar
from evaltrace.evaluators import Score, Scorer, register

@register
class Explodes(Scorer):
    name: ClassVar[str] = "explodes"

    def score(self, trace: Any, case: Any | None = None) -> Score:
        raise RuntimeError("the scorer broke")
"""


@pytest.fixture(scope="module")
def scoring(tmp_path_factory: pytest.TempPathFactory) -> tuple[OtlpReceiver, dict[str, Any], str]:
    """Score the sample run with --send-results; the receiver, the JSON report and the command's stderr."""
    folder = tmp_path_factory.mktemp("send-results")
    (folder / "explodes.py").write_text(EXPLODING_SCORER)
    spec = (ROOT / "samples" / "evals.yaml").read_text()
    assert "scorers: [tool_call_validity]" in spec
    (folder / "evals.yaml").write_text(
        spec.replace("[tool_call_validity]", "[tool_call_validity, cities_named, explodes]")
    )
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        done = evaltrace(
            "score", SAMPLE_RUNS, "--spec", folder / "evals.yaml", "--json", folder / "report.json",
            "--plugin", ROOT / "samples" / "scorers.py", "--plugin", folder / "explodes.py",
            "--send-results", receiver.endpoint, "--header", "x-team=evals", "--no-store",
        )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr  # the gate may fail: the scorer that raises fails entries
    return receiver, json.loads((folder / "report.json").read_text()), done.stderr


def report_scores(report: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    return [
        (entry, sample, score)
        for entry in report["entries"]
        for sample in entry["samples"]
        for score in sample["scores"]
    ]


def event_key(record: Any) -> tuple[str, str, str]:
    """(trace id, case id, scorer) of a received event."""
    attrs = attributes(record.attributes)
    return record.trace_id.hex(), attrs["evaltrace.case_id"], attrs["gen_ai.evaluation.name"]


def test_every_score_arrives_once_as_an_evaluation_event(scoring: tuple[OtlpReceiver, dict[str, Any], str]) -> None:
    receiver, report, stderr = scoring
    records = receiver.log_records()
    expected = report_scores(report)
    assert len(expected) >= 20 and {"explodes", "cities_named", "tool_call_validity"} <= {
        s["scorer"] for *_, s in expected
    }
    assert len(records) == len(expected)
    assert {r.path for r in receiver.requests} == {"/v1/logs"}
    assert all(r.headers["x-team"] == "evals" for r in receiver.requests)
    assert all(record.event_name == "gen_ai.evaluation.result" for _, _, record in records)
    sent = Counter(event_key(record) for _, _, record in records)
    assert sent == Counter((sample["trace_id"], entry["case_id"], score["scorer"]) for entry, sample, score in expected)
    assert f"results sent: {len(expected)} evaluation events to {receiver.endpoint}/v1/logs" in stderr


def test_events_carry_the_conventions_attributes(scoring: tuple[OtlpReceiver, dict[str, Any], str]) -> None:
    receiver, report, _ = scoring
    by_key = {event_key(record): attributes(record.attributes) for _, _, record in receiver.log_records()}
    labels = {True: "pass", False: "fail", None: "not_applicable"}
    for entry, sample, score in report_scores(report):
        attrs = by_key[(sample["trace_id"], entry["case_id"], score["scorer"])]
        wanted = {
            "gen_ai.evaluation.name": score["scorer"],
            "gen_ai.evaluation.score.label": labels[score["passed"]],
            "gen_ai.evaluation.score.value": score["value"],
            "gen_ai.evaluation.explanation": score["reason"],
            "error.type": score["error"],
            "evaltrace.case_id": entry["case_id"],
        }
        assert attrs == {k: v for k, v in wanted.items() if v is not None}
    kinds = Counter(a["gen_ai.evaluation.score.label"] for a in by_key.values())
    assert kinds["pass"] and kinds["fail"]
    errors = [a for a in by_key.values() if "error.type" in a]
    assert errors and all(
        a["error.type"] == "RuntimeError" and a["gen_ai.evaluation.name"] == "explodes" for a in errors
    )
    assert any(isinstance(a.get("gen_ai.evaluation.score.value"), float) for a in by_key.values())


def test_events_sit_on_the_root_span_of_the_scored_trace(scoring: tuple[OtlpReceiver, dict[str, Any], str]) -> None:
    receiver, _, _ = scoring
    spans = list(read_spans(resolve_paths([SAMPLE_RUNS])))
    roots = {s.trace_id: s.span_id for s in spans if s.parent_span_id is None}
    assert len(roots) == len({s.trace_id for s in spans})  # one root per sample trace
    for resource_logs, scope_logs, record in receiver.log_records():
        assert record.span_id.hex() == roots[record.trace_id.hex()]
        assert record.flags & 1  # sampled
        assert scope_logs.scope.name == "evaltrace"
        assert attributes(resource_logs.resource.attributes)["service.name"] == "evaltrace"


def test_an_unreachable_results_backend_stops_before_scoring(tmp_path: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        port = receiver.port  # nothing listens there once the receiver stops
    report = tmp_path / "report.json"
    done = evaltrace(
        "score", SAMPLE_RUNS, "--json", report, "--no-store", "--send-results", f"http://127.0.0.1:{port}",
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --send-results http://127.0.0.1:{port}/v1/logs: could not connect: is an OTLP/HTTP receiver "
        "listening there?; nothing sent"
    ]
    assert not report.exists() and done.stdout == ""


def test_sending_options_without_send_results_are_refused() -> None:
    done = evaltrace("score", SAMPLE_RUNS, "--no-store", "--header", "a=b")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: --protocol and --header say how to send results: pass --send-results URL"
    ]


def test_each_turn_of_a_conversation_goes_to_its_own_trace() -> None:
    from evaltrace.evaluators.results.report.model import EntryResult, SampleResult, ScoreResult
    from evaltrace.evaluators.results.report.results_writer import evaluation_results

    first, second = "a" * 32, "b" * 32
    sample = SampleResult(
        trace_id=first,
        trace_ids=[first, second],
        root_span_ids=["1" * 16, None],  # the second trace has no root span
        status="failed",
        passed=False,
        scores=[
            ScoreResult(scorer="answer", passed=True, value=1.0, turn=1),
            ScoreResult(scorer="answer", passed=False, value=0.0, reason="wrong city", turn=2),
            ScoreResult(scorer="turns", passed=False, reason="no trace for turn 3", turn=3),
        ],
    )
    entry = EntryResult(case_id="chat", trace_id=first, passed=False, status="failed", pass_rate=0.0, samples=[sample])
    got = [(r.trace_id, r.span_id, r.name, r.score_label, r.extra["evaltrace.turn"]) for r in evaluation_results(entry)]
    assert got == [
        (first, "1" * 16, "answer", "pass", 1),
        (second, None, "answer", "fail", 2),
        (first, "1" * 16, "turns", "fail", 3),  # a turn without a trace: on the conversation's first
    ]


def test_results_over_grpc_carry_the_metadata_and_refusals_are_named(tmp_path: Path) -> None:
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc

    got: list[tuple[dict[str, str], Any]] = []

    class Logs(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:  # the name the service defines
            metadata = dict(context.invocation_metadata())
            if metadata.get("authorization") != "Bearer right":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
            got.append((metadata, request))
            return logs_service_pb2.ExportLogsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        args = ("score", SAMPLE_RUNS, "--no-store", "--send-results", endpoint, "--protocol", "grpc")
        done = evaltrace(*args, env={"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20right"})
        refused = evaltrace(*args, "--header", "Authorization=Bearer wrong")
    finally:
        server.stop(None)
    assert done.returncode in (0, 1), done.stderr
    records = [r for _, request in got for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    assert records and all(r.event_name == "gen_ai.evaluation.result" and len(r.trace_id) == 16 for r in records)
    assert f"results sent: {len(records)} evaluation events to {endpoint}" in done.stderr
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"Error: --send-results {endpoint}: the backend answered gRPC status UNAUTHENTICATED; nothing sent"
    ]
    assert "wrong" not in refused.stderr


def test_a_backend_without_logs_is_named_before_scoring() -> None:
    traces_only = OtlpReceiver(serve_logs=False)
    with running_receiver(traces_only):
        done = evaltrace("score", SAMPLE_RUNS, "--no-store", "--send-results", traces_only.endpoint)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --send-results {traces_only.endpoint}/v1/logs: the backend answered HTTP 404 Not Found; nothing "
        "sent (does the backend take OTLP logs? results are log records; --send-results phoenix:URL or "
        "langfuse:URL use those backends' APIs)"
    ]
