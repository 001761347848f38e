"""Lenient JSON for span payloads: parse what parses, keep the raw text of what does not.

Instrumentations store messages, tool arguments and results as JSON text, but the text is not
always whole: `OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` cuts strings mid-JSON, some emitters store
Python reprs, and a value may be JSON inside JSON (arguments as a string inside a tool call).
The converter must neither crash on those nor silently drop them, so every parse here returns a
`ParsedJson` that says whether the text parsed, keeps the raw text when it did not, and flags
text that looks like JSON cut short (an object or array whose parse failed at the very end).

Recorded content is untrusted input, so parsed values are also bounded in depth: a value nested
deeper than `MAX_DEPTH` levels is kept as its raw text (structured values as `None`), as text
that does not parse would be. Deeper values exist only in hostile files, and further down they
would exhaust the recursion of scorers and of the JSON output (pydantic stops at 255 levels).
"""

from __future__ import annotations

import json
import json.scanner
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_OPENERS = ("{", "[")
# Cut JSON fails either inside a string that runs to the end, or when the parser, at the end of
# the text, still expects more.
_UNTERMINATED = "Unterminated string"
_EXPECTING = "Expecting"

MAX_DEPTH = 100
"""Deepest nesting of lists and objects a parsed content value may have."""


@dataclass(frozen=True, slots=True)
class ParsedJson:
    """The outcome of a lenient parse.

    Attributes:
        value: The parsed value; the raw text itself when it did not parse; `None` for no input.
        parsed: Whether `value` came from valid JSON (or was already a structured value).
        truncated: The text looks like JSON cut short; `value` holds the raw text.
        raw: The input text, when the input was text.
    """

    value: Any
    parsed: bool
    truncated: bool = False
    raw: str | None = None

    @property
    def malformed(self) -> bool:
        """The input was JSON-looking text that did not parse (cut short or otherwise broken)."""
        return self.raw is not None and not self.parsed and self.raw.lstrip().startswith(_OPENERS)


def parse_json(value: Any) -> ParsedJson:
    """Parse `value` when it is JSON text; pass structured values through unchanged.

    Text that is not JSON (plain prose) comes back as the text itself with `parsed=False`.

    Args:
        value: An attribute value: JSON text, plain text, a structured value, or `None`.

    Returns:
        The parse outcome; never raises.
    """
    if value is None:
        return ParsedJson(None, parsed=False)
    if not isinstance(value, str):
        return ParsedJson(value, parsed=True) if within_depth(value) else ParsedJson(None, parsed=False)
    text = value.strip()
    if not text:
        return ParsedJson(value, parsed=False, raw=value)
    try:
        parsed = _loads(text)
    except json.JSONDecodeError as exc:
        return ParsedJson(value, parsed=False, truncated=_looks_truncated(text, exc), raw=value)
    except (ValueError, RecursionError):
        # Hostile text (nesting past the recursion limit, an integer longer than Python converts):
        # keep the text rather than fail the whole trace.
        return ParsedJson(value, parsed=False, raw=value)
    if _may_be_deep(text) and not within_depth(parsed):
        return ParsedJson(value, parsed=False, raw=value)
    return ParsedJson(parsed, parsed=True, raw=value)


# The C scanner `json.loads` itself uses: the default decoder's settings.
# (typeshed wants a `make_scanner` as its context; CPython's is a decoder, as `JSONDecoder` passes.)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]


def _loads(text: str) -> Any:
    """`json.loads(text)`: the same value, or the same error.

    Text that is one JSON value and nothing else (nearly all recorded text) is scanned without
    `json.loads`'s three Python-level calls and two whitespace matches, a third of the cost of a
    short text; anything else (surrounding whitespace, extra data, an error) goes to `json.loads`.
    """
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def whole_value(text: str) -> tuple[bool, Any]:
    """`(True, value)` when `text` is exactly one JSON value within `MAX_DEPTH` levels, else `(False, None)`.

    The value is `parse_json(text).value`. The quick path of the extractors (tool arguments and
    results are nearly always such text): only the scan runs, no `ParsedJson` is built, and a
    failed scan is not repeated by `json.loads`. On `False`, `parse_json` says what the text is.
    A JSON value neither starts nor ends with whitespace, so `text` is what `parse_json` would scan.
    """
    try:
        value, end = _scan_once(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return False, None
    if end != len(text) or (_may_be_deep(text) and not within_depth(value)):
        return False, None
    return True, value


def _may_be_deep(text: str) -> bool:
    # C-speed pre-check: nesting deeper than MAX_DEPTH needs more than MAX_DEPTH openers (so
    # more characters: most arguments and results are shorter, and skip the counting).
    return len(text) > MAX_DEPTH and text.count("[") + text.count("{") > MAX_DEPTH


def within_depth(value: Any) -> bool:
    """Whether lists and dicts in `value` nest at most `MAX_DEPTH` levels (checked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth >= MAX_DEPTH:
            return False
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return True


def _looks_truncated(text: str, exc: json.JSONDecodeError) -> bool:
    if not text.startswith(_OPENERS):
        return False
    if exc.msg.startswith(_UNTERMINATED):
        return True
    return exc.msg.startswith(_EXPECTING) and exc.pos >= len(text)


def parse_json_deep(value: Any) -> ParsedJson:
    r"""Like `parse_json`, then also parse a JSON string that itself holds a JSON object or array.

    Some emitters double-encode (`"\\"{\\\\\\"city\\\\\\": ...}\\""`): the outer parse gives a
    string that is JSON again.
    """
    first = parse_json(value)
    inner = first.value
    if first.parsed and isinstance(inner, str) and inner.strip().startswith(_OPENERS):
        second = parse_json(inner)
        if second.parsed:
            return ParsedJson(second.value, parsed=True, raw=first.raw)
    return first


def loads_or_none(value: Any) -> Any:
    """The parsed value when `value` is valid JSON text or already structured, else `None`."""
    if isinstance(value, str):
        # Fast path for the common case: text that parses as is parses to the same value stripped.
        try:
            parsed = _loads(value)
        except (ValueError, RecursionError):
            pass
        else:
            if not _may_be_deep(value) or within_depth(parsed):
                return parsed
            return None
    outcome = parse_json(value)
    return outcome.value if outcome.parsed else None


def json_list(value: Any) -> list[Any] | None:
    """`value` parsed as a JSON array (or a list already), else `None`."""
    parsed = loads_or_none(value)
    return parsed if isinstance(parsed, list) else None


def json_object(value: Any) -> dict[str, Any] | None:
    """`value` parsed as a JSON object (or a dict already), else `None`."""
    parsed = loads_or_none(value)
    return parsed if isinstance(parsed, dict) else None
