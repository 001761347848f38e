"""JSON over HTTP to a backend's REST API (Phoenix's, Langfuse's), with the rules OTLP sending keeps.

- No redirect is followed (httpx's default, kept explicit): the key and the body go to the URL
  given, nowhere else, and a 3xx answer is a failure naming the status.
- A key (`Authorization`) goes only to the host of the URL it was given for, and never over plain
  `http://` to another machine (`exporters.check_secret_transport`); no proxy from the environment
  reads it (`network.may_use_env_proxy`).
- A request the backend answers 429 or 5xx (or cannot be reached) is retried with backoff, after
  `Retry-After` when the backend says it, while the request's deadline (`timeout`) allows; what
  still fails is an `InputError` naming the URL (without user info or query) and the HTTP status.
  The backend's own words are never quoted: they may echo what was sent.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from evaltrace.collector.errors import InputError
from evaltrace.collector.network import may_use_env_proxy
from evaltrace.collector.otlp.send.exporters import check_secret_transport, check_url, shown_endpoint
from evaltrace.collector.terminal import printable

Hints = Mapping[int, str] | None
RETRIED = frozenset({429, 500, 502, 503, 504})
_FIRST_WAIT = 0.5


class RestClient:
    """Requests to one backend's REST API at `base` (a URL whose path the API paths are appended to)."""

    def __init__(self, base: str, option: str, timeout: float, auth: dict[str, str] | None = None) -> None:
        check_url(base, option)
        check_secret_transport(base, option, "its key" if auth else None)
        self.base = base.rstrip("/")
        self.option = option
        self._timeout = timeout
        self._client = httpx.Client(
            headers=auth or {},
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            trust_env=may_use_env_proxy(base),  # the key: no proxy that can read it
        )

    def url(self, path: str) -> str:
        """The URL of the API path `path` (after the base's own path; the base's query is dropped)."""
        parts = urlsplit(self.base)
        return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path, query="", fragment=""))

    def request(
        self, method: str, path: str, body: Any = None, *, params: Any = None, lost: str = "", hints: Hints = None
    ) -> Any:
        """Send one request, retried while it may be; the decoded JSON answer (`None` when there is none).

        Raises:
            InputError: the backend could not be reached or did not accept the request; `lost` says what
                was not delivered, `hints` what an HTTP status likely means (both appended to the error line).
        """
        url = self.url(path)
        deadline = time.monotonic() + self._timeout
        wait = _FIRST_WAIT
        while True:
            try:
                reply = self._client.request(method, url, json=body, params=params)
            except httpx.HTTPError as error:
                problem = f"could not connect ({type(error).__name__}): is the backend listening there?"
            else:
                if 200 <= reply.status_code < 300:
                    return _json(reply)
                problem = _refusal(reply)
                hint = (hints or {}).get(reply.status_code)
                problem += f" ({hint})" if hint else ""
                if reply.status_code not in RETRIED:
                    raise InputError(self._failure(url, problem, lost))
                wait = max(wait, _retry_after(reply))
            if time.monotonic() + wait > deadline:
                raise InputError(self._failure(url, problem, lost))
            time.sleep(wait)
            wait *= 2

    def close(self) -> None:
        """Close the connections."""
        self._client.close()

    def _failure(self, url: str, problem: str, lost: str) -> str:
        return f"{self.option} {shown_endpoint(url)}: {problem}{'; ' + lost if lost else ''}"


def _refusal(reply: httpx.Response) -> str:
    reason = printable(reply.reason_phrase or "")
    unfollowed = " (a redirect is not followed: give the URL it points to)" if 300 <= reply.status_code < 400 else ""
    return f"the backend answered HTTP {reply.status_code}{' ' + reason if reason else ''}{unfollowed}"


def _retry_after(reply: httpx.Response) -> float:
    """Seconds the backend asks to wait (`Retry-After` in seconds; a date or nonsense counts as 0)."""
    try:
        return max(0.0, float(reply.headers.get("Retry-After", "0")))
    except ValueError:
        return 0.0


def _json(reply: httpx.Response) -> Any:
    if not reply.content:
        return None
    try:
        return reply.json()
    except ValueError:
        return None
