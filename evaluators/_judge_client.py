"""An async client for any OpenAI-compatible chat-completions endpoint, built for judging.

One request at a time is an attempt. Attempts that may succeed when repeated (HTTP 429, 408 and
5xx, timeouts, connection errors, bodies or verdicts that do not parse) are retried with
exponential backoff and jitter; a 429's `Retry-After` is honoured up to a cap. Other HTTP errors
(400, 401, 404, ...) are not retried: repeating them only spends the budget. Concurrency is
bounded by a semaphore held only while a request is in flight, and every attempt, retries
included, counts against the run's request budget because every attempt can be billed.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

if TYPE_CHECKING:
    import httpx

    from evaltrace.evaluators.judge import JudgeSettings

T = TypeVar("T")

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


class JudgeError(Exception):
    """A judge verdict could not be obtained; the message is shown to the user as the entry's reason."""


class JudgeConfigError(JudgeError):
    """A required judge setting is missing or malformed."""


class JudgeUnavailableError(JudgeError):
    """The judge could not be reached, timed out, or answered with an HTTP error."""


class JudgeReplyError(JudgeError):
    """The judge kept answering something that is not a verdict."""


class JudgeBudgetError(JudgeError):
    """The run's judge request budget is used up."""


class Verdict(BaseModel):
    """A judge's label: strict types, so `"true"` or `1` is not accepted as a boolean."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    passed: StrictBool
    reason: StrictStr


def parse_verdict(text: str) -> Verdict:
    """Find the verdict object in a reply: plain JSON, fenced JSON, or JSON inside prose.

    Raises:
        JudgeReplyError: No JSON object with a boolean `passed` and a string `reason` was found.
    """
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            try:
                return Verdict.model_validate(obj)
            except ValidationError:
                pass
        start = text.find("{", start + 1)
    raise JudgeReplyError(f"unparseable judge reply (expected {{'passed': bool, 'reason': str}}): {_snippet(text)}")


@dataclass
class Counters:
    """Mutable request counters shared by a session and its client."""

    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    budget_exhausted: bool = False


@dataclass(frozen=True)
class Completion(Generic[T]):
    """A parsed reply with the tokens it cost."""

    value: T
    prompt_tokens: int
    completion_tokens: int


class _Retry(Exception):
    # Internal signal: this attempt failed in a way worth repeating, after `wait` seconds if set.
    def __init__(self, error: JudgeError, wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait = wait


class JudgeClient:
    """Sends chat-completion requests with retries, a concurrency bound and a request budget."""

    def __init__(self, settings: JudgeSettings, counters: Counters) -> None:
        self._settings = settings
        self._counters = counters
        self._url = chat_completions_url(settings.base_url or "")
        self._semaphore = asyncio.Semaphore(settings.concurrency)
        # httpx (~0.2 s to import) is loaded only when a judge session opens, never by rule-only runs.
        import httpx

        headers = {"Content-Type": "application/json"}
        if settings.api_key is not None and settings.api_key.get_secret_value():
            headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(settings.timeout), headers=headers)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def complete(self, messages: list[dict[str, str]], parse: Callable[[str], T]) -> Completion[T]:
        """Ask the judge and parse its reply, retrying what is worth retrying.

        Raises:
            JudgeError: The last failure once retries are spent, or a budget/HTTP error at once.
        """
        body = self._body(messages)
        for attempt in range(self._settings.max_retries + 1):
            try:
                return await self._attempt(body, parse)
            except _Retry as retry:
                if attempt == self._settings.max_retries:
                    raise retry.error from None
                self._counters.retries += 1
                await asyncio.sleep(self._delay(attempt, retry.wait))
        raise AssertionError("unreachable: the loop returns or raises")

    def _body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._settings.model,
            "messages": messages,
            "temperature": self._settings.temperature,
        }
        if self._settings.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._settings.retry_after_cap)
        ceiling = min(self._settings.backoff_max, self._settings.backoff_base * 2.0**attempt)
        # Jitter spreads retries of many concurrent requests so they do not hit the server together.
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    def _take_budget(self) -> None:
        limit = self._settings.max_requests
        if limit is not None and self._counters.requests >= limit:
            self._counters.budget_exhausted = True
            raise JudgeBudgetError(
                f"judge request budget exhausted: all {limit} requests allowed for this run were sent "
                "(raise --judge-max-requests / EVALTRACE_JUDGE_MAX_REQUESTS); this entry was not judged"
            )
        self._counters.requests += 1

    async def _attempt(self, body: dict[str, Any], parse: Callable[[str], T]) -> Completion[T]:
        async with self._semaphore:
            self._take_budget()
            response = await self._send(body)
        _check_status(response)
        content, prompt_tokens, completion_tokens = _read_reply(response)
        # Tokens are counted even when the verdict does not parse: the provider bills them.
        self._counters.prompt_tokens += prompt_tokens
        self._counters.completion_tokens += completion_tokens
        try:
            value = parse(content)
        except JudgeReplyError as exc:
            raise _Retry(exc) from None
        return Completion(value=value, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    async def _send(self, body: dict[str, Any]) -> httpx.Response:
        import httpx  # already loaded by __init__

        try:
            return await self._http.post(self._url, json=body)
        except httpx.TimeoutException:
            raise _Retry(
                JudgeUnavailableError(f"judge at {self._url} did not answer within {self._settings.timeout:g}s")
            ) from None
        except httpx.TransportError as exc:
            detail = str(exc) or type(exc).__name__
            raise _Retry(JudgeUnavailableError(f"cannot reach judge at {self._url}: {detail}")) from None


def chat_completions_url(base_url: str) -> str:
    """The endpoint for an OpenAI-style base URL (`.../v1`); a full endpoint URL is kept as is."""
    base = base_url.rstrip("/")
    return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


def _check_status(response: httpx.Response) -> None:
    status = response.status_code
    if status < 400:
        return
    error = JudgeUnavailableError(f"judge answered HTTP {status}: {_snippet(response.text)}")
    if status == 429:
        raise _Retry(error, _retry_after(response.headers))
    if status >= 500 or status in _RETRYABLE_STATUS:
        raise _Retry(error)
    raise error


def _retry_after(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:  # an HTTP date is GMT by definition
        moment = moment.replace(tzinfo=datetime.UTC)
    return max(0.0, moment.timestamp() - time.time())


def _read_reply(response: httpx.Response) -> tuple[str, int, int]:
    try:
        body = response.json()
        content = body["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _Retry(JudgeReplyError(f"unparseable judge response body: {_snippet(response.text)}")) from None
    if not isinstance(content, str):
        raise _Retry(JudgeReplyError("judge reply has no text content (refusal or tool call?)"))
    usage = body.get("usage") if isinstance(body, dict) else None
    return content, _int_field(usage, "prompt_tokens"), _int_field(usage, "completion_tokens")


def _int_field(mapping: Any, key: str) -> int:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _snippet(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
