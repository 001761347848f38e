"""Re-nesting of flattened span attributes, and small value helpers of the flattened conventions.

OpenInference and OpenLLMetry cannot store lists of messages as attribute values, so they spell
each leaf as its own key: `llm.input_messages.1.message.tool_calls.0.tool_call.id`. `nest_list`
rebuilds the list under a prefix: a dotted key becomes a path of nested dicts, and a dict whose
keys are all decimal indices becomes a list ordered by index. Indices may have gaps (the
OpenAI-Agents bridge starts input messages at 1, OpenLLMetry uses the provider's choice index,
smolagents overwrites one index per text part); a gap is simply skipped, never filled with `None`.

A key that is both a leaf and a prefix of other keys (`a.b = 1` next to `a.b.c = 2`) keeps the
deeper structure: well-formed emitters never write both, so no shape is favoured beyond that.

Keys are untrusted input: a key of more than `MAX_DEPTH` segments (no convention comes near)
is skipped, so re-nesting never builds a structure deeper than parsed JSON may be.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._lenient_json import MAX_DEPTH, within_depth
from evaltrace.collector.traces._spanutil import is_redacted


def nest_list(attributes: Mapping[str, Any], prefix: str) -> list[Any] | None:
    """The list spelled by the keys `<prefix>.<index>.…`, ordered by index.

    Args:
        attributes: A span's attributes.
        prefix: The list's key, without the trailing dot (`llm.input_messages`).

    Returns:
        The items in index order (each a nested dict, or a leaf value for `<prefix>.<index>` keys),
        or `None` when no key has that prefix, so "not recorded" stays apart from "empty".
    """
    head = prefix + "."
    tree: dict[str, Any] = {}
    for key, value in attributes.items():
        if key.startswith(head):
            _insert(tree, key[len(head) :].split("."), value)
    if not tree:
        return None
    nested = _listify(tree)
    return nested if isinstance(nested, list) else [nested[k] for k in sorted(nested)]


def _insert(tree: dict[str, Any], path: list[str], value: Any) -> None:
    if len(path) > MAX_DEPTH:
        return
    node = tree
    for segment in path[:-1]:
        child = node.get(segment)
        if not isinstance(child, dict):
            child = {}
            node[segment] = child
        node = child
    if not isinstance(node.get(path[-1]), dict):
        node[path[-1]] = value


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(key.isdecimal() for key in node):
        return [_listify(node[key]) for key in sorted(node, key=int)]
    return {key: _listify(value) for key, value in node.items()}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else an empty list (a recorded field that should hold a list may hold anything)."""
    return value if isinstance(value, list) else []


def dig(node: Any, *path: str) -> Any:
    """The value at `path` inside nested dicts, or `None` where any step is missing."""
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def content(value: Any) -> Any:
    """`value`, or `None` when it is absent, a redaction marker (content not captured) or nested too deeply."""
    return None if is_redacted(value) or not within_depth(value) else value


def text(value: Any) -> str | None:
    """`value` as text when it is a captured, non-marker string, else `None`."""
    return value if isinstance(value, str) and not is_redacted(value) else None


def dropped_warning(span: Span) -> list[str]:
    """A warning when the SDK dropped attributes of this span (flattened histories past the cap)."""
    if span.dropped_attributes_count <= 0:
        return []
    return [
        f"span {span.span_id} ({span.name}) lost {span.dropped_attributes_count} attributes to the "
        "OTel attribute count limit; raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT to keep whole message histories"
    ]
