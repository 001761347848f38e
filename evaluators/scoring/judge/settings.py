"""Judge settings: where the judge is, which key goes there, and how hard to try.

Setup errors stop the run (`JudgeSetupError`, an `InputError`: exit 2 in the CLI) instead of
becoming error results, which a gate would read as a regression of the agent:

- Opening a session checks the settings: a model and a base URL are set, the URL is http(s), and
  a key would not travel unencrypted to a host outside loopback (unless `allow_insecure`).
- The session's first request is its contact check: while it is in flight no other request is
  sent, and when it ends in a refused connection, a refused key (401/403) or no such endpoint or
  model (404), no further request is sent and the session raises that error when it closes. There
  is no separate probe: no request is spent on it, it works with any OpenAI-compatible server
  (many have no `/models`), and a run whose verdicts all come from the cache never contacts the
  server at all (nor fails for a server that is down).

Faults during a run (timeouts, 429, 5xx, replies that are not verdicts, a refusal after the first
contact) stay error results of the entries they hit.

Keys: `EVALTRACE_JUDGE_API_KEY` (or `--judge-api-key`) goes to the configured judge. The
`OPENAI_API_KEY` fallback goes only to `OPENAI_BASE_URL` or to OpenAI's own host
(`https://api.openai.com`), never to a base URL set by `EVALTRACE_JUDGE_BASE_URL` or
`--judge-base-url` that points elsewhere.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import Field, PrivateAttr, SecretStr, field_validator

from evaltrace.collector.cachedir import cache_root
from evaltrace.collector.errors import InputError
from evaltrace.collector.network import is_loopback
from evaltrace.collector.settings import EnvSettings, env
from evaltrace.evaluators.scoring.judge.client import ResponseFormat, display_url

_OPENAI_HOST = "api.openai.com"
"""The host the OpenAI SDK talks to by default: `OPENAI_API_KEY` may go there without `OPENAI_BASE_URL`."""


class JudgeSetupError(InputError):
    """The judge is not usable as configured (settings, connection, key); the run stops with exit 2."""


class JudgeSettings(EnvSettings):
    """How to reach the judge and how hard to try: options (by field name) over `EVALTRACE_JUDGE_*` variables.

    Build it with `from_env`, which also applies the `OPENAI_API_KEY` rule.
    """

    label: ClassVar[str] = "judge setting"
    options: ClassVar[dict[str, str]] = {
        "model": "--judge-model",
        "base_url": "--judge-base-url",
        "api_key": "--judge-api-key",
        "timeout": "--judge-timeout",
        "concurrency": "--judge-concurrency",
        "max_requests": "--judge-max-requests",
        "cache_dir": "--judge-cache-dir",
        "cache": "--no-judge-cache",
        "allow_insecure": "--judge-allow-insecure",
    }

    model: str | None = Field(default=None, validation_alias=env("model", "EVALTRACE_JUDGE_MODEL"))
    """Judge model name sent in each request (`EVALTRACE_JUDGE_MODEL`)."""
    base_url: str | None = Field(
        default=None, validation_alias=env("base_url", "EVALTRACE_JUDGE_BASE_URL", "OPENAI_BASE_URL")
    )
    """OpenAI-style base URL such as `http://localhost:8000/v1` (`EVALTRACE_JUDGE_BASE_URL`, `OPENAI_BASE_URL`)."""
    api_key: SecretStr | None = Field(default=None, validation_alias=env("api_key", "EVALTRACE_JUDGE_API_KEY"))
    """Bearer token (`EVALTRACE_JUDGE_API_KEY`; `OPENAI_API_KEY` only for `OPENAI_BASE_URL` or OpenAI's
    host); never printed, cached or written to a report."""
    allow_insecure: bool = Field(
        default=False, validation_alias=env("allow_insecure", "EVALTRACE_JUDGE_ALLOW_INSECURE")
    )
    """Send the key over plain `http://` to a host outside loopback (`EVALTRACE_JUDGE_ALLOW_INSECURE`)."""
    timeout: float = Field(default=60.0, gt=0, validation_alias=env("timeout", "EVALTRACE_JUDGE_TIMEOUT"))
    """Seconds one request may take in total, from sending to the last byte of the reply (then retried)."""
    max_retries: int = Field(default=3, ge=0, validation_alias=env("max_retries", "EVALTRACE_JUDGE_MAX_RETRIES"))
    """Retries after the first attempt, for 429/5xx, timeouts, connection errors and unparseable replies."""
    concurrency: int = Field(default=4, ge=1, validation_alias=env("concurrency", "EVALTRACE_JUDGE_CONCURRENCY"))
    """Requests in flight at once."""
    max_requests: int | None = Field(
        default=None, ge=0, validation_alias=env("max_requests", "EVALTRACE_JUDGE_MAX_REQUESTS")
    )
    """Budget of HTTP requests for the run, retries included; `None` means no limit."""
    temperature: float = Field(default=0.0, ge=0, validation_alias=env("temperature", "EVALTRACE_JUDGE_TEMPERATURE"))
    """Sampling temperature; 0 keeps verdicts as repeatable as the server allows."""
    samples: int = Field(default=1, ge=1, validation_alias=env("samples", "EVALTRACE_JUDGE_SAMPLES"))
    """Verdicts asked per question for a majority vote (each a separate, separately cached request)."""
    cache_dir: Path | None = Field(default=None, validation_alias=env("cache_dir", "EVALTRACE_JUDGE_CACHE_DIR"))
    """Cache root the verdicts are kept under, in its `judge/` (`None`: the cache root, `cachedir.cache_root`)."""
    cache: bool = Field(default=True, validation_alias=env("cache", "EVALTRACE_JUDGE_CACHE"))
    """Read and write the verdict cache."""
    response_format: ResponseFormat = Field(
        default="json_schema", validation_alias=env("response_format", "EVALTRACE_JUDGE_RESPONSE_FORMAT")
    )
    """Structured output asked for: `json_schema` (the verdict's schema), `json_object` or `none`. A
    server that rejects it is asked again with the next weaker one, for the rest of the session."""
    price_input_per_mtok: float | None = Field(
        default=None, ge=0, validation_alias=env("price_input_per_mtok", "EVALTRACE_JUDGE_PRICE_INPUT_PER_MTOK")
    )
    """USD per million prompt tokens, for the estimated cost."""
    price_output_per_mtok: float | None = Field(
        default=None, ge=0, validation_alias=env("price_output_per_mtok", "EVALTRACE_JUDGE_PRICE_OUTPUT_PER_MTOK")
    )
    """USD per million completion tokens, for the estimated cost."""
    backoff_base: float = Field(default=0.5, gt=0)
    """First retry waits about this many seconds; each further retry doubles it (with jitter)."""
    backoff_max: float = Field(default=20.0, gt=0)
    """Longest backoff between retries, in seconds."""
    retry_after_cap: float = Field(default=60.0, ge=0)
    """Longest wait honoured from a 429's `Retry-After` header, in seconds."""

    _withheld_key: str | None = PrivateAttr(default=None)
    # Names a key found in the environment but not sent to this base URL, for the 401 message.

    @field_validator("api_key")
    @classmethod
    def _strip_key(cls, value: SecretStr | None) -> SecretStr | None:
        # A key read from a file (`$(cat key.txt)`) often ends in a newline, which no header may carry.
        if value is None:
            return None
        stripped = value.get_secret_value().strip()
        return SecretStr(stripped) if stripped else None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> Self:
        """Settings from `given` (the `--judge-*` options by field name), then the environment, then the defaults.

        A `None` in `given` is not given. `OPENAI_API_KEY` is taken only for `OPENAI_BASE_URL` or OpenAI's
        own host (see the module).

        Raises:
            InputError: A value is malformed; the message names the variable or option.
            TypeError: A keyword is not a setting (a programming error).
        """
        variables = os.environ if environ is None else environ
        values = cls.environment_values(variables)
        given = dict(given)
        withheld = None
        if given.get("api_key") is None and "api_key" not in values and variables.get("OPENAI_API_KEY", "").strip():
            if _openai_key_allowed(given.get("base_url") or values.get("base_url"), variables.get("OPENAI_BASE_URL")):
                given["api_key"] = variables["OPENAI_API_KEY"]
            else:
                withheld = "OPENAI_API_KEY"
        settings = super().from_env(variables, **given)
        settings._withheld_key = withheld
        return settings

    def resolved_cache_dir(self) -> Path:
        """The cache root of the verdicts, applying the default when none was set."""
        return self.cache_dir if self.cache_dir is not None else cache_root()

    def require_usable(self) -> None:
        """Stop here when the judge cannot be asked as configured (`missing` says why).

        Raises:
            JudgeSetupError: `missing` found a problem.
        """
        problem = self.missing()
        if problem is not None:
            raise JudgeSetupError(f"judge setup: {problem}")

    def missing(self) -> str | None:
        """Why the judge cannot be asked as configured, or `None` when it can.

        Checks that model and base URL are set, that the URL is http(s), that the key fits in an
        HTTP header, and that no credential would go unencrypted to a host outside loopback.
        """
        if not self.model:
            return "EVALTRACE_JUDGE_MODEL is not set (or pass --judge-model)"
        if not self.base_url:
            return "EVALTRACE_JUDGE_BASE_URL is not set (nor OPENAI_BASE_URL; or pass --judge-base-url)"
        shown = display_url(self.base_url)
        try:
            parts = urllib.parse.urlsplit(self.base_url)
            parts.port  # noqa: B018 - raises for a malformed port
        except ValueError:
            return f"judge base URL {shown} is malformed"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"judge base URL must start with http:// or https:// and name a host, got {shown}"
        key = self.api_key.get_secret_value() if self.api_key is not None else ""
        if key and not all(33 <= ord(c) < 127 for c in key):
            # The key itself is never echoed: an error message may end up in a CI log.
            return "the judge API key contains spaces, control or non-ASCII characters, which no HTTP header can carry"
        has_credentials = bool(key) or parts.username is not None or parts.password is not None
        if has_credentials and parts.scheme == "http" and not is_loopback(parts.hostname) and not self.allow_insecure:
            return (
                f"refusing to send the judge API key unencrypted over http:// to {parts.hostname}: use https://, "
                "a loopback address, or pass --judge-allow-insecure (EVALTRACE_JUDGE_ALLOW_INSECURE=1) "
                "if the network is trusted"
            )
        return None

    def key_hint(self) -> str:
        """What to add to a refused-key message about a key found in the environment but not sent."""
        if self._withheld_key is None:
            return ""
        return (
            f" ({self._withheld_key} was not sent: it goes only to OPENAI_BASE_URL or https://{_OPENAI_HOST}; "
            "set EVALTRACE_JUDGE_API_KEY for this judge)"
        )


def _openai_key_allowed(base_url: Any, openai_base_url: str | None) -> bool:
    # OPENAI_API_KEY belongs to OPENAI_BASE_URL (or OpenAI itself), not to any judge URL.
    if not isinstance(base_url, str) or not base_url.strip():
        return False
    if openai_base_url and _same_url(base_url, openai_base_url):
        return True
    try:
        parts = urllib.parse.urlsplit(base_url.strip())
    except ValueError:
        return False
    return parts.scheme == "https" and (parts.hostname or "") == _OPENAI_HOST and parts.port in (None, 443)


def _same_url(a: str, b: str) -> bool:
    return a.strip().rstrip("/") == b.strip().rstrip("/")
