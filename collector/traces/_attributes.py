"""OTel attribute and event names the converter reads (GenAI conventions and framework fallbacks).

Kept in one place, as pydantic-evals keeps `_GEN_AI_TOOL_NAME_ATTR`, so a convention rename is
one edit. OpenInference and OpenLLMetry names live in their own extractor modules.
"""

from typing import Final

# --- GenAI structure ------------------------------------------------------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
PROVIDER_NAME: Final = "gen_ai.provider.name"
SYSTEM: Final = "gen_ai.system"
REQUEST_MODEL: Final = "gen_ai.request.model"
RESPONSE_MODEL: Final = "gen_ai.response.model"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
RESPONSE_ID: Final = "gen_ai.response.id"
PROVIDER_STOP_REASONS: Final = ("anthropic.message.stop_reason",)
"""Where a provider's own spans keep the stop reason when they write no `gen_ai.response.finish_reasons`
(the Anthropic SDK's span): read as the finish reason, in the provider's words (`_provider` normalises them)."""
AGENT_NAME: Final = "gen_ai.agent.name"
WORKFLOW_NAME: Final = "gen_ai.workflow.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
ERROR_TYPE: Final = "error.type"

LLM_OPERATIONS: Final = frozenset({"chat", "generate_content", "text_completion"})
AGENT_OPERATIONS: Final = frozenset({"invoke_agent", "invoke_workflow"})
TOOL_OPERATION: Final = "execute_tool"
CREATE_AGENT_OPERATION: Final = "create_agent"

# --- GenAI content (v1.37+) -------------------------------------------------------------------
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
OPERATION_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
"""Event that carries the content attributes when an emitter routes them off the span attributes."""

# --- GenAI usage ------------------------------------------------------------------------------
INPUT_TOKENS: Final = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
OUTPUT_TOKENS: Final = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
CACHE_READ_TOKENS: Final = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
REASONING_TOKENS: Final = ("gen_ai.usage.reasoning.output_tokens",)
AGGREGATED_INPUT_TOKENS: Final = "gen_ai.aggregated_usage.input_tokens"
AGGREGATED_OUTPUT_TOKENS: Final = "gen_ai.aggregated_usage.output_tokens"

# --- GenAI v1.36-and-earlier per-message events -----------------------------------------------
EVENT_ROLES: Final = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT: Final = "gen_ai.choice"

# --- pydantic-ai fallbacks (data-format versions 2+, and the v1 `events` attribute) -------------
PYDANTIC_ALL_MESSAGES: Final = "pydantic_ai.all_messages"
PYDANTIC_NEW_MESSAGE_INDEX: Final = "pydantic_ai.new_message_index"
PYDANTIC_FINAL_RESULT: Final = "final_result"
PYDANTIC_AGENT_NAME: Final = "agent_name"
PYDANTIC_TOOL_ARGUMENTS: Final = "tool_arguments"
PYDANTIC_TOOL_RESPONSE: Final = "tool_response"
PYDANTIC_EVENTS: Final = "events"
PYDANTIC_AGENT_SPAN_NAMES: Final = frozenset({"agent run"})
PYDANTIC_TOOL_SPAN_NAMES: Final = frozenset({"running tool", "running output function"})

# --- Context keys -----------------------------------------------------------------------------
CONVERSATION_KEYS: Final = (
    CONVERSATION_ID,
    "session.id",
    "gen_ai.session.id",
    "conversation.id",
    "thread.id",
    "traceloop.association.properties.session_id",
    "traceloop.association.properties.conversation_id",
    "traceloop.association.properties.thread_id",
)
EVALTRACE_PREFIX: Final = "evaltrace."
CASE_ID: Final = "evaltrace.case_id"

# --- Exceptions -------------------------------------------------------------------------------
EXCEPTION_EVENT: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"

REDACTION_MARKERS: Final = frozenset(
    {"__REDACTED__", "[REDACTED]", "<replaced>", "<not serializable>", "<not specified>", "<non-serializable result>"}
)
"""Values instrumentations write in place of content they did not capture: never text."""
PLACEHOLDER_CALL_IDS: Final = frozenset({"unknown", "<not specified>", ""})
"""Call ids that identify nothing (MAF, ADK): matching falls back to name and order."""
RESTATED_TOOL_NAMES: Final = frozenset({"(merged tools)"})
"""`gen_ai.tool.name` of tool spans that restate their sibling tool spans rather than run a tool:
Google ADK records parallel calls' merged response event as a zero-length `execute_tool (merged)`
span beside each call's own span (its source says the span is only there for its web UI's debug
view). Such a span is set aside, never a tool call."""
