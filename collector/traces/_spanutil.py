"""Helpers every convention extractor shares: errors, usage, redaction markers, tool arguments.

Extractors for all conventions (GenAI, OpenInference, OpenLLMetry) read errors the same way
(status, `error.type`, `exception` events), treat the same redaction markers as "not captured",
and parse tool arguments with the same leniency, so those rules live here once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _attributes as A
from evaltrace.collector.traces import _lenient_json
from evaltrace.collector.traces._construct import RecordFactory, ints_or_none
from evaltrace.collector.traces._lenient_json import parse_json
from evaltrace.collector.traces.records import Usage


def first_attr(attributes: Mapping[str, Any], keys: Iterable[str]) -> Any:
    """The value of the first key present (and not `None`), else `None`."""
    for key in keys:
        value = attributes.get(key)
        if value is not None:
            return value
    return None


def keys_may_contain(attributes: Mapping[str, Any], *fragments: str) -> bool:
    """Whether any key might hold one of `fragments`; `False` means none does (an exact negative).

    Every span goes through a few per-key scans (flattened message keys, `evaltrace.*` keys) that
    find nothing on most spans: one substring search of the joined keys rules them out at a third
    of a per-key regex scan's cost. Keys that are not text cannot be joined: `True`, so the exact
    scan that follows decides (and fails) as it would have.
    """
    try:
        joined = "\n".join(attributes)
    except TypeError:
        return True
    for fragment in fragments:  # a loop, not `any(...)`: a generator costs as much as the search
        if fragment in joined:
            return True
    return False


def as_int(value: Any) -> int | None:
    """An integer token count from an attribute value (ints, integral floats, digit strings).

    Values outside OTel's signed 64-bit integer range give `None`: no SDK can record them, and a
    hostile file's 400-digit count would otherwise overflow every float computed from it.
    """
    if isinstance(value, bool) or value is None:
        return None
    number: int | None = None
    if isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and len(text := value.strip()) <= _INT64_DIGITS and text.isascii() and text.isdigit():
        number = int(text)
    return number if number is not None and _INT64_MIN <= number <= _INT64_MAX else None


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT64_DIGITS = 19


def as_str(value: Any) -> str | None:
    """A non-empty string attribute value, else `None`."""
    return value if isinstance(value, str) and value else None


def genai_usage(attributes: Mapping[str, Any]) -> Usage:
    """Usage from the GenAI `gen_ai.usage.*` keys (current and deprecated spellings)."""
    counts = []
    for keys in _USAGE_KEYS:  # `as_int(first_attr(attributes, keys))` for each count, inlined: every model call
        value = None
        for key in keys:
            value = attributes.get(key)
            if value is not None:
                break
        exact = type(value) is int and _INT64_MIN <= value <= _INT64_MAX  # `as_int`'s answer for an exact int
        counts.append(value if exact or value is None else as_int(value))
    return usage(*counts)


def usage(
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    cache_read_tokens: int | None = None,
    reasoning_tokens: int | None = None,
) -> Usage:
    """`Usage(...)` of counts from `as_int`, built without validation when every count is exactly an int."""
    counts = (input_tokens, output_tokens, cache_read_tokens, reasoning_tokens)
    if ints_or_none(*counts):  # `as_int` keeps an `int` subclass as recorded: validation converts it
        return _USAGE.make(*counts)
    return Usage(**dict(zip(_USAGE.names, counts, strict=True)))


_USAGE = RecordFactory(Usage)
_USAGE_KEYS = (A.INPUT_TOKENS, A.OUTPUT_TOKENS, A.CACHE_READ_TOKENS, A.REASONING_TOKENS)  # in `_USAGE`'s order
assert _USAGE.names == ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens")  # `make`'s order


def is_redacted(value: Any) -> bool:
    """Whether `value` is a known placeholder for content that was not captured."""
    return isinstance(value, str) and value.strip() in A.REDACTION_MARKERS


def span_error(span: Span) -> str | None:
    """Error text of a failed span, else `None`.

    A span failed when its status is ERROR, when it carries `error.type`, or when it records an
    `exception` event without an OK status (the SDK's `record_exception` usually sets ERROR too,
    but not every emitter does). The text prefers `Type: message` from the exception event.
    """
    if not span.events and span.status_code != "ERROR" and A.ERROR_TYPE not in span.attributes:
        return None  # most spans: what the lines below conclude, without their calls
    exception = _exception_text(span)
    error_type = as_str(span.attributes.get(A.ERROR_TYPE))
    failed = span.status_code == "ERROR" or error_type is not None
    if not failed and not (exception is not None and span.status_code != "OK"):
        return None
    return exception or as_str(span.status_message) or error_type or "error"


def _exception_text(span: Span) -> str | None:
    for event in reversed(span.events):
        if event.name != A.EXCEPTION_EVENT:
            continue
        kind = as_str(event.attributes.get(A.EXCEPTION_TYPE))
        message = as_str(event.attributes.get(A.EXCEPTION_MESSAGE))
        if kind and message:
            return f"{kind}: {message}"
        return kind or message
    return None


def error_type(span: Span) -> str | None:
    """The error's type name: `error.type`, else the exception event's type."""
    found = as_str(span.attributes.get(A.ERROR_TYPE))
    if found:
        return found
    for event in span.events:
        if event.name == A.EXCEPTION_EVENT:
            return as_str(event.attributes.get(A.EXCEPTION_TYPE))
    return None


@dataclass(frozen=True, slots=True)
class Arguments:
    """Tool-call arguments as recorded: parsed when possible, raw text when not."""

    value: Any
    truncated: bool = False
    warning: str | None = None


def read_arguments(raw: Any, where: str) -> Arguments:
    """Parse recorded tool arguments (JSON text or a structured value) leniently.

    Redaction markers give `None` with a warning; JSON cut short keeps the raw text with
    `truncated=True` and a warning; other text that is not JSON stays as text.

    Args:
        raw: The recorded value.
        where: Names the place for the warning, e.g. `tool get_weather (span 1a2b...)`.
    """
    if not isinstance(raw, str):
        return Arguments(raw)  # a structured value (or `None`) is kept as recorded
    if is_redacted(raw):
        return Arguments(None, warning=f"{where}: arguments were redacted ({raw.strip()})")
    whole, value = _lenient_json.whole_value(raw)
    if whole:
        return Arguments(value)
    parsed = parse_json(raw)
    if parsed.truncated:
        return Arguments(raw, truncated=True, warning=f"{where}: arguments are truncated JSON; raw text kept")
    if parsed.malformed:
        return Arguments(raw, warning=f"{where}: arguments are not valid JSON; raw text kept")
    return Arguments(parsed.value if parsed.parsed else raw)


def read_content(raw: Any, where: str, warnings: list[str]) -> Any:
    """A recorded result or output value: parsed JSON when the text is a JSON object or array.

    Plain text stays text (a tool returning `"42"` keeps the string); redaction markers give
    `None` and a warning.
    """
    if raw is None:
        return None
    if is_redacted(raw):
        warnings.append(f"{where}: content was redacted ({raw.strip()})")
        return None
    if isinstance(raw, str) and raw.lstrip().startswith(("{", "[")):
        whole, value = _lenient_json.whole_value(raw)
        if whole:
            return value
        parsed = parse_json(raw)
        if parsed.truncated:
            warnings.append(f"{where}: content is truncated JSON; raw text kept")
        return parsed.value
    return raw


def text_or_none(value: Any, where: str, warnings: list[str]) -> str | None:
    """`value` as text; `None` for missing values and redaction markers (with a warning)."""
    if value is None:
        return None
    if is_redacted(value):
        warnings.append(f"{where}: content was redacted ({str(value).strip()})")
        return None
    return value if isinstance(value, str) else str(value)


def span_label(span: Span) -> str:
    """A short name for warnings: `'chat gpt-4o' (span 1a2b3c4d)`."""
    return f"{span.name!r} (span {span.span_id})"


def ns_to_datetime(ns: int | None) -> datetime | None:
    """A UTC datetime from epoch nanoseconds (microsecond precision); `None` for missing or zero."""
    if not ns:
        return None
    # Integer arithmetic: a float of epoch seconds loses the last microsecond. Positional
    # arguments: ~40% faster than `microseconds=`, and this runs twice for every span.
    return _EPOCH + timedelta(0, 0, ns // 1000)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
