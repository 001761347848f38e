"""The judge client against the scripted server: retries, timeouts, concurrency, budget, errors."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_server import JudgeServer, Reply, closed_port_url, judge_settings, verdict

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.scoring.judge.prompts import SEMANTIC_OUTPUT, render
from evaltrace.evaluators.scoring.judge.session import JudgeOutcome, JudgeSession, judge_session
from evaltrace.evaluators.scoring.judge.settings import JudgeSetupError
from evaltrace.evaluators.scoring.judge.verdict import (
    VERDICT_SCHEMA,
    JudgeBudgetError,
    JudgeReplyError,
    JudgeUnavailableError,
)
from evaltrace.evaluators.scoring.scorers.base import Score, arun_scorer
from evaltrace.evaluators.scoring.scorers.judges import SemanticOutput


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:
        yield srv


def _classify(settings: Any, prompts: list[Any]) -> tuple[list[JudgeOutcome | BaseException], JudgeSession]:
    async def go() -> tuple[list[JudgeOutcome | BaseException], JudgeSession]:
        async with judge_session(settings) as session:
            results = await asyncio.gather(*(session.classify(p) for p in prompts), return_exceptions=True)
            return list(results), session

    return asyncio.run(go())


def _prompt(text: str = "The answer is 42.") -> Any:
    return render(SEMANTIC_OUTPUT, ["Gives a number"], {"final_answer": text})


def _score(settings: Any, trace: Trace) -> tuple[Score, JudgeSession]:
    async def go() -> tuple[Score, JudgeSession]:
        async with judge_session(settings) as session:
            return await arun_scorer(SemanticOutput(rubric="Gives a number"), trace), session

    return asyncio.run(go())


def test_request_body_asks_for_structured_output(server: JudgeServer, tmp_path: Path) -> None:
    server.script(verdict(True, "has a number"))
    [outcome], session = _classify(judge_settings(server.base_url, tmp_path), [_prompt()])
    assert isinstance(outcome, JudgeOutcome) and outcome.passed and outcome.reason == "has a number"
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "judge-model"
    assert request.body["temperature"] == 0.0
    assert request.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "strict": True, "schema": VERDICT_SCHEMA},
    }
    assert VERDICT_SCHEMA["required"] == ["reason", "passed"] and VERDICT_SCHEMA["additionalProperties"] is False
    assert [m["role"] for m in request.body["messages"]] == ["system", "user"]
    assert "JSON object" in request.system
    assert request.headers["authorization"] == "Bearer sk-test-secret"
    stats = session.stats()
    assert (stats.requests, stats.retries, stats.errors) == (1, 0, 0)
    assert (stats.prompt_tokens, stats.completion_tokens) == (40, 9)


def test_429_honours_retry_after_then_succeeds(server: JudgeServer, tmp_path: Path) -> None:
    server.script(Reply(status=429, raw=b'{"error": "slow down"}', headers={"Retry-After": "1"}), verdict(False, "no"))
    [outcome], session = _classify(judge_settings(server.base_url, tmp_path), [_prompt()])
    assert isinstance(outcome, JudgeOutcome) and outcome.passed is False
    first, second = server.requests
    assert second.arrived - first.arrived >= 0.9  # Retry-After: 1, not the 0.01 s backoff
    assert session.stats().retries == 1 and session.stats().requests == 2


def test_retry_after_is_capped(server: JudgeServer, tmp_path: Path) -> None:
    server.script(Reply(status=429, raw=b"{}", headers={"Retry-After": "3600"}), verdict(True))
    settings = judge_settings(server.base_url, tmp_path, retry_after_cap=0.2)
    started = time.monotonic()
    [outcome], _ = _classify(settings, [_prompt()])
    assert isinstance(outcome, JudgeOutcome) and outcome.passed
    assert time.monotonic() - started < 3


def test_500_is_retried_with_backoff_then_succeeds(server: JudgeServer, tmp_path: Path) -> None:
    server.script(Reply(status=500, raw=b"oops"), Reply(status=503, raw=b"busy"), verdict(True, "ok"))
    [outcome], session = _classify(judge_settings(server.base_url, tmp_path), [_prompt()])
    assert isinstance(outcome, JudgeOutcome) and outcome.passed
    assert len(server.requests) == 3 and session.stats().retries == 2


def test_400_is_not_retried(server: JudgeServer, tmp_path: Path) -> None:
    server.script(Reply(status=400, raw=b'{"error": {"message": "unknown model"}}'))
    [outcome], session = _classify(judge_settings(server.base_url, tmp_path), [_prompt()])
    assert isinstance(outcome, JudgeUnavailableError)
    assert "HTTP 400" in str(outcome) and "unknown model" in str(outcome)
    assert len(server.requests) == 1 and session.stats().errors == 1


def test_persistent_500_gives_an_error_result(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: Reply(status=500, raw=b"down")
    score, session = _score(judge_settings(server.base_url, tmp_path, max_retries=2), Trace(trace_id="t", output="42"))
    assert score.passed is False and score.error == "JudgeUnavailableError"
    assert score.reason is not None and "HTTP 500" in score.reason
    assert len(server.requests) == 3  # first attempt + 2 retries
    assert session.stats().errors == 1


def test_timeout_retries_then_error_result(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True, delay=1.0)
    settings = judge_settings(server.base_url, tmp_path, timeout=0.2, max_retries=1)
    started = time.monotonic()
    score, session = _score(settings, Trace(trace_id="t", output="42"))
    assert time.monotonic() - started < 1.5
    assert score.passed is False and score.error == "JudgeUnavailableError"
    assert score.reason is not None and "did not answer within 0.2s" in score.reason
    assert len(server.requests) == 2 and session.stats().retries == 1


def test_garbage_replies_are_retried_then_error_result(server: JudgeServer, tmp_path: Path) -> None:
    server.script(
        Reply(content="I think it passes."),
        Reply(raw=b"<html>gateway</html>"),
        Reply(content='{"passed": "yes", "reason": "strings are not booleans"}'),
    )
    score, session = _score(judge_settings(server.base_url, tmp_path), Trace(trace_id="t", output="42"))
    assert score.passed is False and score.error == "JudgeReplyError"
    assert score.reason is not None and "unparseable" in score.reason
    assert len(server.requests) == 3
    stats = session.stats()
    assert stats.errors == 1 and stats.retries == 2 and stats.cache_misses == 1


def test_garbage_then_good_reply_passes(server: JudgeServer, tmp_path: Path) -> None:
    server.script(Reply(content="no json here"), verdict(True, "fine"))
    score, _ = _score(judge_settings(server.base_url, tmp_path), Trace(trace_id="t", output="42"))
    assert score.passed is True and score.reason == "fine"


def test_unreachable_server_at_first_contact_is_a_setup_error(tmp_path: Path) -> None:
    url = closed_port_url()
    with pytest.raises(JudgeSetupError, match=f"judge setup: cannot connect to the judge at {url}/chat/completions"):
        _score(judge_settings(url, tmp_path, max_retries=1), Trace(trace_id="t", output="42"))


def test_server_gone_after_first_contact_gives_an_error_result(tmp_path: Path) -> None:
    # The first verdict comes through; then the server goes away: a fault of the run, not of its setup.
    server = JudgeServer().start()
    url = server.base_url
    server.script(verdict(True, "fine", headers={"Connection": "close"}))  # no kept-alive connection survives
    settings = judge_settings(url, tmp_path, max_retries=1, concurrency=1)

    async def go() -> tuple[list[Score], JudgeSession]:
        async with judge_session(settings) as session:
            first = await arun_scorer(SemanticOutput(rubric="Gives a number"), Trace(trace_id="a", output="1"))
            server.stop()
            second = await arun_scorer(SemanticOutput(rubric="Gives a number"), Trace(trace_id="b", output="2"))
            return [first, second], session

    (first, second), session = asyncio.run(go())
    assert first.passed is True
    assert second.passed is False and second.error == "JudgeRefusedError"
    assert second.reason is not None and f"cannot connect to the judge at {url}/chat/completions" in second.reason
    assert session.stats().errors == 1 and session.setup_error is None


def test_concurrency_runs_requests_in_parallel(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True, delay=0.4)
    prompts = [_prompt(f"answer {i}") for i in range(4)]

    def timed(concurrency: int, folder: str) -> float:
        async def go() -> float:
            settings = judge_settings(server.base_url, tmp_path / folder, concurrency=concurrency)
            async with judge_session(settings) as session:
                await session.classify(_prompt("first contact"))  # sent alone, before any other
                started = time.monotonic()
                results = await asyncio.gather(*(session.classify(p) for p in prompts))
                assert all(r.passed for r in results)
                return time.monotonic() - started

        return asyncio.run(go())

    serial = timed(1, "serial")
    parallel = timed(4, "parallel")
    assert serial >= 1.5  # 4 x 0.4 s one after another
    assert parallel < 0.5 * serial


def test_first_contact_is_sent_alone_then_the_rest_in_parallel(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True, delay=0.3)
    settings = judge_settings(server.base_url, tmp_path, concurrency=4)
    results, _ = _classify(settings, [_prompt(f"a{i}") for i in range(4)])
    assert all(isinstance(r, JudgeOutcome) for r in results)
    arrivals = sorted(r.arrived for r in server.requests)
    assert arrivals[1] - arrivals[0] >= 0.25  # the others waited for the first contact to settle
    assert arrivals[3] - arrivals[1] < 0.2  # then went out together


def test_concurrency_bound_is_respected(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True, delay=0.3)
    settings = judge_settings(server.base_url, tmp_path, concurrency=2)
    results, _ = _classify(settings, [_prompt(f"a{i}") for i in range(4)])
    assert all(isinstance(r, JudgeOutcome) for r in results)
    arrivals = sorted(r.arrived for r in server.requests)
    assert arrivals[2] - arrivals[0] >= 0.25  # the third request waited for a free slot


def test_request_budget_gives_error_results_for_the_rest(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True)
    settings = judge_settings(server.base_url, tmp_path, max_requests=2, concurrency=1)
    results, session = _classify(settings, [_prompt(f"a{i}") for i in range(5)])
    passed = [r for r in results if isinstance(r, JudgeOutcome)]
    budget = [r for r in results if isinstance(r, JudgeBudgetError)]
    assert len(passed) == 2 and len(budget) == 3
    assert "budget exhausted" in str(budget[0]) and "--judge-max-requests" in str(budget[0])
    assert len(server.requests) == 2
    stats = session.stats()
    assert stats.budget_exhausted and stats.errors == 3 and stats.max_requests == 2


def test_budget_counts_retries(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: Reply(status=500, raw=b"down")
    settings = judge_settings(server.base_url, tmp_path, max_requests=2, max_retries=5)
    [outcome], _ = _classify(settings, [_prompt()])
    assert isinstance(outcome, JudgeBudgetError)
    assert len(server.requests) == 2


def test_reply_error_type_is_exported() -> None:
    # The error classes are part of what the engine may catch; keep them importable.
    assert issubclass(JudgeReplyError, Exception)


def test_estimated_cost_from_prices(server: JudgeServer, tmp_path: Path) -> None:
    server.script(Reply(content='{"passed": true, "reason": "ok"}', prompt_tokens=1000, completion_tokens=100))
    settings = judge_settings(server.base_url, tmp_path, price_input_per_mtok=2.0, price_output_per_mtok=10.0)
    _, session = _classify(settings, [_prompt()])
    assert session.stats().estimated_cost_usd == pytest.approx(1000 * 2.0 / 1e6 + 100 * 10.0 / 1e6)
    _, free = _classify(judge_settings(server.base_url, tmp_path / "other"), [])
    assert free.stats().estimated_cost_usd is None
