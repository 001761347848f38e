"""An async client for any OpenAI-compatible chat-completions endpoint, built for judging.

One request at a time is an attempt. Attempts that may succeed when repeated (HTTP 429, 408 and
5xx, timeouts, connection errors, bodies or verdicts that do not parse) are retried with
exponential backoff and jitter; a 429's `Retry-After` is honoured up to a cap. Other HTTP errors
(400, 401, 404, ...) are not retried: repeating them only spends the budget. Concurrency is
bounded by a semaphore held only while a request is in flight, and every attempt, retries
included, counts against the run's request budget because every attempt can be billed.

A reply counts only as a verdict `verdict.py` accepts. Structured output (`response_format` with a JSON schema) is asked
for, and a server that rejects it is asked again with a weaker format, remembered for the session.

Every error message leaving the client has the API key and URL credentials removed.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import random
import re
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import httpx

    from evaltrace.evaluators.scoring.judge.settings import JudgeSettings

from evaltrace.collector.network import may_use_env_proxy
from evaltrace.evaluators.scoring.judge.verdict import (
    VERDICT_SCHEMA,
    JudgeBudgetError,
    JudgeError,
    JudgeRefusedError,
    JudgeReplyError,
    JudgeUnavailableError,
    Verdict,
    parse_verdict,
    snippet,
)

ResponseFormat = Literal["json_schema", "json_object", "none"]
"""What the client asks of the server's output: a strict JSON schema, any JSON object, or nothing."""

_WEAKER: dict[ResponseFormat, ResponseFormat] = {"json_schema": "json_object", "json_object": "none"}
"""The format to ask next when a server rejects one."""

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_REFUSAL_STATUS = frozenset({401, 403, 404})
"""Answers that say the judge is not set up for this client: a refused key, or no such endpoint or model."""


class Redactor:
    """Removes secrets (the API key, URL credentials) from text bound for messages, reports and logs."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if len(secret) < 4:
                continue  # too short to remove without mangling unrelated text
            # As written, as a JSON string escapes it, and as a URL encodes it.
            forms.update({secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe="")})
        self._forms = sorted(forms, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        """`text` with every secret replaced by `***`."""
        for form in self._forms:
            text = text.replace(form, "***")
        return text


_SECRET_QUERY = re.compile(r"key|token|secret|sig|pass|auth", re.IGNORECASE)


def display_url(url: str) -> str:
    """`url` safe to print: user, password and secret-looking query values become `***`."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - a malformed port raises here, and the URL is then shown masked whole
    except ValueError:
        return "<malformed URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        query = "&".join(
            f"{urllib.parse.quote(k)}={'***' if _SECRET_QUERY.search(k) else urllib.parse.quote(v)}" for k, v in pairs
        )
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def url_secrets(url: str) -> list[str]:
    """The credentials written into a URL (user, password, secret-looking query values), for a `Redactor`."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return [url]
    found = [urllib.parse.unquote(s) for s in (parts.username, parts.password) if s]
    found += [s for s in (parts.username, parts.password) if s]
    found += [v for k, v in urllib.parse.parse_qsl(parts.query, keep_blank_values=True) if _SECRET_QUERY.search(k)]
    return found


@dataclass
class Counters:
    """Mutable request counters shared by a session and its client."""

    requests: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    budget_exhausted: bool = False


@dataclass(frozen=True)
class Completion:
    """A verdict with the tokens it cost."""

    value: Verdict
    prompt_tokens: int
    completion_tokens: int


class RequestBudget(Protocol):
    """A request budget kept outside the client: shared by clients in several processes (the Ray engine)."""

    async def take(self) -> bool:
        """Take one request from the run's budget; `False` when none is left."""
        ...


class _Retry(Exception):
    # Internal signal: this attempt failed in a way worth repeating, after `wait` seconds if set.
    def __init__(self, error: JudgeError, wait: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.wait = wait


class _Downgrade(Exception):
    # Internal signal: the server rejected the response format; ask again with a weaker one.
    pass


class JudgeClient:
    """Sends chat-completion requests with retries, a concurrency bound and a request budget."""

    def __init__(self, settings: JudgeSettings, counters: Counters, budget: RequestBudget | None = None) -> None:
        self._settings = settings
        self._counters = counters
        self._budget = budget
        """Where `max_requests` is counted when the run's budget is shared; `None`: in `counters`."""
        self._url = chat_completions_url(settings.base_url or "")
        self._shown_url = display_url(self._url)
        self._semaphore = asyncio.Semaphore(settings.concurrency)
        self.response_format: ResponseFormat = settings.response_format
        """The format asked for now: the configured one, or a weaker one after the server rejected it."""
        key = settings.api_key.get_secret_value() if settings.api_key is not None else ""
        self.redact = Redactor([key, *url_secrets(self._url)])
        # httpx (~0.2 s to import) is loaded only when a judge session opens, never by rule-only runs.
        import httpx

        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        # No redirects: a redirect to another host must not carry the key there. Proxies from the
        # environment only where the key stays encrypted end to end (`collector.network.may_use_env_proxy`).
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(settings.timeout),
            headers=headers,
            follow_redirects=False,
            trust_env=may_use_env_proxy(self._url),
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def complete(self, messages: list[dict[str, str]]) -> Completion:
        """Ask the judge and parse its verdict, retrying what is worth retrying.

        Raises:
            JudgeError: The last failure once retries are spent, or a budget/HTTP error at once;
                its message has every secret removed.
        """
        try:
            return await self._complete(messages)
        except JudgeError as exc:
            exc.args = (self.redact(str(exc)),)
            raise

    async def _complete(self, messages: list[dict[str, str]]) -> Completion:
        attempt = 0
        while True:
            try:
                return await self._attempt(messages)
            except _Downgrade:
                continue  # a new format is not a retry of the same request
            except _Retry as retry:
                if attempt == self._settings.max_retries:
                    raise retry.error from None
                attempt += 1
                self._counters.retries += 1
                await asyncio.sleep(self._delay(attempt - 1, retry.wait))

    def _body(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._settings.model,
            "messages": messages,
            "temperature": self._settings.temperature,
        }
        if self.response_format == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "strict": True, "schema": VERDICT_SCHEMA},
            }
        elif self.response_format == "json_object":
            body["response_format"] = {"type": "json_object"}
        return body

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self._settings.retry_after_cap)
        ceiling = min(self._settings.backoff_max, self._settings.backoff_base * 2.0**attempt)
        # Jitter spreads retries of many concurrent requests so they do not hit the server together.
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    async def _take_budget(self) -> None:
        limit = self._settings.max_requests
        if limit is None:
            allowed = True
        elif self._budget is not None:
            allowed = await self._budget.take()
        else:
            allowed = self._counters.requests < limit
        if not allowed:
            self._counters.budget_exhausted = True
            raise JudgeBudgetError(
                f"judge request budget exhausted: all {limit} requests allowed for this run were sent "
                "(raise --judge-max-requests / EVALTRACE_JUDGE_MAX_REQUESTS); this entry was not judged"
            )
        self._counters.requests += 1

    async def _attempt(self, messages: list[dict[str, str]]) -> Completion:
        asked = self.response_format
        async with self._semaphore:
            await self._take_budget()
            response = await self._send(self._body(messages))
        self._check_status(response, asked)
        content, prompt_tokens, completion_tokens = _read_reply(response)
        # Tokens are counted even when the verdict does not parse: the provider bills them.
        self._counters.prompt_tokens += prompt_tokens
        self._counters.completion_tokens += completion_tokens
        try:
            value = parse_verdict(content)
        except JudgeReplyError as exc:
            raise _Retry(exc) from None
        return Completion(value=value, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    async def _send(self, body: dict[str, Any]) -> httpx.Response:
        import httpx  # already loaded by __init__

        try:
            # httpx's timeout applies to each phase (connect, each read, ...): a server dripping
            # bytes could hold a request far longer. The deadline bounds the whole request.
            async with asyncio.timeout(self._settings.timeout):
                return await self._http.post(self._url, json=body)
        except (TimeoutError, httpx.TimeoutException):
            raise _Retry(
                JudgeUnavailableError(f"judge at {self._shown_url} did not answer within {self._settings.timeout:g}s")
            ) from None
        except httpx.ConnectError as exc:
            detail = str(exc) or type(exc).__name__
            raise _Retry(JudgeRefusedError(f"cannot connect to the judge at {self._shown_url}: {detail}")) from None
        except httpx.TransportError as exc:
            detail = str(exc) or type(exc).__name__
            raise _Retry(JudgeUnavailableError(f"cannot reach judge at {self._shown_url}: {detail}")) from None

    def _check_status(self, response: httpx.Response, asked: ResponseFormat) -> None:
        status = response.status_code
        if status < 400:
            return
        text = response.text
        if status in (400, 422) and asked != "none" and _mentions_response_format(text):
            if self.response_format == asked:  # another request may have stepped down already
                self.response_format = _WEAKER[asked]
            raise _Downgrade
        message = f"judge at {self._shown_url} answered HTTP {status}: {snippet(text)}"
        if status in _REFUSAL_STATUS:
            raise JudgeRefusedError(message)
        error = JudgeUnavailableError(message)
        if status == 429:
            raise _Retry(error, _retry_after(response.headers))
        if status >= 500 or status in _RETRYABLE_STATUS:
            raise _Retry(error)
        raise error


def _mentions_response_format(text: str) -> bool:
    # Servers name the parameter they reject: "response_format ... not supported", "json_schema is
    # only available for ...". Other 400s (a bad model name, a prompt too long) are errors as they are.
    lowered = text.lower()
    return any(word in lowered for word in ("response_format", "json_schema", "json_object", "structured output"))


def chat_completions_url(base_url: str) -> str:
    """The endpoint for an OpenAI-style base URL (`.../v1`); a full endpoint URL is kept as is."""
    base = base_url.rstrip("/")
    return base if base.endswith("/chat/completions") else f"{base}/chat/completions"


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
        message = body["choices"][0]["message"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise _Retry(JudgeReplyError(f"unparseable judge response body: {snippet(response.text)}")) from None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        # Some proxies send the content as parts: [{"type": "text", "text": "..."}].
        texts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        content = "".join(t for t in texts if isinstance(t, str)) if texts else None
    if not isinstance(content, str):
        refusal = message.get("refusal") if isinstance(message, dict) else None
        if isinstance(refusal, str) and refusal:
            raise _Retry(JudgeReplyError(f"the judge refused to answer: {snippet(refusal)}"))
        raise _Retry(JudgeReplyError("judge reply has no text content (refusal or tool call?)"))
    usage = body.get("usage") if isinstance(body, dict) else None
    return content, _int_field(usage, "prompt_tokens"), _int_field(usage, "completion_tokens")


def _int_field(mapping: Any, key: str) -> int:
    value = mapping.get(key) if isinstance(mapping, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
