"""The on-disk verdict cache: zero requests on re-scoring, keyed misses, failures not cached."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_server import JudgeServer, Reply, judge_settings, verdict

from evaltrace.collector.traces.records import ToolCall, Trace
from evaltrace.evaluators.scoring.judge import prompts as _judge_prompts
from evaltrace.evaluators.scoring.judge.cache import CachedVerdict, VerdictCache, cache_key
from evaltrace.evaluators.scoring.judge.session import JudgeStats, judge_session
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer, arun_scorer
from evaltrace.evaluators.scoring.scorers.registry import create_scorer


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as srv:
        yield srv


def run_all(scorers: list[Scorer], traces: list[Trace], settings: Any) -> tuple[list[Score], JudgeStats]:
    async def go() -> tuple[list[Score], JudgeStats]:
        async with judge_session(settings) as session:
            jobs = [arun_scorer(s, t) for t in traces for s in scorers]
            return list(await asyncio.gather(*jobs)), session.stats()

    return asyncio.run(go())


def traces() -> list[Trace]:
    return [
        Trace(
            trace_id=f"{i:032x}",
            input=f"Weather in city {i}?",
            output=f"It is {10 + i}C.",
            tool_calls=[ToolCall(name="get_weather", arguments={"city": f"city {i}"}, result=f"{10 + i}C")],
        )
        for i in range(3)
    ]


def scorers() -> list[Scorer]:
    return [
        create_scorer("semantic_output", {"rubric": "Gives a temperature", "samples": 3}),
        create_scorer("argument_hallucination", {}),
        create_scorer("task_completion", {}),
    ]


def stable(scores: list[Score]) -> list[tuple[Any, ...]]:
    # Everything but the `cached` counters, which say how the verdict was obtained.
    def strip(details: dict[str, Any] | None) -> Any:
        if details is None or "judge" not in details:
            return details
        return {**details, "judge": {k: v for k, v in details["judge"].items() if k != "cached"}}

    return [(s.scorer, s.passed, s.value, s.reason, s.error, strip(s.details)) for s in scores]


def test_rescoring_unchanged_traces_sends_zero_requests(server: JudgeServer, tmp_path: Path) -> None:
    counter = iter(range(1000))
    server.responder = lambda body: verdict(next(counter) % 4 != 0, "scripted")
    settings = judge_settings(server.base_url, tmp_path / "cache")
    first, stats1 = run_all(scorers(), traces(), settings)
    sent = len(server.requests)
    assert sent == 3 * (3 + 1 + 1) and stats1.requests == sent and stats1.cache_misses == sent
    assert all(s.error is None for s in first)

    second, stats2 = run_all(scorers(), traces(), settings)
    assert len(server.requests) == sent  # not one more request
    assert stats2.requests == 0 and stats2.cache_hits == sent and stats2.cache_misses == 0
    assert stats2.prompt_tokens == 0 and stats2.completion_tokens == 0
    assert stable(second) == stable(first)
    assert second[0].details is not None and second[0].details["judge"]["cached"] == 3


def test_a_new_prompt_version_or_model_misses(
    server: JudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.responder = lambda body: verdict(True)
    scorer = [create_scorer("semantic_output", {"rubric": "Gives a temperature"})]
    settings = judge_settings(server.base_url, tmp_path / "cache")
    run_all(scorer, traces()[:1], settings)
    run_all(scorer, traces()[:1], settings)
    assert len(server.requests) == 1

    run_all(scorer, traces()[:1], judge_settings(server.base_url, tmp_path / "cache", model="other-model"))
    assert len(server.requests) == 2

    bumped = dataclasses.replace(_judge_prompts.SEMANTIC_OUTPUT, version=2)
    monkeypatch.setattr(_judge_prompts, "SEMANTIC_OUTPUT", bumped)
    _, stats = run_all(scorer, traces()[:1], settings)
    assert len(server.requests) == 3 and stats.cache_misses == 1

    # Other parameters are part of the key too; a changed rubric is a changed prompt.
    run_all(scorer, traces()[:1], judge_settings(server.base_url, tmp_path / "cache", temperature=0.7))
    run_all([create_scorer("semantic_output", {"rubric": "Other"})], traces()[:1], settings)
    assert len(server.requests) == 5


def test_failures_are_never_cached(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: Reply(status=500, raw=b"down")
    settings = judge_settings(server.base_url, tmp_path / "cache", max_retries=0)
    scorer = [create_scorer("semantic_output", {"rubric": "Gives a temperature"})]
    [failed], _ = run_all(scorer, traces()[:1], settings)
    assert failed.error == "JudgeUnavailableError"
    assert not list((tmp_path / "cache").rglob("*.json"))

    server.responder = lambda body: verdict(True, "now fine")
    [ok], stats = run_all(scorer, traces()[:1], settings)
    assert ok.passed is True and stats.requests == 1


def test_cache_can_be_disabled(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True)
    settings = judge_settings(server.base_url, tmp_path / "cache", cache=False)
    scorer = [create_scorer("semantic_output", {"rubric": "x"})]
    run_all(scorer, traces()[:1], settings)
    _, stats = run_all(scorer, traces()[:1], settings)
    assert len(server.requests) == 2 and not stats.cache_enabled
    assert not (tmp_path / "cache").exists()


def test_identical_questions_in_flight_share_one_request(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True, delay=0.2)
    same = traces()[:1] * 4  # the same content under several entries
    scores, stats = run_all(
        [create_scorer("semantic_output", {"rubric": "x"})], same, judge_settings(server.base_url, tmp_path)
    )
    assert all(s.passed for s in scores)
    assert len(server.requests) == 1 and stats.cache_hits == 3


def test_cache_files_hold_no_secret_and_bad_files_are_misses(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True, "fine")
    settings = judge_settings(server.base_url, tmp_path / "cache")
    scorer = [create_scorer("semantic_output", {"rubric": "x"})]
    run_all(scorer, traces()[:1], settings)
    [entry] = list((tmp_path / "cache").rglob("*.json"))
    assert "sk-test-secret" not in entry.read_text()
    assert entry.parent == tmp_path / "cache" / "judge"  # the judge namespace under the cache root
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.name.startswith(".")]  # no temp files left

    entry.write_text("{ truncated")
    [ok], stats = run_all(scorer, traces()[:1], settings)
    assert ok.passed is True and stats.requests == 1
    assert CachedVerdict.model_validate_json(entry.read_text()).reason == "fine"  # rewritten


def test_unwritable_cache_folder_does_not_fail_the_verdict(server: JudgeServer, tmp_path: Path) -> None:
    server.responder = lambda body: verdict(True, "fine")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    [ok], _ = run_all(
        [create_scorer("semantic_output", {"rubric": "x"})], traces()[:1], judge_settings(server.base_url, blocker)
    )
    assert ok.passed is True and ok.error is None


def test_concurrent_processes_write_and_read_safely(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from evaltrace.evaluators.scoring.judge.cache import CachedVerdict, VerdictCache, cache_key
        cache = VerdictCache(Path({str(folder)!r}))
        for round in range(3):
            for i in range(60):
                key = cache_key({{"i": i}})
                got = cache.get(key)
                assert got is None or got.reason == f"r{{i}}", got
                cache.put(key, CachedVerdict(key=key, passed=True, reason=f"r{{i}}", model="m", template="t",
                                             template_version=1, sample=0))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE) for _ in range(3)]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    cache = VerdictCache(folder)
    for i in range(60):
        got = cache.get(cache_key({"i": i}))
        assert got is not None and got.reason == f"r{i}"
    assert not [p for p in folder.rglob("*") if p.name.startswith(".")]
