"""What a judge reply must be to count as a verdict, and the errors of asking for one.

The judge's reply is untrusted output: a judge may quote the trace under evaluation, and the trace
may contain text shaped like a verdict. So a reply is a verdict only when, after removing code
fences and reasoning blocks, it is exactly one JSON object with a boolean `passed` and a string
`reason` (see `parse_verdict`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictStr, ValidationError

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    # `reason` comes first: a model writing in schema order then decides after stating its evidence.
    "properties": {"reason": {"type": "string"}, "passed": {"type": "boolean"}},
    "required": ["reason", "passed"],
    "additionalProperties": False,
}
"""The verdict as a JSON schema, sent as the structured-output format."""

_REASONING_TAG = re.compile(r"<(/?)(think|thinking|reasoning|reflection)\s*>", re.IGNORECASE)
"""Reasoning blocks some models (DeepSeek-R1, Qwen3, ...) write before their answer."""
_FENCE_LANGUAGE = re.compile(r"[A-Za-z0-9_+-]*")


class JudgeError(Exception):
    """A judge verdict could not be obtained; the message is shown to the user as the entry's reason."""


class JudgeConfigError(JudgeError):
    """A required judge setting is missing or malformed."""


class JudgeUnavailableError(JudgeError):
    """The judge could not be reached, timed out, or answered with an HTTP error."""


class JudgeRefusedError(JudgeUnavailableError):
    """The judge refused this client: no connection (refused, unknown host), the key (401/403), or the URL (404).

    At a session's first contact with the server this is a setup error (the run stops, exit 2);
    later it is one entry's error result.
    """


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
    """Read a reply as a verdict: after removing reasoning blocks and a code fence, exactly one JSON object.

    Nothing else counts: prose around the object, a second object, an object inside another
    text, or duplicate keys all make the reply unparseable. A judge that quotes the trace (which
    may contain `{"passed": true, ...}`) therefore cannot hand the trace's text over as its verdict.

    Raises:
        JudgeReplyError: The reply is not one JSON object with a boolean `passed` and a string `reason`.
    """
    body = _strip_fence(_strip_reasoning(text))
    if body is not None:
        try:
            obj = json.loads(body, object_pairs_hook=_unique_keys)
        except (ValueError, RecursionError):
            obj = None
        if isinstance(obj, dict):
            try:
                return Verdict.model_validate(obj)
            except ValidationError:
                pass
    raise JudgeReplyError(
        'unparseable judge reply (expected exactly one JSON object {"passed": bool, "reason": str}): ' + snippet(text)
    )


def _strip_reasoning(text: str) -> str | None:
    # Reasoning comes before the answer: the answer is what follows the last closing tag (a
    # closing tag alone is a block whose opening tag was in the chat template). A reasoning tag
    # left in that answer (an unclosed block, a tag quoted in the verdict) leaves no clean verdict.
    tags = list(_REASONING_TAG.finditer(text))
    closing = [tag for tag in tags if tag.group(1)]
    answer = text[closing[-1].end() :] if closing else text
    if _REASONING_TAG.search(answer):
        return None
    return answer


def _strip_fence(text: str | None) -> str | None:
    # One fenced block around the whole reply (```json ... ```) is unwrapped; anything else with
    # a fence in it is not one object.
    if text is None:
        return None
    text = text.strip()
    if not text.startswith("```"):
        return None if "```" in text else text
    newline = text.find("\n")
    if newline == -1 or not text.endswith("```") or len(text) < newline + 4:
        return None
    if not _FENCE_LANGUAGE.fullmatch(text[3:newline].strip()):
        return None
    inner = text[newline + 1 : -3]
    return None if "```" in inner else inner


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # `{"passed": false, "reason": "...", "passed": true}` is what an unescaped quote of the trace
    # inside the reason string can produce; json.loads would silently keep the last value.
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise ValueError(f"duplicate key {key!r}")
        obj[key] = value
    return obj


def snippet(text: str, limit: int = 200) -> str:
    """`text` on one line, cut to `limit` characters: a judge reply quoted in an error message."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "..."
