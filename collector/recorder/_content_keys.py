"""What `EVALTRACE_CAPTURE_CONTENT=0` keeps of each attribute.

The content keys of every convention the converter reads, and the structural allow-lists applied
to JSON messages, tool schemas and invocation parameters (`redact.py` has the three redaction
tools and their order).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import Enum
from typing import Any

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


# Keys holding JSON messages or event bodies: only structural fields survive (`keep_structure`).
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


# Keys holding tool definitions or JSON schemas: descriptions removed, shape kept (`drop_descriptions`).
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


EMPTIED: Any = object()  # a container whose every field was content


class Rule(Enum):
    """What happens to one attribute key (decided once per key, see `_KeyRules`)."""

    KEEP = "keep"
    DROP = "drop"
    STRUCTURE = "structure"  # JSON messages or event bodies: structural fields only
    SCHEMA = "schema"  # tool definitions / JSON schemas: descriptions removed
    PARAMETERS = "parameters"  # `llm.invocation_parameters`


def content_rule(key: str) -> Rule:
    """What `EVALTRACE_CAPTURE_CONTENT=0` does to the attribute `key`."""
    if key in _CONTENT_KEYS:
        return Rule.DROP
    if key in _STRUCTURED_KEYS:
        return Rule.STRUCTURE
    if key in _SCHEMA_KEYS:
        return Rule.SCHEMA
    if key == _INVOCATION_PARAMETERS:
        return Rule.PARAMETERS
    if key.startswith(_FLAT_PREFIXES):
        return Rule.KEEP if key.rpartition(".")[2] in _FLAT_STRUCTURE_LEAVES else Rule.DROP
    if key.startswith(_FLAT_TOOL_PREFIXES):
        leaf = key.rpartition(".")[2]
        if leaf in _DESCRIPTION_FIELDS:
            return Rule.DROP
        return Rule.SCHEMA if leaf in {"json_schema", "parameters", "input_schema"} else Rule.KEEP
    return Rule.KEEP


def json_transform(value: Any, transform: Callable[[Any], Any]) -> Any:
    """Apply `transform` to the JSON in `value`; `EMPTIED` when nothing structural is left.

    A value that is not a JSON object or array (plain text, a number, bad or too deeply nested
    JSON) is content as a whole and removed.
    """
    if not isinstance(value, str):
        return EMPTIED
    try:
        data = json.loads(value)
    except (ValueError, RecursionError):
        return EMPTIED
    if not isinstance(data, (dict, list)):
        return EMPTIED
    try:
        stripped = transform(data)
    except RecursionError:  # nesting deep enough to exhaust the stack is removed whole: recording must not fail on it
        return EMPTIED
    if stripped is EMPTIED:
        return EMPTIED
    return json.dumps(stripped, ensure_ascii=False)


def keep_structure(value: Any) -> Any:
    """Structural fields of JSON messages, parts and event bodies (an allow-list); `EMPTIED` if none."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _STRUCTURE_SCALARS and (item is None or isinstance(item, (str, int, float, bool))):
                out[key] = item
            elif key in _STRUCTURE_CONTAINERS and isinstance(item, (dict, list)):
                kept = keep_structure(item)
                if kept is not EMPTIED:
                    out[key] = kept
        return out if out or not value else EMPTIED
    if isinstance(value, list):
        items = [kept for item in value if (kept := keep_structure(item)) is not EMPTIED]
        return items if items or not value else EMPTIED
    return EMPTIED  # a bare value inside a message is content


def drop_descriptions(value: Any, names: bool = False) -> Any:
    """A tool definition or JSON schema without its descriptions and examples.

    `names` is true for a mapping whose keys are property names (under `properties` and the
    like): those keys are kept even when a property is called `description`.
    """
    if isinstance(value, dict):
        return {
            key: drop_descriptions(item, names=not names and key in _SCHEMA_NAME_MAPS)
            for key, item in value.items()
            if names or key not in _DESCRIPTION_FIELDS
        }
    if isinstance(value, list):
        return [drop_descriptions(item) for item in value]
    return value


def keep_parameters(value: Any) -> Any:
    """`llm.invocation_parameters` without prompt-like text: numbers, flags, model and tool schemas."""
    if not isinstance(value, dict):
        return EMPTIED
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in _PARAMETER_SCHEMA_KEYS and isinstance(item, (dict, list)):
            out[key] = drop_descriptions(item)
        elif item is None or isinstance(item, (bool, int, float)):
            out[key] = item
        elif key in _PARAMETER_TEXT_KEYS and isinstance(item, str):
            out[key] = item
    return out
