"""`score --send-results langfuse:URL`: one Langfuse score per (trace, scorer), through its public API.

The stand-in server checks what Langfuse documents for `POST /api/public/scores` (JSON body with
`traceId`, `name`, `value` numeric for NUMERIC or a string for CATEGORICAL, `dataType`, optional
`id` / `comment` / `metadata`, nothing else) and `GET /api/public/projects`, both with HTTP Basic
auth of the project's public and secret key, and answers as Langfuse does (200 with the score's
id, 401 without the keys, 400 for a malformed body). It refuses the first score with 429 and
`Retry-After`, as a rate-limited Langfuse does, so the retry is exercised too. The shipped sample
run is scored by the real CLI, and every score of the JSON report written by the same command
must arrive once, on its OTel trace id.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _send_fixtures import evaltrace
from _serving import serving
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from readme_blocks import bash_block, run_lines

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans

ROOT = Path(__file__).resolve().parents[3]
SAMPLE_RUNS = ROOT / "samples" / "runs"
PUBLIC, SECRET = "pk-lf-test-1234", "sk-lf-test-5678"
KEYS = {"LANGFUSE_PUBLIC_KEY": PUBLIC, "LANGFUSE_SECRET_KEY": SECRET}
OTLP_TRACES = "/api/public/otel/v1/traces"
SCORE_FIELDS = {"id", "traceId", "name", "value", "dataType", "comment", "metadata", "observationId", "configId"}


@dataclass
class Langfuse:
    """What the stand-in was sent, and how it answers."""

    scores: list[dict[str, Any]] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    """(method, path) of every request."""
    problems: list[str] = field(default_factory=list)
    """Requests that broke the documented shape (each was answered 400 or 401)."""
    span_ids: list[str] = field(default_factory=list)
    """Spans received on Langfuse's OTLP endpoint."""
    ingestion_versions: set[str | None] = field(default_factory=set)
    """The `x-langfuse-ingestion-version` of each OTLP request."""
    rate_limit_first: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)


def score_problem(body: Any) -> str | None:
    """Why `body` is not a score Langfuse's `POST /api/public/scores` takes, or None."""
    if not isinstance(body, dict):
        return "not a JSON object"
    if set(body) - SCORE_FIELDS:
        return f"unknown fields {sorted(set(body) - SCORE_FIELDS)}"
    if not isinstance(body.get("traceId"), str) or not isinstance(body.get("name"), str) or not body["name"]:
        return "traceId and name are required strings"
    kinds = {"NUMERIC": (int, float), "BOOLEAN": (int, float), "CATEGORICAL": (str,)}
    if body.get("dataType") not in kinds or not isinstance(body.get("value"), kinds[body["dataType"]]):
        return f"value {body.get('value')!r} does not fit dataType {body.get('dataType')!r}"
    if "metadata" in body and not isinstance(body["metadata"], dict):
        return "metadata must be an object"
    return None


def _handler(state: Langfuse) -> type[BaseHTTPRequestHandler]:
    auth = "Basic " + base64.b64encode(f"{PUBLIC}:{SECRET}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(("GET", self.path))
            if self.headers.get("Authorization") != auth:
                return self._answer(401, {"message": "Invalid credentials"})
            if self.path != "/api/public/projects":
                return self._answer(404, {"message": "not found"})
            self._answer(200, {"data": [{"id": "project-1", "name": "evals"}]})

        def do_POST(self) -> None:
            state.requests.append(("POST", self.path))
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Authorization") != auth:
                state.problems.append("no Basic auth")
                return self._answer(401, {"message": "Invalid credentials"})
            if self.path == OTLP_TRACES:
                return self._take_spans(body)
            if self.path != "/api/public/scores":
                return self._answer(404, {"message": "not found"})
            with state.lock:
                if state.rate_limit_first:
                    state.rate_limit_first = False
                    return self._answer(429, {"message": "rate limited"}, {"Retry-After": "1"})
            problem = "content type" if self.headers.get("Content-Type") != "application/json" else None
            score = json.loads(body) if problem is None else None
            problem = problem or score_problem(score)
            if problem is not None:
                state.problems.append(problem)
                return self._answer(400, {"message": problem})
            state.scores.append(score)
            self._answer(200, {"id": score.get("id", "generated")})

        def _take_spans(self, body: bytes) -> None:
            request = ExportTraceServiceRequest.FromString(body)
            spans = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
            state.span_ids += [s.span_id.hex() for s in spans]
            state.ingestion_versions.add(self.headers.get("x-langfuse-ingestion-version"))
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def _answer(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            return None

    return Handler


@contextmanager
def running_langfuse(state: Langfuse) -> Iterator[str]:
    """The stand-in serving on 127.0.0.1; yields its base URL."""
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Langfuse, dict[str, Any], str, str]:
    """The sample run scored with --send-results langfuse:URL: the stand-in, the JSON report, stderr, the URL."""
    folder = tmp_path_factory.mktemp("langfuse")
    spec = (ROOT / "samples" / "evals.yaml").read_text()
    (folder / "evals.yaml").write_text(spec.replace("[tool_call_validity]", "[tool_call_validity, cities_named]"))
    state = Langfuse()
    with running_langfuse(state) as url:
        done = evaltrace(
            "score", SAMPLE_RUNS, "--spec", folder / "evals.yaml", "--json", folder / "report.json",
            "--plugin", ROOT / "samples" / "scorers.py", "--no-store", "--send-results", f"langfuse:{url}",
            env=KEYS,
        )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return state, json.loads((folder / "report.json").read_text()), done.stderr, url


def test_every_score_reaches_langfuse_once_on_its_otel_trace_id(
    scored: tuple[Langfuse, dict[str, Any], str, str],
) -> None:
    state, report, stderr, url = scored
    expected = [(e, sample, s) for e in report["entries"] for sample in e["samples"] for s in sample["scores"]]
    assert len(expected) >= 10 and {"cities_named", "tool_call_validity"} <= {s["scorer"] for *_, s in expected}
    assert state.problems == []
    assert ("GET", "/api/public/projects") in state.requests  # the keys were checked before scoring
    assert len(state.scores) == len(expected)  # the rate-limited first score was sent again, once
    got = Counter((s["traceId"], s["name"]) for s in state.scores)
    assert got == Counter((sample["trace_id"], score["scorer"]) for _, sample, score in expected)
    assert len({s["id"] for s in state.scores}) == len(state.scores)
    assert f"results sent: {len(expected)} scores to {url}" in stderr


def test_each_score_carries_value_label_and_reason(scored: tuple[Langfuse, dict[str, Any], str, str]) -> None:
    state, report, _, _ = scored
    labels = {True: "pass", False: "fail", None: "not_applicable"}
    sent = {(s["traceId"], s["name"]): s for s in state.scores}
    expected = [(e, sample, s) for e in report["entries"] for sample in e["samples"] for s in sample["scores"]]
    for entry, sample, score in expected:
        got = sent[(sample["trace_id"], score["scorer"])]
        label = labels[score["passed"]]
        if score["value"] is None:
            assert (got["dataType"], got["value"]) == ("CATEGORICAL", label)
        else:
            assert (got["dataType"], got["value"]) == ("NUMERIC", score["value"])
        assert got.get("comment") == score["reason"]
        assert got["metadata"]["label"] == label and got["metadata"]["evaltrace.case_id"] == entry["case_id"]
    assert {s["dataType"] for s in state.scores} == {"NUMERIC", "CATEGORICAL"}


def test_scoring_again_sends_the_same_score_ids(scored: tuple[Langfuse, dict[str, Any], str, str]) -> None:
    # Langfuse documents the score id as an idempotency key: the same ids update the scores.
    first, *_ = scored
    state = Langfuse(rate_limit_first=False)
    with running_langfuse(state) as url:
        done = evaltrace("score", SAMPLE_RUNS, "--no-store", "--send-results", f"langfuse:{url}", env=KEYS)
    assert done.returncode in (0, 1), done.stderr
    again = {(s["traceId"], s["name"]): s["id"] for s in state.scores}
    before = {(s["traceId"], s["name"]): s["id"] for s in first.scores}
    assert again and all(before[key] == score_id for key, score_id in again.items() if key in before)


def test_wrong_keys_stop_before_scoring_and_are_never_shown(tmp_path: Path) -> None:
    state = Langfuse()
    report = tmp_path / "report.json"
    with running_langfuse(state) as url:
        done = evaltrace(
            "score", SAMPLE_RUNS, "--no-store", "--json", report, "--send-results", f"langfuse:{url}",
            env={"LANGFUSE_PUBLIC_KEY": PUBLIC, "LANGFUSE_SECRET_KEY": "sk-lf-wrong-secret"},
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --send-results {url}/api/public/projects: the backend answered HTTP 401 Unauthorized (are "
        "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY keys of this Langfuse project?); nothing sent"
    ]
    assert state.requests == [("GET", "/api/public/projects")] and not report.exists()
    assert "wrong-secret" not in done.stderr + done.stdout


def test_missing_keys_are_named() -> None:
    done = evaltrace(
        "score", SAMPLE_RUNS, "--no-store", "--send-results", "langfuse:https://cloud.langfuse.com",
        env={"LANGFUSE_PUBLIC_KEY": "", "LANGFUSE_SECRET_KEY": ""},
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: --send-results https://cloud.langfuse.com: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
        "(the Langfuse project's API keys)"
    ]


@pytest.mark.parametrize(
    ("value", "env"),
    [
        ("langfuse:http://192.0.2.7:3000", KEYS),
        ("phoenix:http://192.0.2.7:6006", {"PHOENIX_API_KEY": "phx-secret"}),
    ],
)
def test_a_key_never_goes_over_plain_http_to_another_host(value: str, env: dict[str, str]) -> None:
    done = evaltrace("score", SAMPLE_RUNS, "--no-store", "--send-results", value, env=env)
    assert done.returncode == 2
    url = value.partition(":")[2]
    assert done.stderr.splitlines() == [
        f"Error: --send-results {url}: refusing to send its key unencrypted over http:// to 192.0.2.7: use "
        "https:// or a loopback address"
    ]


def test_a_redirect_is_not_followed(tmp_path: Path) -> None:
    elsewhere = Langfuse()

    class Redirects(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(307)
            self.send_header("Location", f"{other}/api/public/projects")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    with running_langfuse(elsewhere) as other, serving(ThreadingHTTPServer(("127.0.0.1", 0), Redirects)) as port:
        done = evaltrace("score", SAMPLE_RUNS, "--no-store", "--send-results", f"langfuse:http://127.0.0.1:{port}",
                         env=KEYS)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --send-results http://127.0.0.1:{port}/api/public/projects: the backend answered HTTP 307 "
        "Temporary Redirect (a redirect is not followed: give the URL it points to); nothing sent"
    ]
    assert elsewhere.requests == []


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--send-results", "zipkin:http://127.0.0.1:9411"],
            "Error: --send-results: unknown kind 'zipkin': expected [KIND:]URL, KIND one of otlp, phoenix, langfuse "
            "(e.g. phoenix:http://127.0.0.1:6006; a bare http(s):// URL is otlp)",
        ),
        (
            ["--send-results", "phoenix:http://127.0.0.1:6006", "--header", "a=b"],
            "Error: --protocol and --header apply to OTLP results, not to --send-results phoenix:URL",
        ),
    ],
)
def test_bad_kinds_and_options_are_refused(args: list[str], error: str) -> None:
    done = evaltrace("score", SAMPLE_RUNS, "--no-store", *args)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [error]


def test_the_readme_langfuse_block_sends_spans_then_scores(tmp_path: Path) -> None:
    # As written in the README: replay with the documented headers, then score with langfuse:$LANGFUSE_HOST.
    import shutil

    shutil.copytree(SAMPLE_RUNS, tmp_path / "runs")
    shutil.copy(ROOT / "samples" / "evals.yaml", tmp_path / "evals.yaml")
    state = Langfuse(rate_limit_first=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGFUSE_"))}
    bin_dir = str(Path(sys.executable).parent)
    with running_langfuse(state) as url:
        env.update(KEYS, LANGFUSE_HOST=url, NO_PROXY="127.0.0.1", PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
        (done,) = run_lines([bash_block("# Replay to Langfuse:")], tmp_path, env)
    assert sorted(state.span_ids) == sorted(s.span_id for s in read_spans(resolve_paths([SAMPLE_RUNS])))
    assert state.ingestion_versions == {"4"}
    assert state.scores and state.problems == []
    assert {s["traceId"] for s in state.scores} <= {s.trace_id for s in read_spans(resolve_paths([SAMPLE_RUNS]))}
    assert f"results sent: {len(state.scores)} scores to {url}" in done.stderr
    assert SECRET not in done.stdout + done.stderr


def test_run_sends_its_scores_too(tmp_path: Path) -> None:
    state = Langfuse(rate_limit_first=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGFUSE_"))}
    env.update(KEYS, NO_PROXY="127.0.0.1")
    with running_langfuse(state) as url:
        ran = subprocess.run(
            [sys.executable, "-m", "evaltrace.cli", "run", "--agent", "samples.agent:run", "--spec",
             str(ROOT / "samples" / "evals.yaml"), "--out", str(tmp_path / "ran"), "--json", str(tmp_path / "r.json"),
             "--no-store", "--send-results", f"langfuse:{url}"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    expected = Counter(
        (sample["trace_id"], score["scorer"])
        for entry in report["entries"]
        for sample in entry["samples"]
        for score in sample["scores"]
    )
    assert expected and Counter((s["traceId"], s["name"]) for s in state.scores) == expected
    recorded = {s.trace_id for s in read_spans(resolve_paths([tmp_path / "ran"]))}
    assert {s["traceId"] for s in state.scores} <= recorded
    assert f"results sent: {sum(expected.values())} scores to {url}" in ran.stderr


def test_run_refuses_a_bad_results_target_before_the_agent_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "LANGFUSE_"))}
    ran = subprocess.run(
        [sys.executable, "-m", "evaltrace.cli", "run", "--agent", "samples.agent:run", "--spec",
         str(ROOT / "samples" / "evals.yaml"), "--out", str(tmp_path / "ran"), "--no-store",
         "--send-results", "langfuse:https://cloud.langfuse.com"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 2
    assert ran.stderr.splitlines() == [
        "Error: --send-results https://cloud.langfuse.com: set LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
        "(the Langfuse project's API keys)"
    ]
    assert not (tmp_path / "ran").exists()


def test_a_backend_that_keeps_failing_is_one_error_line_and_no_results_sent_line(tmp_path: Path) -> None:
    class Unavailable(BaseHTTPRequestHandler):
        posts = 0

        def do_GET(self) -> None:
            self._answer(200)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            type(self).posts += 1
            self._answer(503)

        def _answer(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            return None

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Unavailable)) as port:
        done = evaltrace("score", SAMPLE_RUNS, "--no-store", "--send-results", f"langfuse:http://127.0.0.1:{port}",
                         env=KEYS)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --send-results http://127.0.0.1:{port}/api/public/scores: the backend answered HTTP 503 Service "
        "Unavailable; 1 score not delivered"
    ]
    assert "results sent" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert Unavailable.posts > 1  # retried before giving up
