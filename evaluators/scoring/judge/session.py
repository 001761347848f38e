"""The LLM judge: one session per scoring run, and its statistics.

The engine opens one session for a whole run::

    settings = JudgeSettings.from_env(model=cli_model, base_url=cli_url)  # `None` overrides are ignored
    async with judge_session(settings) as session:
        scores = await asyncio.gather(*(arun_scorer(s, trace, case) for ...))
    report["judge"] = session.stats().model_dump(mode="json")

Judge scorers find the session with `current_judge()`. A session owns the HTTP client (bounded
concurrency, retries, request budget), the verdict cache and the counters.

The settings, the setup checks and which key goes where are in `settings.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from evaltrace.evaluators.scoring.judge.cache import CachedVerdict, VerdictCache, cache_key, question_identity
from evaltrace.evaluators.scoring.judge.client import Completion, Counters, JudgeClient, RequestBudget
from evaltrace.evaluators.scoring.judge.prompts import RenderedPrompt
from evaltrace.evaluators.scoring.judge.settings import JudgeSettings, JudgeSetupError
from evaltrace.evaluators.scoring.judge.verdict import (
    JudgeConfigError,
    JudgeError,
    JudgeRefusedError,
)


class JudgeStats(BaseModel):
    """What the judge cost in a run, kept apart from the agent's own usage."""

    model: str | None
    requests: int
    """HTTP requests sent, retries included."""
    retries: int
    errors: int
    """Verdicts that could not be obtained (each became an error result)."""
    cache_hits: int
    """Verdicts reused from the cache or from an identical request already in flight."""
    cache_misses: int
    """Verdicts that had to be asked from the judge."""
    prompt_tokens: int
    completion_tokens: int
    estimated_cost_usd: float | None
    """From the configured prices; `None` when no price is set. Cache hits cost nothing."""
    max_requests: int | None
    budget_exhausted: bool
    cache_enabled: bool


@dataclass(frozen=True)
class JudgeOutcome:
    """The result of one judge question: the majority label over the samples."""

    passed: bool
    reason: str
    agreement: int
    """How many samples gave the majority label."""
    samples: int
    cached: int
    """Samples served without a request."""
    template: str
    template_version: int

    @property
    def agreement_text(self) -> str:
        """`2/3`-style agreement."""
        return f"{self.agreement}/{self.samples}"


class JudgeSession:
    """One run's judge: client, cache, counters. Create with `judge_session`."""

    def __init__(self, settings: JudgeSettings, budget: RequestBudget | None = None) -> None:
        self.settings = settings
        self._budget = budget
        """The run's request budget when it is shared with other sessions (see `RequestBudget`)."""
        self._counters = Counters()
        self._errors = 0
        self._hits = 0
        self._misses = 0
        self._client: JudgeClient | None = None
        self._cache = VerdictCache(settings.resolved_cache_dir()) if settings.cache else None
        self._inflight: dict[str, asyncio.Task[CachedVerdict]] = {}
        self._first_contact = asyncio.Lock()
        self._contacted = False
        self.setup_error: JudgeSetupError | None = None
        """Set when the first contact with the server was refused; `judge_session` raises it on close."""

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def classify(self, prompt: RenderedPrompt, samples: int | None = None) -> JudgeOutcome:
        """Ask one yes/no question, `samples` times (default from settings), and take the majority.

        A tie is not a majority, so it fails. Any sample that cannot be obtained makes the whole
        question an error: a partial vote is never reported as a verdict.

        Raises:
            JudgeError: The verdict could not be obtained (configuration, network, replies, budget).
        """
        try:
            problem = self.settings.missing()
            if problem is not None:
                raise JudgeConfigError(problem)
            count = samples or self.settings.samples
            results = await asyncio.gather(*(self._sample(prompt, i) for i in range(count)), return_exceptions=True)
        except JudgeError:
            self._errors += 1
            raise
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            self._errors += 1
            raise failures[0]
        return _vote(prompt, [r for r in results if not isinstance(r, BaseException)])

    def stats(self) -> JudgeStats:
        """Counters for the report's `judge` section."""
        c, s = self._counters, self.settings
        cost = None
        if s.price_input_per_mtok is not None or s.price_output_per_mtok is not None:
            cost = (c.prompt_tokens * (s.price_input_per_mtok or 0.0)) / 1e6
            cost += (c.completion_tokens * (s.price_output_per_mtok or 0.0)) / 1e6
        return JudgeStats(
            model=s.model,
            requests=c.requests,
            retries=c.retries,
            errors=self._errors,
            cache_hits=self._hits,
            cache_misses=self._misses,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            estimated_cost_usd=cost,
            max_requests=s.max_requests,
            budget_exhausted=c.budget_exhausted,
            cache_enabled=s.cache,
        )

    async def _sample(self, prompt: RenderedPrompt, index: int) -> tuple[CachedVerdict, bool]:
        # Returns the verdict and whether it came without a request of its own.
        key = cache_key(self._key_material(prompt, index))
        identity = question_identity(self.settings.model or "", prompt.template, prompt.version, index)
        cached = self._cache.get(key, identity) if self._cache is not None else None
        if cached is not None:
            self._hits += 1
            return cached, True
        task = self._inflight.get(key)
        if task is not None:
            # The same question is already being asked for another entry: share its answer.
            self._hits += 1
            return await task, True
        self._misses += 1
        task = asyncio.ensure_future(self._fetch(prompt, index, key))
        self._inflight[key] = task
        task.add_done_callback(lambda _t: self._inflight.pop(key, None))
        return await task, False

    def _key_material(self, prompt: RenderedPrompt, index: int) -> dict[str, Any]:
        s = self.settings
        return {
            "model": s.model,
            "temperature": s.temperature,
            "response_format": s.response_format,
            "template": prompt.template,
            "template_version": prompt.version,
            "messages": prompt.messages(),
            "sample": index,
        }

    async def _fetch(self, prompt: RenderedPrompt, index: int, key: str) -> CachedVerdict:
        reply = await self._ask(prompt.messages())
        verdict = reply.value
        entry = CachedVerdict(
            key=key,
            passed=verdict.passed,
            reason=verdict.reason,
            model=self.settings.model or "",
            template=prompt.template,
            template_version=prompt.version,
            sample=index,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
        )
        if self._cache is not None:
            self._cache.put(key, entry)
        return entry

    async def _ask(self, messages: list[dict[str, str]]) -> Completion:
        # The first request is the contact check: the others wait until it has settled, and none
        # is sent once it was refused.
        if not self._contacted:
            async with self._first_contact:
                self._raise_if_refused()
                if not self._contacted:
                    return await self._contact(messages)
        self._raise_if_refused()
        return await self._http_client().complete(messages)

    async def _contact(self, messages: list[dict[str, str]]) -> Completion:
        try:
            reply = await self._http_client().complete(messages)
        except JudgeRefusedError as exc:
            hint = self.settings.key_hint() if " HTTP 401" in str(exc) or " HTTP 403" in str(exc) else ""
            self.setup_error = JudgeSetupError(f"judge setup: {exc}{hint}")
            raise
        except JudgeError:
            self._contacted = True  # the server answered (or a fault of the run): not a setup problem
            raise
        self._contacted = True
        return reply

    def _raise_if_refused(self) -> None:
        if self.setup_error is not None:
            raise JudgeConfigError(f"not asked: {self.setup_error}")

    def _http_client(self) -> JudgeClient:
        if self._client is None:
            self._client = JudgeClient(self.settings, self._counters, self._budget)
        return self._client


def _vote(prompt: RenderedPrompt, samples: list[tuple[CachedVerdict, bool]]) -> JudgeOutcome:
    verdicts = [verdict for verdict, _ in samples]
    yes = [v for v in verdicts if v.passed]
    no = [v for v in verdicts if not v.passed]
    passed = len(yes) * 2 > len(verdicts)
    majority = yes if passed else no
    return JudgeOutcome(
        passed=passed,
        reason=majority[0].reason if majority else "",
        agreement=len(majority),
        samples=len(verdicts),
        cached=sum(1 for _, from_cache in samples if from_cache),
        template=prompt.template,
        template_version=prompt.version,
    )


_CURRENT: ContextVar[JudgeSession | None] = ContextVar("evaltrace_judge_session", default=None)


@asynccontextmanager
async def judge_session(settings: JudgeSettings | None = None) -> AsyncIterator[JudgeSession]:
    """Open a judge session for the enclosed scoring; `current_judge()` returns it inside.

    Args:
        settings: Judge settings; `JudgeSettings.from_env()` when omitted.

    Raises:
        JudgeSetupError: On entry, when the settings cannot work (no model, no or a malformed base
            URL, a key that would go unencrypted to a remote host); on exit, when the first
            contact with the server was refused (connection, key, endpoint or model).
    """
    session = JudgeSession(settings if settings is not None else JudgeSettings.from_env())
    session.settings.require_usable()
    try:
        with serving(session):
            yield session
        if session.setup_error is not None:
            raise session.setup_error
    finally:
        await session.aclose()


@contextmanager
def serving(session: JudgeSession) -> Iterator[JudgeSession]:
    """Make `session` the one `current_judge()` returns inside, without opening or closing it.

    For a session whose questions are answered elsewhere (the Ray engine's actor pool), set up
    and checked by its owner rather than by `judge_session`.
    """
    token = _CURRENT.set(session)
    try:
        yield session
    finally:
        _CURRENT.reset(token)


def current_judge() -> JudgeSession | None:
    """The session opened by the innermost `judge_session`, or `None` outside one."""
    return _CURRENT.get()


__all__ = [
    "JudgeError",
    "JudgeSetupError",
    "JudgeOutcome",
    "JudgeSession",
    "JudgeSettings",
    "JudgeStats",
    "current_judge",
    "judge_session",
    "serving",
]
