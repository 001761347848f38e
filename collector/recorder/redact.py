"""Optional redaction of everything a span carries before anything is written (variables: docs/recording.md).

Three independent tools, applied in this order to span, event, link and resource attributes:

1. **Drop keys** (`EVALTRACE_REDACT_KEYS`, globs): matching attributes are removed.
2. **No content** (`EVALTRACE_CAPTURE_CONTENT=0`): every content-bearing key of every convention
   the converter reads is removed while the structure stays (roles, tool names, call ids, finish
   reasons, token counts). JSON message lists keep only structural fields by an allow-list, so a
   field nobody anticipated is removed, not kept; tool definitions and schemas lose descriptions;
   status messages (exception text) go. Absent is what the reader reports as "not captured", so
   an empty string is never written in place of content.
3. **Mask** (`EVALTRACE_REDACT_PATTERNS`, plus built-ins with `EVALTRACE_REDACT_DEFAULTS=1`): every
   match inside a string value becomes `[REDACTED]`, at any depth (lists, OTLP maps, bytes' text),
   and inside span, event and scope names and status messages; in log files also the severity
   text, event name and resource. Names are structure the converter reads (`execute_tool
   get_weather`), so only the matched text is replaced. Keys are never masked (flattened keys hold
   indices a broad pattern would destroy): drop a key by glob instead.

A bad pattern given in code raises `ValueError`; one from the environment is logged (naming the
variable) and skipped, because recording must never crash the application it observes.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from evaltrace.collector.recorder._content_keys import (
    EMPTIED,
    Rule,
    content_rule,
    drop_descriptions,
    json_transform,
    keep_parameters,
    keep_structure,
)

logger = logging.getLogger("evaltrace")

MASK = "[REDACTED]"

DEFAULT_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic style secret keys
    r"(?i:\bbearer\s+[A-Za-z0-9._~+/=\-]{8,})",  # Authorization header values
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"(?i:aws_secret_access_key\s*[=:]\s*[A-Za-z0-9/+=]{20,})",  # AWS secret keys in config text
    r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}",  # e-mail addresses
)


class RedactionSettings(BaseModel):
    """What to remove or mask before spans are written (all off by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    drop_keys: tuple[str, ...] = ()
    """Glob patterns of attribute keys to drop (`fnmatch`, case-sensitive)."""
    mask_patterns: tuple[str, ...] = ()
    """Regular expressions whose matches in string values and names become `[REDACTED]`."""
    mask_defaults: bool = False
    """Also mask the built-in patterns (API keys, bearer tokens, AWS keys, e-mail addresses)."""
    capture_content: bool = True
    """False keeps message structure but removes message text, tool arguments and tool results."""

    @field_validator("mask_patterns")
    @classmethod
    def _patterns_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid mask pattern {pattern!r}: {exc}") from exc
        return value

    @property
    def active(self) -> bool:
        """Whether any redaction applies."""
        return bool(self.drop_keys or self.mask_patterns or self.mask_defaults or not self.capture_content)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RedactionSettings:
        """Read `EVALTRACE_REDACT_*` and `EVALTRACE_CAPTURE_CONTENT`, logging (not raising) bad values."""
        # In the application's process, like the exporter's variables: logged, never raised, so not settings.py.
        env = os.environ if environ is None else environ
        keys = tuple(k.strip() for k in env.get("EVALTRACE_REDACT_KEYS", "").split(",") if k.strip())
        return cls(
            drop_keys=keys,
            mask_patterns=_env_patterns(env.get("EVALTRACE_REDACT_PATTERNS", "")),
            mask_defaults=_env_flag(env, "EVALTRACE_REDACT_DEFAULTS", default=False),
            capture_content=_env_flag(env, "EVALTRACE_CAPTURE_CONTENT", default=True),
        )


def _env_flag(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    logger.error("evaltrace: %s=%r is not a boolean (use 1 or 0); using %s", name, raw, int(default))
    return default


def parse_env_patterns(raw: str) -> tuple[tuple[str, ...], list[str]]:
    """Split `EVALTRACE_REDACT_PATTERNS` (JSON array, else one regex per line).

    Returns:
        The patterns that compile, and one message per value that does not.
    """
    text = raw.strip()
    if not text:
        return (), []
    candidates: list[Any]
    if text.startswith("["):
        try:
            candidates = list(json.loads(text))
        except (ValueError, TypeError, RecursionError) as exc:
            return (), [f"not a valid JSON array ({type(exc).__name__}: {exc})"]
    else:
        candidates = [line for line in text.splitlines() if line.strip()]
    kept: list[str] = []
    errors: list[str] = []
    for pattern in candidates:
        try:
            re.compile(str(pattern))
        except re.error as exc:
            errors.append(f"invalid regex '{pattern}' ({exc})")
            continue
        kept.append(str(pattern))
    return tuple(kept), errors


def _env_patterns(raw: str) -> tuple[str, ...]:
    kept, errors = parse_env_patterns(raw)
    for error in errors:
        logger.error("evaltrace: EVALTRACE_REDACT_PATTERNS: %s; recording continues without it", error)
    return kept


class _KeyRules(dict[str, Rule]):
    """Attribute key -> `Rule`, computed on first sight and cached (bounded like `store.encode._LargeKeys`)."""

    limit = 10_000

    def __init__(self, drop: tuple[str, ...], capture_content: bool) -> None:
        super().__init__()
        self._drop = drop
        self._capture = capture_content

    def __missing__(self, key: str) -> Rule:
        rule = self._classify(key)
        if len(self) < self.limit:
            self[key] = rule
        return rule

    def _classify(self, key: str) -> Rule:
        if self._drop and any(fnmatchcase(key, pattern) for pattern in self._drop):
            return Rule.DROP
        if self._capture:
            return Rule.KEEP
        return content_rule(key)


class Redactor:
    """Applies `RedactionSettings` to attributes, names, status messages and log bodies.

    `apply` is the entry point for attribute mappings (span, event, link, resource, log record;
    a log record's body goes through it too, in `runfiles.batches.LogEncoder`); `mask_text` for
    names; `status_message` for span status descriptions.
    """

    def __init__(self, settings: RedactionSettings) -> None:
        self.settings = settings
        patterns = list(settings.mask_patterns) + (list(DEFAULT_PATTERNS) if settings.mask_defaults else [])
        # Compiled one by one: a user pattern may carry global flags such as `(?i)`.
        self._masks = [re.compile(p) for p in patterns]
        self._rules = _KeyRules(settings.drop_keys, settings.capture_content)
        self._transforms: dict[Rule, Callable[[Any], Any]] = {
            Rule.STRUCTURE: keep_structure,
            Rule.SCHEMA: drop_descriptions,
            Rule.PARAMETERS: keep_parameters,
        }

    def apply(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """Return a redacted copy of `attributes` (the input is not modified)."""
        out: dict[str, Any] = {}
        rules = self._rules
        for key, value in attributes.items():
            rule = rules[key]
            if rule is Rule.DROP:
                continue
            if rule is not Rule.KEEP:
                value = json_transform(value, self._transforms[rule])
                if value is EMPTIED:
                    continue
            out[key] = self._mask_value(value) if self._masks else value
        return out

    def mask_text(self, text: str) -> str:
        """`text` with every match of the mask patterns replaced by `[REDACTED]` (and nothing else changed)."""
        for pattern in self._masks:
            text = pattern.sub(MASK, text)
        return text

    def status_message(self, text: str | None) -> str | None:
        """A span's status description: removed without content capture (it holds exception text), else masked."""
        if not text or not self.settings.capture_content:
            return None
        return self.mask_text(text) if self._masks else text

    def _mask_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, (list, tuple, Mapping, bytes)):
            return self._mask_deep(value)
        return value

    def _mask_deep(self, value: Any) -> Any:
        """`value` with every string in it masked: lists, OTLP maps (dicts) and bytes at any depth."""
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, Mapping):
            return {k: self._mask_deep(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._mask_deep(v) for v in value]
        if isinstance(value, bytes):
            # The text in the bytes is masked; bytes that are not UTF-8 pass through unchanged.
            text = value.decode("utf-8", "surrogateescape")
            masked = self.mask_text(text)
            return value if masked == text else masked.encode("utf-8", "surrogateescape")
        return value


def build_redactor(settings: RedactionSettings | None) -> Redactor | None:
    """A `Redactor` for `settings`, or `None` when nothing is to be redacted (the fast path)."""
    if settings is None or not settings.active:
        return None
    return Redactor(settings)
