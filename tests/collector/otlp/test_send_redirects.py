"""`replay` and `score --send-results` follow no redirect, and send no header over plain http to another host.

A backend at the endpoint answers every request `307` to a second receiver (both on 127.0.0.1):
nothing, neither the headers nor the body, may arrive at the second one, and the command fails
naming the status (issue 28, item 12). OTel's HTTP exporters either followed the redirect with
every custom header and the body (1.39) or took the 3xx as delivered (1.45).

An endpoint that is not this machine by name gets no headers over plain http (the judge's rule for
its key). `127.1` stands for such a host here: the rule knows this machine by `localhost` and the
canonical loopback addresses only, while the resolver still takes `127.1` to the local receiver,
so a header sent anyway would be seen arriving.
"""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from _send_fixtures import OtlpReceiver, evaltrace, record_run, running_receiver
from _serving import serving

ROOT = Path(__file__).resolve().parents[3]
SECRET = "x-api-key=very-secret-value"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    record_run(folder)
    return folder


def _redirected(*args: str | Path) -> tuple[int, str, OtlpReceiver]:
    """Run a command sending to a backend that redirects to a second receiver; exit code, stderr, the second."""
    elsewhere = OtlpReceiver()
    with running_receiver(elsewhere):
        redirecting = OtlpReceiver(redirect_to=elsewhere.endpoint)
        with running_receiver(redirecting):
            done = evaltrace(*(redirecting.endpoint if a == "ENDPOINT" else a for a in args))
            where = redirecting.endpoint
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, done.stderr.replace(where, "ENDPOINT"), elsewhere


def test_replay_follows_no_redirect_and_fails_naming_it(runs: Path) -> None:
    code, stderr, elsewhere = _redirected("replay", runs, "--endpoint", "ENDPOINT", "--header", SECRET)
    assert elsewhere.requests == []  # neither the header nor a span reached the host redirected to
    assert code == 2, stderr
    assert stderr.splitlines() == [
        "Error: --endpoint ENDPOINT/v1/logs: the backend answered HTTP 307 Temporary Redirect (a redirect is not "
        "followed: give the endpoint it points to); nothing sent"
    ]
    assert "very-secret-value" not in stderr


def test_replay_of_spans_only_fails_on_a_redirect_too(runs: Path) -> None:
    code, stderr, elsewhere = _redirected("replay", runs, "--endpoint", "ENDPOINT", "--no-logs")
    assert elsewhere.requests == []
    assert code == 2, stderr
    assert "sent " not in stderr and "HTTP 307" in stderr and "spans not delivered" in stderr, stderr


def test_send_results_follows_no_redirect_and_fails_naming_it(tmp_path: Path) -> None:
    code, stderr, elsewhere = _redirected(
        "score", ROOT / "samples" / "runs", "--json", tmp_path / "report.json", "--no-store",
        "--send-results", "ENDPOINT", "--header", SECRET,
    )  # fmt: skip
    assert elsewhere.requests == []
    assert code == 2, stderr
    assert "results sent" not in stderr
    assert "Error: --send-results ENDPOINT/v1/logs: the backend answered HTTP 307" in stderr, stderr


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_headers_never_go_over_plain_http_to_another_host(runs: Path, protocol: str) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        endpoint = f"http://127.1:{receiver.port}"
        done = evaltrace("replay", runs, "--endpoint", endpoint, "--protocol", protocol, "--header", SECRET)
        from_env = evaltrace(
            "replay", runs, "--endpoint", endpoint, "--protocol", protocol,
            env={"OTEL_EXPORTER_OTLP_HEADERS": SECRET},
        )  # fmt: skip
    assert receiver.requests == []
    for refused in (done, from_env):
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.splitlines() == [
            f"Error: --endpoint {endpoint}: refusing to send headers (--header, OTEL_EXPORTER_OTLP_*HEADERS) "
            "unencrypted over http:// to 127.1: use https:// or a loopback address"
        ]


def test_without_headers_plain_http_to_that_host_still_sends(runs: Path) -> None:
    receiver = OtlpReceiver()
    with running_receiver(receiver):
        done = evaltrace("replay", runs, "--endpoint", f"http://127.1:{receiver.port}", "--no-logs")
    assert done.returncode == 0, done.stderr
    assert len(receiver.spans()) == 4


class _Recorder(BaseHTTPRequestHandler):
    """Any request answered 200 with `{}`; its method, path and Authorization kept in `seen`."""

    seen: list[tuple[str, str, str | None]]

    def do_GET(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.seen.append((self.command, self.path, self.headers.get("Authorization")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_POST = do_GET

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.mark.parametrize("command", ["replay", "send-results phoenix"])
def test_user_info_in_the_url_never_goes_over_plain_http_to_another_host(runs: Path, command: str) -> None:
    # Both HTTP clients (requests for OTLP, httpx for REST APIs) send `user:password@` as a Basic
    # Authorization header: a key like any header.
    seen: list[tuple[str, str, str | None]] = []
    handler = type("Handler", (_Recorder,), {"seen": seen})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as port:
        url = f"http://user:pass-word-123@127.1:{port}"
        if command == "replay":
            done = evaltrace("replay", runs, "--endpoint", url, "--no-logs")
        else:
            done = evaltrace(
                "score", runs, "--no-store", "--send-results", f"phoenix:{url}", env={"PHOENIX_API_KEY": ""}
            )
    assert seen == []
    assert done.returncode == 2, done.stderr
    option = "--endpoint" if command == "replay" else "--send-results"
    assert done.stderr.splitlines() == [
        f"Error: {option} http://127.1:{port}: refusing to send the URL's user info unencrypted over http:// "
        "to 127.1: use https:// or a loopback address"
    ]
    assert "pass-word-123" not in done.stdout + done.stderr
