"""Optional redaction of everything a span carries before anything is written.

Three independent tools, applied in this order to span, event, link and resource attributes:

1. **Drop keys** (`EVALTRACE_REDACT_KEYS`, comma-separated globs such as `http.request.header.*`):
   matching attributes are removed.
2. **No content** (`EVALTRACE_CAPTURE_CONTENT=0`): every content-bearing key of every convention
   the converter reads is removed while the structure stays: roles, tool names, call ids, finish
   reasons and token counts are kept. Flat content keys are removed outright (message text, tool
   arguments and results, retrieval documents, prompt templates and their variables, tool and
   agent descriptions, exception messages and stack traces); JSON message lists keep their shape
   with only structural fields left (an allow-list, so a field nobody anticipated is removed, not
   kept); tool definitions and JSON schemas keep their shape without descriptions. Status
   messages, which carry exception text, are removed too. Absent is what the reader reports as
   "not captured", so an empty string is never written in place of content.
3. **Mask** (`EVALTRACE_REDACT_PATTERNS`, one regex per line or a JSON array; plus built-in
   patterns for API keys, bearer tokens, AWS keys and e-mail addresses with
   `EVALTRACE_REDACT_DEFAULTS=1`): every match inside a string value becomes `[REDACTED]`, and so
   does every match inside span names, event names, status messages and instrumentation-scope
   names. Names are structure the converter reads (`execute_tool get_weather`), so only the
   matched text is replaced. Attribute keys are never masked (flattened keys hold indices that a
   broad pattern would destroy): drop a key by glob instead.

A bad pattern given in code raises `ValueError` at construction; a bad pattern from the
environment is logged (naming the variable) and skipped, because recording must never crash the
application it observes.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from enum import Enum
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

# --- What `EVALTRACE_CAPTURE_CONTENT=0` removes -------------------------------------------------
# Flat keys whose whole value is content, by convention.
_CONTENT_KEYS = frozenset(
    {
        # GenAI (v1.37+ and older string forms), including descriptions written by the app
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.tool.description",
        "gen_ai.agent.description",
        "gen_ai.prompt",
        "gen_ai.completion",
        # OpenInference
        "input.value",
        "output.value",
        "tool.description",
        "tool.parameters",  # smolagents: the tool's input schema; old Strands: the call's arguments
        "tool.result",  # old Strands
        "llm.prompts",
        "llm.prompt_template.template",
        "llm.prompt_template.variables",
        "reranker.query",
        "smolagents.task",
        "crew_inputs",
        "crew_agents",
        "crew_tasks",
        # OpenLLMetry
        "traceloop.entity.input",
        "traceloop.entity.output",
        # pydantic-ai
        "tool_arguments",
        "tool_response",
        "final_result",
        "model_request_parameters",  # tool definitions again, plus instruction parts and output templates
        # Google ADK vendor attributes
        "gcp.vertex.agent.llm_request",
        "gcp.vertex.agent.llm_response",
        "gcp.vertex.agent.tool_call_args",
        "gcp.vertex.agent.tool_response",
        # exception events (and log records): the type stays, the text goes
        "exception.message",
        "exception.stacktrace",
    }
)
# Keys holding JSON messages or event bodies: only structural fields survive (`_keep_structure`).
# `content` / `message` are the old per-message events' attributes (Strands' Bedrock blocks).
_STRUCTURED_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "pydantic_ai.all_messages",
        "events",
        "message",
        "tool_calls",
        "content",
    }
)
# Keys holding tool definitions or JSON schemas: descriptions removed, shape kept (`_drop_descriptions`).
_SCHEMA_KEYS = frozenset({"gen_ai.tool.definitions"})
_INVOCATION_PARAMETERS = "llm.invocation_parameters"
# Flattened lists whose leaves are content except a few structural ones.
_FLAT_PREFIXES = (
    "llm.input_messages.",
    "llm.output_messages.",
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "retrieval.documents.",
    "reranker.input_documents.",
    "reranker.output_documents.",
    "embedding.embeddings.",
)
_FLAT_STRUCTURE_LEAVES = frozenset(
    {"role", "name", "id", "tool_call_id", "finish_reason", "type", "function_call_name", "score"}
)
# Flattened tool definitions: `llm.tools.0.tool.json_schema`, `llm.request.functions.0.parameters`, ...
_FLAT_TOOL_PREFIXES = ("llm.tools.", "llm.request.functions.", "gen_ai.tool.definitions.")

# Fields of JSON messages, parts and event bodies that are structure; every other field is removed.
_STRUCTURE_SCALARS = frozenset(
    {
        "role",
        "type",
        "id",
        "name",
        "finish_reason",
        "tool_call_id",
        "call_id",
        "toolUseId",
        "status",
        "mime_type",
        "modality",
        "index",
        "event.name",
    }
)
_STRUCTURE_CONTAINERS = frozenset(
    {"parts", "tool_calls", "function", "message", "content", "toolUse", "toolResult", "function_call"}
)
# JSON-schema keywords holding text written about the data rather than its shape.
_DESCRIPTION_FIELDS = frozenset({"description", "examples", "example"})
# JSON-schema keywords whose value maps names to schemas (the names stay, each schema is walked).
_SCHEMA_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
# `llm.invocation_parameters`: numbers and booleans stay, strings only under these keys.
_PARAMETER_TEXT_KEYS = frozenset({"model", "tool_choice", "reasoning_effort", "service_tier"})
_PARAMETER_SCHEMA_KEYS = frozenset({"tools", "functions", "response_format", "tool_choice"})

_EMPTIED: Any = object()  # a container whose every field was content


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


class _Rule(Enum):
    """What happens to one attribute key (decided once per key, see `_KeyRules`)."""

    KEEP = "keep"
    DROP = "drop"
    STRUCTURE = "structure"  # JSON messages or event bodies: structural fields only
    SCHEMA = "schema"  # tool definitions / JSON schemas: descriptions removed
    PARAMETERS = "parameters"  # `llm.invocation_parameters`


class _KeyRules(dict[str, _Rule]):
    """Attribute key -> `_Rule`, computed on first sight and cached (bounded like `_encode._LargeKeys`)."""

    limit = 10_000

    def __init__(self, drop: tuple[str, ...], capture_content: bool) -> None:
        super().__init__()
        self._drop = drop
        self._capture = capture_content

    def __missing__(self, key: str) -> _Rule:
        rule = self._classify(key)
        if len(self) < self.limit:
            self[key] = rule
        return rule

    def _classify(self, key: str) -> _Rule:
        if self._drop and any(fnmatchcase(key, pattern) for pattern in self._drop):
            return _Rule.DROP
        if self._capture:
            return _Rule.KEEP
        return content_rule(key)


def content_rule(key: str) -> _Rule:
    """What `EVALTRACE_CAPTURE_CONTENT=0` does to the attribute `key`."""
    if key in _CONTENT_KEYS:
        return _Rule.DROP
    if key in _STRUCTURED_KEYS:
        return _Rule.STRUCTURE
    if key in _SCHEMA_KEYS:
        return _Rule.SCHEMA
    if key == _INVOCATION_PARAMETERS:
        return _Rule.PARAMETERS
    if key.startswith(_FLAT_PREFIXES):
        return _Rule.KEEP if key.rpartition(".")[2] in _FLAT_STRUCTURE_LEAVES else _Rule.DROP
    if key.startswith(_FLAT_TOOL_PREFIXES):
        leaf = key.rpartition(".")[2]
        if leaf in _DESCRIPTION_FIELDS:
            return _Rule.DROP
        return _Rule.SCHEMA if leaf in {"json_schema", "parameters", "input_schema"} else _Rule.KEEP
    return _Rule.KEEP


class Redactor:
    """Applies `RedactionSettings` to attributes, names, status messages and log bodies.

    `apply` is the entry point for attribute mappings (span, event, link, resource, log record);
    `mask_text` for names; `status_message` for span status descriptions; `body` for a log
    record's body (an OTel `AnyValue`).
    """

    def __init__(self, settings: RedactionSettings) -> None:
        self.settings = settings
        patterns = list(settings.mask_patterns) + (list(DEFAULT_PATTERNS) if settings.mask_defaults else [])
        # Compiled one by one: a user pattern may carry global flags such as `(?i)`.
        self._masks = [re.compile(p) for p in patterns]
        self._rules = _KeyRules(settings.drop_keys, settings.capture_content)
        self._transforms: dict[_Rule, Callable[[Any], Any]] = {
            _Rule.STRUCTURE: _keep_structure,
            _Rule.SCHEMA: _drop_descriptions,
            _Rule.PARAMETERS: _keep_parameters,
        }

    def apply(self, attributes: Mapping[str, Any]) -> dict[str, Any]:
        """Return a redacted copy of `attributes` (the input is not modified)."""
        out: dict[str, Any] = {}
        rules = self._rules
        for key, value in attributes.items():
            rule = rules[key]
            if rule is _Rule.DROP:
                continue
            if rule is not _Rule.KEEP:
                value = _json_transform(value, self._transforms[rule])
                if value is _EMPTIED:
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

    def body(self, value: Any) -> Any:
        """A log record's body (an OTel `AnyValue`): `None` when it is all content, masked otherwise.

        Without content capture a mapping keeps its structural fields (as JSON messages do) and any
        other body (text, bytes, a list of values) is content.
        """
        if value is None:
            return None
        if not self.settings.capture_content:
            if not isinstance(value, Mapping):
                return None
            value = _guarded(_keep_structure, dict(value))
            if value is _EMPTIED:
                return None
        return self._mask_deep(value) if self._masks else value

    def _mask_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, (list, tuple)) and value and isinstance(value[0], str):
            return [self.mask_text(v) for v in value]
        return value

    def _mask_deep(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.mask_text(value)
        if isinstance(value, Mapping):
            return {k: self._mask_deep(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._mask_deep(v) for v in value]
        return value


def _json_transform(value: Any, transform: Callable[[Any], Any]) -> Any:
    """Apply `transform` to the JSON in `value`; `_EMPTIED` when nothing structural is left.

    A value that is not a JSON object or array (plain text, a number, bad or too deeply nested
    JSON) is content as a whole and removed.
    """
    if not isinstance(value, str):
        return _EMPTIED
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return _EMPTIED
    if not isinstance(data, (dict, list)):
        return _EMPTIED
    stripped = _guarded(transform, data)
    if stripped is _EMPTIED:
        return _EMPTIED
    return json.dumps(stripped, ensure_ascii=False)


def _guarded(transform: Callable[[Any], Any], data: Any) -> Any:
    # Nesting deep enough to exhaust the stack is removed whole: recording must not fail on it.
    try:
        return transform(data)
    except RecursionError:
        return _EMPTIED


def _keep_structure(value: Any) -> Any:
    """Structural fields of JSON messages, parts and event bodies (an allow-list); `_EMPTIED` if none."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _STRUCTURE_SCALARS and (item is None or isinstance(item, (str, int, float, bool))):
                out[key] = item
            elif key in _STRUCTURE_CONTAINERS and isinstance(item, (dict, list)):
                kept = _keep_structure(item)
                if kept is not _EMPTIED:
                    out[key] = kept
        return out if out or not value else _EMPTIED
    if isinstance(value, list):
        items = [kept for item in value if (kept := _keep_structure(item)) is not _EMPTIED]
        return items if items or not value else _EMPTIED
    return _EMPTIED  # a bare value inside a message is content


def _drop_descriptions(value: Any, names: bool = False) -> Any:
    """A tool definition or JSON schema without its descriptions and examples.

    `names` is true for a mapping whose keys are property names (under `properties` and the
    like): those keys are kept even when a property is called `description`.
    """
    if isinstance(value, dict):
        return {
            key: _drop_descriptions(item, names=not names and key in _SCHEMA_NAME_MAPS)
            for key, item in value.items()
            if names or key not in _DESCRIPTION_FIELDS
        }
    if isinstance(value, list):
        return [_drop_descriptions(item) for item in value]
    return value


def _keep_parameters(value: Any) -> Any:
    """`llm.invocation_parameters` without prompt-like text: numbers, flags, model and tool schemas."""
    if not isinstance(value, dict):
        return _EMPTIED
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in _PARAMETER_SCHEMA_KEYS and isinstance(item, (dict, list)):
            out[key] = _drop_descriptions(item)
        elif item is None or isinstance(item, (bool, int, float)):
            out[key] = item
        elif key in _PARAMETER_TEXT_KEYS and isinstance(item, str):
            out[key] = item
    return out


def build_redactor(settings: RedactionSettings | None) -> Redactor | None:
    """A `Redactor` for `settings`, or `None` when nothing is to be redacted (the fast path)."""
    if settings is None or not settings.active:
        return None
    return Redactor(settings)
