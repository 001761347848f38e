"""The LLM judge: settings, one session per scoring run, and its statistics.

The engine opens one session for a whole run::

    settings = JudgeSettings.from_env(model=cli_model, base_url=cli_url)  # `None` overrides are ignored
    async with judge_session(settings) as session:
        scores = await asyncio.gather(*(arun_scorer(s, trace, case) for ...))
    report["judge"] = session.stats().model_dump(mode="json")

Judge scorers find the session with `current_judge()`. A session owns the HTTP client (bounded
concurrency, retries, request budget), the verdict cache and the counters. It is lazy: a run
whose scorers never ask the judge sends nothing and needs no judge settings. A missing model or
base URL only becomes an error result for the entries whose judge scorer runs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from evaltrace.evaluators._judge_cache import CachedVerdict, VerdictCache, cache_key
from evaltrace.evaluators._judge_client import (
    Counters,
    JudgeClient,
    JudgeConfigError,
    JudgeError,
    Verdict,
    parse_verdict,
)
from evaltrace.evaluators._judge_prompts import RenderedPrompt
from evaltrace.evaluators.errors import InputError
from evaltrace.evaluators.registry import render_validation_errors

# Each field's environment variables (first set one wins) and its `evaltrace score` option, named in messages.
_ENV: dict[str, tuple[tuple[str, ...], str | None]] = {
    "model": (("EVALTRACE_JUDGE_MODEL",), "--judge-model"),
    "base_url": (("EVALTRACE_JUDGE_BASE_URL", "OPENAI_BASE_URL"), "--judge-base-url"),
    "api_key": (("EVALTRACE_JUDGE_API_KEY", "OPENAI_API_KEY"), "--judge-api-key"),
    "timeout": (("EVALTRACE_JUDGE_TIMEOUT",), "--judge-timeout"),
    "max_retries": (("EVALTRACE_JUDGE_MAX_RETRIES",), None),
    "concurrency": (("EVALTRACE_JUDGE_CONCURRENCY",), "--judge-concurrency"),
    "max_requests": (("EVALTRACE_JUDGE_MAX_REQUESTS",), "--judge-max-requests"),
    "temperature": (("EVALTRACE_JUDGE_TEMPERATURE",), None),
    "samples": (("EVALTRACE_JUDGE_SAMPLES",), None),
    "cache_dir": (("EVALTRACE_JUDGE_CACHE_DIR",), "--judge-cache-dir"),
    "cache": (("EVALTRACE_JUDGE_CACHE",), "--no-judge-cache"),
    "json_mode": (("EVALTRACE_JUDGE_JSON_MODE",), None),
    "price_input_per_mtok": (("EVALTRACE_JUDGE_PRICE_INPUT_PER_MTOK",), None),
    "price_output_per_mtok": (("EVALTRACE_JUDGE_PRICE_OUTPUT_PER_MTOK",), None),
}
_NEGATED = {"no_cache": "cache", "no_judge_cache": "cache"}


class JudgeSettings(BaseModel):
    """How to reach the judge and how hard to try. Build it with `from_env` in applications."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str | None = None
    """Judge model name sent in each request (`EVALTRACE_JUDGE_MODEL`)."""
    base_url: str | None = None
    """OpenAI-style base URL such as `http://localhost:8000/v1` (`EVALTRACE_JUDGE_BASE_URL`, `OPENAI_BASE_URL`)."""
    api_key: SecretStr | None = None
    """Bearer token (`EVALTRACE_JUDGE_API_KEY`, `OPENAI_API_KEY`); never printed and never cached."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds one request may take before it counts as a timeout (then retried)."""
    max_retries: int = Field(default=3, ge=0)
    """Retries after the first attempt, for 429/5xx, timeouts, connection errors and unparseable replies."""
    concurrency: int = Field(default=4, ge=1)
    """Requests in flight at once."""
    max_requests: int | None = Field(default=None, ge=0)
    """Budget of HTTP requests for the run, retries included; `None` means no limit."""
    temperature: float = Field(default=0.0, ge=0)
    """Sampling temperature; 0 keeps verdicts as repeatable as the server allows."""
    samples: int = Field(default=1, ge=1)
    """Verdicts asked per question for a majority vote (each a separate, separately cached request)."""
    cache_dir: Path | None = None
    """Verdict cache folder; default `$EVALTRACE_CACHE_DIR/judge` or `.evaltrace-cache/judge`."""
    cache: bool = True
    """Read and write the verdict cache."""
    json_mode: bool = True
    """Send `response_format: {"type": "json_object"}`; turn off for servers that reject it."""
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million prompt tokens, for the estimated cost."""
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million completion tokens, for the estimated cost."""
    backoff_base: float = Field(default=0.5, gt=0)
    """First retry waits about this many seconds; each further retry doubles it (with jitter)."""
    backoff_max: float = Field(default=20.0, gt=0)
    """Longest backoff between retries, in seconds."""
    retry_after_cap: float = Field(default=60.0, ge=0)
    """Longest wait honoured from a 429's `Retry-After` header, in seconds."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> JudgeSettings:
        """Settings from environment variables, then keyword overrides (the CLI's `--judge-*` options).

        Overrides whose value is `None` are ignored, so CLI options can be passed through as they
        are. Keys are field names (`model`, `base_url`, ...); a `judge_` prefix is accepted, and
        `no_cache=True` / `no_judge_cache=True` turn the cache off.

        Raises:
            InputError: A value is malformed; the message names the variable or option.
            TypeError: An override key is not a setting (a programming error).
        """
        env = os.environ if env is None else env
        values, sources = _values_from_env(env)
        for key, value in overrides.items():
            if value is None:
                continue
            field, value = _override_field(key, value)
            values[field] = value
            sources[field] = (_ENV[field][1] if field in _ENV else None) or f"{field}="
        if "cache_dir" not in values:
            values["cache_dir"] = Path(env.get("EVALTRACE_CACHE_DIR") or ".evaltrace-cache") / "judge"
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            field = str(exc.errors()[0]["loc"][0]) if exc.errors()[0]["loc"] else ""
            raise InputError(f"judge setting {sources.get(field, field)}: {render_validation_errors(exc)}") from None

    def resolved_cache_dir(self) -> Path:
        """The cache folder, applying the default when none was set."""
        if self.cache_dir is not None:
            return self.cache_dir
        return Path(os.environ.get("EVALTRACE_CACHE_DIR") or ".evaltrace-cache") / "judge"

    def missing(self) -> str | None:
        """Why the judge cannot be asked, or `None` when model and base URL are usable."""
        if not self.model:
            return "EVALTRACE_JUDGE_MODEL is not set (or pass --judge-model)"
        if not self.base_url:
            return "EVALTRACE_JUDGE_BASE_URL is not set (nor OPENAI_BASE_URL; or pass --judge-base-url)"
        if not self.base_url.startswith(("http://", "https://")):
            return f"judge base URL must start with http:// or https://, got {self.base_url!r}"
        return None


def _values_from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field, (names, _option) in _ENV.items():
        for name in names:
            if env.get(name, "").strip():
                values[field] = env[name].strip()
                sources[field] = name
                break
    return values, sources


def _override_field(key: str, value: Any) -> tuple[str, Any]:
    if key in _NEGATED or key.removeprefix("judge_") in _NEGATED:
        return "cache", not value
    field = key if key in JudgeSettings.model_fields else key.removeprefix("judge_")
    if field not in JudgeSettings.model_fields:
        raise TypeError(f"unknown judge setting {key!r}; valid: {', '.join(sorted(JudgeSettings.model_fields))}")
    return field, value


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

    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = settings
        self._counters = Counters()
        self._errors = 0
        self._hits = 0
        self._misses = 0
        self._client: JudgeClient | None = None
        self._cache = VerdictCache(settings.resolved_cache_dir()) if settings.cache else None
        self._inflight: dict[str, asyncio.Task[CachedVerdict]] = {}

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
        cached = self._cache.get(key) if self._cache is not None else None
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
            "json_mode": s.json_mode,
            "template": prompt.template,
            "template_version": prompt.version,
            "messages": prompt.messages(),
            "sample": index,
        }

    async def _fetch(self, prompt: RenderedPrompt, index: int, key: str) -> CachedVerdict:
        if self._client is None:
            self._client = JudgeClient(self.settings, self._counters)
        reply = await self._client.complete(prompt.messages(), parse_verdict)
        verdict: Verdict = reply.value
        entry = CachedVerdict(
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
    """
    session = JudgeSession(settings if settings is not None else JudgeSettings.from_env())
    token = _CURRENT.set(session)
    try:
        yield session
    finally:
        _CURRENT.reset(token)
        await session.aclose()


def current_judge() -> JudgeSession | None:
    """The session opened by the innermost `judge_session`, or `None` outside one."""
    return _CURRENT.get()


__all__ = [
    "JudgeError",
    "JudgeOutcome",
    "JudgeSession",
    "JudgeSettings",
    "JudgeStats",
    "current_judge",
    "judge_session",
]
