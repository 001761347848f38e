"""`score --send-results phoenix:URL` against a real Phoenix server: scores become span annotations.

Phoenix takes no OTLP log records, so results go through its REST API as annotations of the
scored traces' root spans. The shipped sample run is first sent to Phoenix with `evaltrace replay`
(Phoenix annotates only spans it holds), then scored by the real CLI; Phoenix's own REST API must
then list exactly one annotation per (trace, scorer), with the label, score and reason of the JSON
report written by the same command. Scoring again updates the annotations instead of adding some.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from _phoenix import PhoenixServer, running_phoenix
from _send_fixtures import evaltrace, record_run
from _serving import serving

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_RUNS = ROOT / "samples" / "runs"
PROJECT = "default"  # the sample run's resource names no project
LABELS = {True: "pass", False: "fail", None: "not_applicable"}


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


def annotations(phoenix: PhoenixServer, span_ids: list[str]) -> list[dict[str, Any]]:
    """The span annotations Phoenix holds for `span_ids`, read through its REST API."""
    url = f"{phoenix.base_url}/v1/projects/{PROJECT}/span_annotations"
    with httpx.Client(trust_env=False, timeout=10) as client:
        reply = client.get(url, params={"span_ids": span_ids, "limit": 1000})
    reply.raise_for_status()
    data: list[dict[str, Any]] = reply.json()["data"]
    return data


def score_into_phoenix(phoenix: PhoenixServer, folder: Path) -> tuple[dict[str, Any], str]:
    """Score the sample run with --send-results phoenix:URL; the JSON report and stderr."""
    spec = (ROOT / "samples" / "evals.yaml").read_text()
    (folder / "evals.yaml").write_text(spec.replace("[tool_call_validity]", "[tool_call_validity, cities_named]"))
    done = evaltrace(
        "score", SAMPLE_RUNS, "--spec", folder / "evals.yaml", "--json", folder / "report.json",
        "--plugin", ROOT / "samples" / "scorers.py", "--no-store", "--send-results", f"phoenix:{phoenix.base_url}",
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return json.loads((folder / "report.json").read_text()), done.stderr


def test_each_score_is_one_annotation_of_its_traces_root_span(phoenix: PhoenixServer, tmp_path: Path) -> None:
    spans = list(read_spans(resolve_paths([SAMPLE_RUNS])))
    roots = {s.trace_id: s.span_id for s in spans if s.parent_span_id is None}
    sent = evaltrace("replay", SAMPLE_RUNS, "--endpoint", phoenix.base_url, "--no-logs")
    assert sent.returncode == 0, sent.stderr
    for trace_id in roots:
        count = sum(1 for s in spans if s.trace_id == trace_id)
        assert len(phoenix.wait_for_spans(PROJECT, trace_id, count)) == count, phoenix.log_tail()

    (tmp_path / "first").mkdir()
    report, stderr = score_into_phoenix(phoenix, tmp_path / "first")
    expected = [(e, sample, s) for e in report["entries"] for sample in e["samples"] for s in sample["scores"]]
    assert len(expected) >= 10
    assert f"results sent: {len(expected)} span annotations to {phoenix.base_url}" in stderr
    got = annotations(phoenix, list(roots.values()))
    assert Counter((a["span_id"], a["name"]) for a in got) == Counter(
        (roots[sample["trace_id"]], score["scorer"]) for _, sample, score in expected
    ), phoenix.log_tail()
    by_key = {(a["span_id"], a["name"]): a for a in got}
    for entry, sample, score in expected:
        annotation = by_key[(roots[sample["trace_id"]], score["scorer"])]
        result = annotation["result"]
        assert (result["label"], result["score"], result["explanation"]) == (
            LABELS[score["passed"]], score["value"], score["reason"]
        )  # fmt: skip
        assert annotation["annotator_kind"] == "CODE" and annotation["identifier"] == "evaltrace"
        assert annotation["metadata"]["evaltrace.case_id"] == entry["case_id"]
    assert {a["result"]["label"] for a in got} >= {"pass", "fail"}

    (tmp_path / "again").mkdir()
    score_into_phoenix(phoenix, tmp_path / "again")  # updates, does not add
    again = annotations(phoenix, list(roots.values()))
    assert Counter((a["span_id"], a["name"]) for a in again) == Counter((a["span_id"], a["name"]) for a in got)


def test_traces_phoenix_does_not_hold_are_one_error_line(phoenix: PhoenixServer, tmp_path: Path) -> None:
    record_run(tmp_path / "runs", project="never-sent")  # recorded here, never sent to Phoenix
    done = evaltrace("score", tmp_path / "runs", "--no-store", "--send-results", f"phoenix:{phoenix.base_url}")
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert re.fullmatch(
        rf"Error: --send-results {re.escape(phoenix.base_url)}/v1/span_annotations: the backend answered HTTP 404 "
        r"Not Found \(Phoenix must hold the scored traces first: forward them or send them with evaltrace replay\); "
        r"\d+ span annotations? not delivered",
        line,
    ), line
    assert "results sent" not in done.stdout + done.stderr


class _PhoenixStandIn(BaseHTTPRequestHandler):
    """Answers like Phoenix's REST API and keeps every request's method, path, Authorization and body."""

    seen: list[tuple[str, str, str | None, Any]]

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, self.headers.get("Authorization"), None))
        self._answer({"data": [], "next_cursor": None})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.seen.append(("POST", self.path, self.headers.get("Authorization"), body))
        self._answer({"data": [{"id": str(i)} for i, _ in enumerate(body["data"])]})

    def _answer(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.mark.parametrize("key", ["phx-key-123", ""])
def test_phoenix_api_key_is_sent_as_bearer_only_when_set(key: str) -> None:
    seen: list[tuple[str, str, str | None, Any]] = []
    handler = type("Handler", (_PhoenixStandIn,), {"seen": seen})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as port:
        done = evaltrace(
            "score", SAMPLE_RUNS, "--no-store", "--send-results", f"phoenix:http://127.0.0.1:{port}",
            env={"PHOENIX_API_KEY": key},
        )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    assert seen[0][:2] == ("GET", "/v1/projects?limit=1")
    posts = [s for s in seen if s[0] == "POST"]
    assert posts and {path for _, path, _, _ in posts} == {"/v1/span_annotations?sync=true"}
    assert {auth for _, _, auth, _ in seen} == {f"Bearer {key}" if key else None}
    assert key == "" or key not in done.stdout + done.stderr


def test_a_trace_without_a_root_span_is_counted_not_sent() -> None:
    from evaltrace.collector.otlp.send.annotations import PhoenixAnnotations
    from evaltrace.collector.otlp.send.results import EvaluationResult

    seen: list[tuple[str, str, str | None, Any]] = []
    handler = type("Handler", (_PhoenixStandIn,), {"seen": seen})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as port:
        sink = PhoenixAnnotations(f"http://127.0.0.1:{port}", "--send-results", 5.0)
        sink.add(EvaluationResult(name="answer", trace_id="a" * 32, span_id="1" * 16, score_label="pass", judged=True))
        sink.add(EvaluationResult(name="answer", trace_id="b" * 32, span_id=None, score_label="fail"))
        sink.flush()
        sink.close()
    ((_, _, _, body),) = seen
    assert [(a["span_id"], a["annotator_kind"], a["result"]["label"]) for a in body["data"]] == [
        ("1" * 16, "LLM", "pass")
    ]
    assert sink.summary() == (
        f"results sent: 1 span annotation to http://127.0.0.1:{port} (1 not sent: their trace has no root span "
        "to annotate)"
    )
