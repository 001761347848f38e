"""Column names and version of the span table (schema version 1).

Shared by the writer (`layout.py`) and the reader so both sides agree on one fixed layout.
Every column of the version is always written, nulls included: engines disagree on files whose
schemas differ (pyarrow drops columns, Polars raises), so readers use this explicit schema.
"""

import re
from datetime import UTC, datetime
from typing import Final

SCHEMA_VERSION: Final = 1
METADATA_SCHEMA_VERSION: Final = b"evaltrace.schema_version"

# Attribute keys copied into typed columns so SQL engines filter them without parsing JSON.
# The copies are also kept in the `attributes` JSON, which stays the lossless source of truth.
# Each column lists its keys in priority order (first present wins).
PROMOTED_STRING_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "gen_ai_operation_name": ("gen_ai.operation.name",),
    "gen_ai_provider_name": ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"),
    "gen_ai_request_model": ("gen_ai.request.model", "llm.model_name"),
    "gen_ai_response_model": ("gen_ai.response.model",),
    "gen_ai_agent_name": ("gen_ai.agent.name", "agent_name"),
    "gen_ai_tool_name": ("gen_ai.tool.name", "tool.name"),
    "gen_ai_tool_call_id": ("gen_ai.tool.call.id", "tool.id", "tool_call.id"),
    "gen_ai_conversation_id": ("gen_ai.conversation.id", "session.id"),
    "openinference_span_kind": ("openinference.span.kind",),
    "error_type": ("error.type",),
    "case_id": ("evaltrace.case_id",),
}
PROMOTED_INT_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "gen_ai_usage_input_tokens": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
    "gen_ai_usage_output_tokens": (
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
    ),
}

# String attributes moved out of `attributes` into the `large_attributes` map, so that scans
# of the small columns never decompress message payloads.
LARGE_ATTRIBUTE_KEYS: Final = frozenset(
    {
        "input.value",
        "output.value",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "pydantic_ai.all_messages",
        "traceloop.entity.input",
        "traceloop.entity.output",
        "tool_arguments",
        "tool_response",
        "final_result",
    }
)
# Prefixes of flattened payload keys (OpenLLMetry prompts, OpenInference messages) moved likewise.
LARGE_ATTRIBUTE_PREFIXES: Final = (
    "gen_ai.prompt.",
    "gen_ai.completion.",
    "llm.input_messages.",
    "llm.output_messages.",
)
# Any other string value at least this long is moved too.
LARGE_VALUE_BYTES: Final = 1024

# The columns, in file order. Types live in `layout.py`, the only module importing pyarrow.
BASE_COLUMNS: Final = (
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "status_code",
    "status_message",
    "start_time",
    "end_time",
    "duration_ns",
    "run_id",
    "service_name",
    "scope_name",
    "scope_version",
    "resource",
)

# Temporary files carry this prefix and the `.tmp` suffix, so `*.parquet` globs never match them.
INFLIGHT_PREFIX: Final = ".inflight-"
INFLIGHT_SUFFIX: Final = ".parquet.tmp"
# Spans per file the exporter writes at most (its default `max_rows`), and compaction's target.
DEFAULT_MAX_ROWS: Final = 50_000
# Host names in file names are cut to this length, so the cleaner can recognise this host's files.
HOST_NAME_LIMIT: Final = 60


def safe_file_part(text: str, limit: int = 80) -> str:
    """File-name-safe text: no separators, no leading dot, no `--` (the name's field separator)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
    cleaned = re.sub(r"-{2,}", "-", cleaned).lstrip(".-") or "run"
    return cleaned[:limit]


def run_file_name(run_name: str, writer: str, seq: int, suffix: str) -> str:
    """A complete run file's name, `<run>--<UTC time>--<writer>-<seq><suffix>` (parts already file-safe)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    return f"{run_name}--{stamp}--{writer}-{seq:05d}{suffix}"


# --- Log records (OTel logs signal: GenAI events) -----------------------------------------------
# Log records are written to their own files beside the span files. Such a file says what it is
# in its key-value metadata (`evaltrace.signal=logs`, with its own schema version), and its name
# ends in `LOGS_FILE_SUFFIX`, so `runs/*.logs.parquet` names the log files alone.
METADATA_SIGNAL: Final = b"evaltrace.signal"
SIGNAL_SPANS: Final = "spans"
SIGNAL_LOGS: Final = "logs"
LOGS_SCHEMA_VERSION: Final = 1
LOGS_FILE_SUFFIX: Final = ".logs.parquet"
LOG_COLUMNS: Final = (
    "trace_id",
    "span_id",
    "trace_flags",
    "time",
    "observed_time",
    "severity_number",
    "severity_text",
    "event_name",
    "body",
    "attributes",
    "log_id",
    "run_id",
    "service_name",
    "scope_name",
    "scope_version",
    "resource",
    "dropped_attributes_count",
)
