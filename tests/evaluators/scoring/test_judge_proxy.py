"""A proxy named by the environment never sees the judge's key.

A plain-HTTP request through a proxy hands it the `Authorization` header in clear, and a loopback
judge reached through a proxy is the proxy's own machine. The judge client uses the environment's
proxies only for HTTPS to another host, where the proxy relays a tunnel it cannot read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_server import JudgeServer, judge_settings, verdict
from recording_proxy import RecordingProxy, recording_proxy

from evaltrace.collector.network import may_use_env_proxy
from evaltrace.evaluators.scoring.judge.prompts import SEMANTIC_OUTPUT, render
from evaltrace.evaluators.scoring.judge.session import JudgeOutcome, judge_session
from evaltrace.evaluators.scoring.judge.verdict import JudgeUnavailableError

KEY = "sk-test-secret"  # judge_settings' key


@pytest.fixture
def proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingProxy]:
    """A recording proxy named by every proxy variable of this process, no exception for loopback."""
    with recording_proxy() as running:
        for name, value in running.environment().items():
            monkeypatch.setenv(name, value)
        yield running


def _ask(settings: Any) -> JudgeOutcome | BaseException:
    async def go() -> JudgeOutcome | BaseException:
        async with judge_session(settings) as session:
            prompt = render(SEMANTIC_OUTPUT, ["Gives a number"], {"final_answer": "42"})
            [outcome] = await asyncio.gather(session.classify(prompt), return_exceptions=True)
            return outcome

    return asyncio.run(go())


def test_a_loopback_judge_is_asked_directly_and_the_proxy_sees_nothing(proxy: RecordingProxy, tmp_path: Path) -> None:
    with JudgeServer() as server:
        server.script(verdict(True, "has a number"))
        outcome = _ask(judge_settings(server.base_url, tmp_path, cache=False))
        assert isinstance(outcome, JudgeOutcome) and outcome.passed, outcome
        [request] = server.requests
        assert request.headers["authorization"] == f"Bearer {KEY}"
    assert proxy.requests == []


def test_a_remote_https_judge_goes_through_the_proxy_as_a_tunnel_without_the_key(
    proxy: RecordingProxy, tmp_path: Path
) -> None:
    # The proxy refuses the tunnel, so nothing leaves this machine; what it was asked is the point.
    outcome = _ask(judge_settings("https://judge.invalid/v1", tmp_path, cache=False, max_retries=0))
    assert isinstance(outcome, JudgeUnavailableError), outcome
    assert KEY not in str(outcome)
    assert [line for line, _ in proxy.requests] == ["CONNECT judge.invalid:443 HTTP/1.1"]
    assert not proxy.saw(KEY)


@pytest.mark.parametrize(
    ("url", "proxied"),
    [
        ("https://api.openai.com/v1/chat/completions", True),
        ("https://judge.internal:8443/v1/chat/completions", True),
        ("http://judge.internal/v1/chat/completions", False),
        ("https://127.0.0.1:8443/v1/chat/completions", False),
        ("https://localhost/v1/chat/completions", False),
        ("https://[::1]:8443/v1/chat/completions", False),
        ("http://127.0.0.1:8000/v1/chat/completions", False),
    ],
)
def test_only_https_to_another_host_may_use_the_environments_proxy(url: str, proxied: bool) -> None:
    assert may_use_env_proxy(url) is proxied
