"""Who may use `evaltrace review`: the token, the app's own origin and host, loopback only (real subprocess).

Each refused write is checked to have written nothing: the store's labels table stays empty until
the one write that shows the token, comes from the app's own origin and sends JSON.
"""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from cli_process import evaltrace
from review_server import Server, review_server
from review_store import record_traces

from evaltrace.evaluators.results.store.labels import read_labels

LABEL = {"case_id": "case-01", "trace_id": "", "scorer": "", "label": "fail", "note": "x"}
"""A label of the second trace (its trace id is filled in from the app's own list)."""


def _post(server: Server, headers: dict[str, str], **kwargs: object) -> httpx.Response:
    with httpx.Client(trust_env=False, timeout=10) as client:
        if "content" not in kwargs and "json" not in kwargs:
            kwargs["json"] = LABEL
        return client.post(f"{server.base}/api/labels", headers=headers, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def app(tmp_path: Path):  # type: ignore[no-untyped-def]
    runs = record_traces(tmp_path / "runs", 2)
    with review_server("--store", tmp_path / "store", runs, cwd=tmp_path) as server:
        entries = httpx.get(
            f"{server.base}/api/entries", params={"source": "paths"}, headers={"X-Evaltrace-Token": server.token},
            trust_env=False, timeout=30,
        ).json()["entries"]  # fmt: skip
        LABEL["trace_id"] = next(e["samples"][0]["trace_id"] for e in entries if e["case_id"] == "case-01")
        yield server, tmp_path / "store"


def test_reads_need_the_token_and_the_apps_own_host(app: tuple[Server, Path]) -> None:
    server, _ = app
    with httpx.Client(trust_env=False, timeout=10) as client:
        assert client.get(f"{server.base}/api/sources").status_code == 403
        assert client.get(f"{server.base}/api/sources", headers={"X-Evaltrace-Token": "wrong"}).status_code == 403
        good = client.get(f"{server.base}/api/sources", headers={"X-Evaltrace-Token": server.token})
        assert good.status_code == 200 and good.json()["sources"][-1]["id"] == "paths"
        rebound = {"X-Evaltrace-Token": server.token, "Host": f"evil.example:{server.port}"}  # DNS rebinding
        assert client.get(f"{server.base}/api/sources", headers=rebound).status_code == 421
        page = client.get(f"{server.base}/")
        assert page.status_code == 200 and server.token not in page.text  # the page holds no data, nor the token
        csp = page.headers["content-security-policy"]
        assert (
            "default-src 'none'" in csp
            and "connect-src 'self'" in csp
            and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
        )


def test_a_write_without_the_token_or_from_another_origin_is_refused(app: tuple[Server, Path]) -> None:
    server, store = app
    own, token = server.base, {"X-Evaltrace-Token": server.token}
    refused = [
        (_post(server, {"Origin": own}), 403),  # no token
        (_post(server, {"Origin": own, "X-Evaltrace-Token": "guess"}), 403),  # a wrong token
        (_post(server, {**token, "Origin": "http://evil.example"}), 403),  # another origin, even with the token
        (_post(server, {**token, "Origin": f"http://127.0.0.1:{server.port + 1}"}), 403),  # another local port
        (_post(server, {**token, "Origin": "null"}), 403),  # a sandboxed or file:// page
        (_post(server, {**token, "Sec-Fetch-Site": "cross-site"}), 403),  # no Origin, and not same-origin
        (_post(server, token), 403),  # neither Origin nor Sec-Fetch-Site
        (_post(server, {**token, "Origin": own, "Content-Type": "text/plain"}, content=b'{"trace_id": "t"}'), 415),
        (_post(server, {**token, "Origin": own, "Host": "evil.example"}), 421),
    ]
    assert [response.status_code for response, _ in refused] == [status for _, status in refused]
    assert all("error" in response.json() for response, _ in refused)
    assert read_labels(store) == []
    accepted = _post(server, {**token, "Origin": own})
    assert accepted.status_code == 200, accepted.text
    same_site = _post(server, {**token, "Sec-Fetch-Site": "same-origin"})  # a browser that sends no Origin
    assert same_site.status_code == 200
    (label,) = read_labels(store)
    assert (label.trace_id, label.label, label.note) == (LABEL["trace_id"], "fail", "x")
    assert len(read_labels(store, history=True)) == 2


def test_a_bad_label_is_a_400_and_writes_nothing(app: tuple[Server, Path]) -> None:
    server, store = app
    headers = {"X-Evaltrace-Token": server.token, "Origin": server.base}
    assert _post(server, headers, json={**LABEL, "label": "maybe"}).status_code == 400
    assert _post(server, headers, json={**LABEL, "trace_id": ""}).status_code == 400
    unknown = _post(server, headers, json={**LABEL, "trace_id": "f" * 32})  # a trace the app does not show
    assert unknown.status_code == 400 and "no entry of paths" in unknown.json()["error"]
    assert _post(server, headers, json={**LABEL, "scorer": "task_completion"}).status_code == 400  # not scored
    assert _post(
        server,
        headers,
        content=b"[1]",
    ).status_code in (400, 415)
    assert read_labels(store) == []


def test_the_server_listens_on_127_0_0_1_only(app: tuple[Server, Path]) -> None:
    server, _ = app
    # Bound to 0.0.0.0 it would answer on every local address; 127.0.0.2 is loopback too, but not its address.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.2", server.port), timeout=5).close()
    listening = Path("/proc/net/tcp").read_text().splitlines()[1:]
    mine = [
        line.split()[1]
        for line in listening
        if line.split()[3] == "0A" and line.split()[1].endswith(f":{server.port:04X}")
    ]
    assert mine == [f"0100007F:{server.port:04X}"]


def test_a_port_in_use_is_one_error_line(app: tuple[Server, Path], tmp_path: Path) -> None:
    server, _ = app
    taken = evaltrace("review", "--no-browser", "--port", str(server.port), cwd=tmp_path, timeout=60)
    assert taken.returncode == 2 and taken.stdout == ""
    assert taken.stderr.startswith(f"Error: --port {server.port}: cannot listen on 127.0.0.1:{server.port}")
    assert taken.stderr.count("\n") == 1
