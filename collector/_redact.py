"""Optional redaction of span attributes before anything is written.

Three independent tools, applied in this order to span, event and link attributes:

1. **Drop keys** (`EVALTRACE_REDACT_KEYS`, comma-separated globs such as `http.request.header.*`):
   matching attributes are removed.
2. **No content** (`EVALTRACE_CAPTURE_CONTENT=0`): message text, tool arguments and tool results
   are removed while the structure stays: roles, tool names, call ids, finish reasons and token
   counts are kept. Flat content keys are removed outright; JSON message lists keep their shape
   with the content fields left out. Absent is what the reader reports as "not captured", so an
   empty string is never written in place of content.
3. **Mask** (`EVALTRACE_REDACT_PATTERNS`, one regex per line or a JSON array; plus built-in
   patterns for API keys, bearer tokens, AWS keys and e-mail addresses with
   `EVALTRACE_REDACT_DEFAULTS=1`): every match inside a string value becomes `[REDACTED]`.

A bad pattern given in code raises `ValueError` at construction; a bad pattern from the
environment is logged (naming the variable) and skipped, because recording must never crash the
application it observes.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

logger = logging.getLogger("evaltrace")

MASK = "[REDACTED]"

DEFAULT_PATTERNS: tuple[str, ...] = (
    r"\bsk-[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic style secret keys
    r"(?i:\bbearer\s+[A-Za-z0-9._~+/=\-]{8,})",  # Authorization header values
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key ids
    r"(?i:aws_secret_access_key\s*[=:]\s*[A-Za-z0-9/+=]{20,})",  # AWS secret keys in config text
    r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}",  # e-mail addresses
)

# Flat keys whose whole value is content (new GenAI semconv, OpenInference, OpenLLMetry, pydantic-ai).
_CONTENT_KEYS = frozenset(
    {
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.prompt",
        "gen_ai.completion",
        "input.value",
        "output.value",
        "traceloop.entity.input",
        "traceloop.entity.output",
        "tool_arguments",
        "tool_response",
        "final_result",
        "content",
    }
)
# Keys holding JSON message lists: their structure is kept, their content fields removed.
_STRUCTURED_KEYS = frozenset(
    {"gen_ai.input.messages", "gen_ai.output.messages", "pydantic_ai.all_messages", "message", "tool_calls"}
)
# Flattened message keys (`llm.input_messages.0.message.content`, `gen_ai.prompt.1.content`, ...).
_FLAT_MESSAGE_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "gen_ai.prompt.", "gen_ai.completion.")
_FLAT_CONTENT_SUFFIXES = (".content", ".arguments", ".text", ".message_content.image.image.url")
_FLAT_CONTENT_MARKERS = (".contents.",)
# Fields removed from JSON messages and parts; `type`, `role`, `id`, `name`, `finish_reason` stay.
_JSON_CONTENT_FIELDS = frozenset({"content", "text", "arguments", "response", "result", "uri", "data", "image_url"})


class RedactionSettings(BaseModel):
    """What to remove or mask before spans are written (all off by default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    drop_keys: tuple[str, ...] = ()
    """Glob patterns of attribute keys to drop (`fnmatch`, case-sensitive)."""
    mask_patterns: tuple[str, ...] = ()
    """Regular expressions whose matches in string values become `[REDACTED]`."""
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
        except (ValueError, TypeError) as exc:
            return (), [f"not a valid JSON array ({exc})"]
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


class Redactor:
    """Applies `RedactionSettings` to attribute mappings."""

    def __init__(self, settings: RedactionSettings) -> None:
        self.settings = settings
        patterns = list(settings.mask_patterns) + (list(DEFAULT_PATTERNS) if settings.mask_defaults else [])
        # Compiled one by one: a user pattern may carry global flags such as `(?i)`.
        self._masks = [re.compile(p) for p in patterns]
        self._drop = settings.drop_keys

    def apply(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """Return a redacted copy of `attributes` (the input is not modified)."""
        out: dict[str, Any] = {}
        for key, value in attributes.items():
            if self._drop and any(fnmatchcase(key, pattern) for pattern in self._drop):
                continue
            if not self.settings.capture_content:
                if _is_content_key(key):
                    continue
                if key in _STRUCTURED_KEYS and isinstance(value, str):
                    stripped = _strip_json_content(value)
                    if stripped is None:
                        continue
                    value = stripped
            out[key] = self._mask_value(value) if self._masks else value
        return out

    def _mask_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._mask_text(value)
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
            return [self._mask_text(v) for v in value]
        return value

    def _mask_text(self, text: str) -> str:
        for pattern in self._masks:
            text = pattern.sub(MASK, text)
        return text


def _is_content_key(key: str) -> bool:
    if key in _CONTENT_KEYS:
        return True
    if key.startswith(_FLAT_MESSAGE_PREFIXES):
        return key.endswith(_FLAT_CONTENT_SUFFIXES) or any(m in key for m in _FLAT_CONTENT_MARKERS)
    return False


def _strip_json_content(text: str) -> str | None:
    """Remove content fields from JSON messages; `None` when the text is not JSON (drop it whole)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, (dict, list)):
        return None
    return json.dumps(_strip(data), ensure_ascii=False)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _JSON_CONTENT_FIELDS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def build_redactor(settings: RedactionSettings | None) -> Redactor | None:
    """A `Redactor` for `settings`, or `None` when nothing is to be redacted (the fast path)."""
    if settings is None or not settings.active:
        return None
    return Redactor(settings)
