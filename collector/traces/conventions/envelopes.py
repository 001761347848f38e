"""Framework envelopes around tool arguments and answers, and where a framework keeps the prompt.

Small named adapters, each with the reason it exists, recognising what a framework's
instrumentation records in an unusual place or wrapper by exact keys, never by a library name.
Envelopes belong to frameworks, not conventions, so assembly applies them whatever the convention:

- `unwrap_arguments`: the patched method's own call (positional and keyword arguments plus its
  options) recorded in place of the tool's arguments; the recorded value is kept whenever it
  equals what the model asked for (a tool whose parameters really are `args` and `kwargs`).
- `unwrap_result` (merging a tool span into its call): the framework's whole tool-output object.
- `unwrap_answer` (`payload.output_text`): the field of a result object holding the answer text;
  `opaque_output`: an output that is a result object's printed form, often cut, holding no answer
  (the last model reply is the answer then).
- `prompt_in` (the OpenInference agent extraction): a run span's prompt kept elsewhere than its input.

A new framework is one adapter in `ARGUMENT_ENVELOPES`, `RESULT_ENVELOPES`, `ANSWER_ENVELOPES` or
`PROMPT_LOCATIONS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from evaltrace.collector.traces._lenient_json import json_list, parse_json

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Envelope(Generic[T]):
    """One framework's adapter: an envelope around tool arguments, a result or an answer, or a prompt's place."""

    name: str
    reason: str
    """Which instrumentation writes it, and why."""
    apply: Callable[[Any], T | None]
    """What is inside (or found), or `None` when the value is not this framework's."""
    scope: str | None = None
    """The instrumentation scope whose spans write it, for an envelope whose keys alone are too
    common to tell it from a tool's own value; `None`: recognised on any span."""


def _first(envelopes: tuple[Envelope[T], ...], value: Any, scope: str | None = None) -> T | None:
    """What the first envelope (of those for `scope`) that recognises `value` finds in it."""
    for envelope in envelopes:
        if envelope.scope is None or envelope.scope == scope:
            found = envelope.apply(value)
            if found is not None:
                return found
    return None


def _call_arguments(value: dict[str, Any], options: frozenset[str]) -> dict[str, Any] | None:
    """`{"args": [...], "kwargs": {...}, <options>}`: the keyword arguments, or a lone dict argument."""
    if not {"args", "kwargs"} <= value.keys() or not value.keys() - {"args", "kwargs"} <= options:
        return None
    args, kwargs = value["args"], value["kwargs"]
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return None
    if not args:
        return kwargs
    if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
        return args[0]  # smolagents' `Tool.__call__` takes one dict argument as the keyword arguments
    return None


def _smolagents(value: dict[str, Any]) -> dict[str, Any] | None:
    if "sanitize_inputs_outputs" not in value:
        return None
    return _call_arguments(value, frozenset({"sanitize_inputs_outputs"}))


def _llama_index(value: dict[str, Any]) -> dict[str, Any] | None:
    kwargs = value.get("kwargs")
    return kwargs if value.keys() == {"kwargs"} and isinstance(kwargs, dict) else None


_LANGCHAIN_TOOL_RUN = frozenset({"input_str", "tags", "metadata", "inputs", "kwargs"})


def _openllmetry_langchain(value: dict[str, Any]) -> dict[str, Any] | None:
    inputs = value.get("inputs")
    if not {"input_str", "inputs"} <= value.keys() <= _LANGCHAIN_TOOL_RUN or not isinstance(inputs, dict):
        return None
    return inputs


ARGUMENT_ENVELOPES: Final[tuple[Envelope[dict[str, Any]], ...]] = (
    Envelope(
        name="smolagents-tool-call",
        reason=(
            "openinference-instrumentation-smolagents records the bound arguments of `Tool.__call__`: "
            '`{"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}}`; the tool got the kwargs'
        ),
        apply=_smolagents,
    ),
    Envelope(
        name="llama-index-tool-call",
        reason=(
            "openinference-instrumentation-llama-index records the keyword arguments of "
            '`FunctionTool.acall` / `call` as `{"kwargs": {...}}`; the tool got the kwargs'
        ),
        apply=_llama_index,
    ),
    Envelope(
        name="openllmetry-langchain-tool-run",
        reason=(
            "OpenLLMetry's opentelemetry-instrumentation-langchain records the arguments of LangChain's "
            '`on_tool_start` callback: `{"input_str", "tags", "metadata", "inputs": {...}, "kwargs"}`; '
            "the tool got `inputs`"
        ),
        apply=_openllmetry_langchain,
    ),
)
"""Tried in order; the first that recognises the value unwraps it."""


def unwrap_arguments(recorded: Any, requested: Any = None) -> Any:
    """The tool's arguments inside a recorded value, or the value itself when no envelope holds it.

    Args:
        recorded: The arguments as the tool span recorded them (parsed JSON or raw).
        requested: The arguments the model sent for this call, when known: a recorded value equal to
            them is the tool's own arguments, never an envelope.
    """
    if not isinstance(recorded, dict) or recorded == requested:
        return recorded
    inner = _first(ARGUMENT_ENVELOPES, recorded)
    return recorded if inner is None else inner


def _llama_index_output(value: Any) -> tuple[Any] | None:
    if not isinstance(value, dict):
        return None
    return (value["raw_output"],) if {"tool_name", "raw_input", "raw_output"} <= value.keys() else None


def _openllmetry_langchain_output(value: Any) -> tuple[Any] | None:
    if not isinstance(value, dict) or "output" not in value or not value.keys() <= {"output", "kwargs"}:
        return None
    output = value["output"]
    fields = output.get("kwargs") if isinstance(output, dict) and output.get("lc") == 1 else None
    if isinstance(fields, dict) and "content" in fields:
        return (fields["content"],)  # a serialised ToolMessage: the tool returned its content
    return (output,)


def _adk_function_response(value: Any) -> tuple[Any] | None:
    return (value["result"],) if isinstance(value, dict) and value.keys() == {"result"} else None


def _strands_text_block(value: Any) -> tuple[Any] | None:
    if not (isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict)):
        return None
    block = value[0]
    if block.keys() != {"text"} or not isinstance(block["text"], str):
        return None
    text = block["text"]
    # Strands sends a return value that is not text as its JSON: the tool returned the object.
    return (parse_json(text).value if text.lstrip().startswith(("{", "[")) else text,)


# A result envelope finds `(result,)`: a tool's result may itself be `None`.
RESULT_ENVELOPES: Final[tuple[Envelope[tuple[Any]], ...]] = (
    Envelope(
        name="llama-index-tool-output",
        reason=(
            "openinference-instrumentation-llama-index records the whole `ToolOutput` "
            '(`{"blocks", "tool_name", "raw_input", "raw_output", "is_error"}`); the tool returned `raw_output`'
        ),
        apply=_llama_index_output,
    ),
    Envelope(
        name="openllmetry-langchain-tool-output",
        reason=(
            "OpenLLMetry's opentelemetry-instrumentation-langchain records the arguments of LangChain's "
            '`on_tool_end` callback, `{"output": <the ToolMessage, serialised>, "kwargs": {...}}`; the tool returned '
            "the message's content. Only on its spans (scope `opentelemetry.instrumentation.langchain`): "
            'elsewhere a tool may return `{"output": ...}` itself'
        ),
        apply=_openllmetry_langchain_output,
        scope="opentelemetry.instrumentation.langchain",
    ),
    Envelope(
        name="adk-function-response",
        reason=(
            "Google ADK hands the model a tool's return value that is not a dict as the function response "
            '`{"result": value}`, and records that dict (on the tool span, and in the next model call\'s input); '
            "the tool returned `value`. Only on ADK's spans (scope `gcp.vertex.agent`): elsewhere a tool may "
            'return `{"result": ...}` itself'
        ),
        apply=_adk_function_response,
        scope="gcp.vertex.agent",
    ),
    Envelope(
        name="strands-text-block",
        reason=(
            "Strands hands the model a tool's return value as one Bedrock-style content block "
            '`[{"text": value}]` (JSON text for a value that is not a string) and records that list as the tool '
            "span's result; the tool returned `value`. Only on Strands' spans (scope `strands.telemetry.tracer`)"
        ),
        apply=_strands_text_block,
        scope="strands.telemetry.tracer",
    ),
)
"""Tried in order; the first that recognises the value unwraps it."""


def unwrap_result(recorded: Any, scope: str | None = None) -> Any:
    """The tool's return value inside a recorded result, or the value itself when no envelope holds it.

    Args:
        recorded: The result as recorded (on the tool span, or in a later model call's input).
        scope: The instrumentation scope of the tool span the result belongs to, when known.
    """
    if not isinstance(recorded, (dict, list)):
        return recorded
    inner = _first(RESULT_ENVELOPES, recorded, scope)
    return recorded if inner is None else inner[0]


# --- answers ------------------------------------------------------------------------------------


def _crewai_output(value: dict[str, Any]) -> str | None:
    if not {"raw", "pydantic", "json_dict"} <= value.keys():
        return None
    raw = value["raw"]
    return raw if isinstance(raw, str) else None


ANSWER_ENVELOPES: Final[tuple[Envelope[str], ...]] = (
    Envelope(
        name="crewai-output",
        reason=(
            "openinference-instrumentation-crewai records a crew's CrewOutput and a task's TaskOutput as JSON; "
            "the answer is their `raw` text (beside `pydantic`, `json_dict` and the task outputs)"
        ),
        apply=_crewai_output,
    ),
)


def unwrap_answer(value: Any) -> str | None:
    """The answer text inside a framework's result object (parsed JSON), or `None` when none holds it."""
    return _first(ANSWER_ENVELOPES, value) if isinstance(value, dict) else None


# A framework's output text that is the printed form of its result object, not the answer.
OPAQUE_OUTPUTS: Final[tuple[Envelope[bool], ...]] = (
    Envelope(
        name="llama-index-stop-event",
        reason=(
            "openinference-instrumentation-llama-index records a workflow's output as the text/plain repr of its "
            "`StopEvent(result=AgentOutput(...))`, cut short; the answer is the last model reply"
        ),
        apply=lambda text: text.startswith("StopEvent(") or None,
    ),
)


def opaque_output(text: str) -> bool:
    """Whether an output text is a framework's printed result object (no answer to take from it)."""
    return _first(OPAQUE_OUTPUTS, text) is not None


# --- prompts ------------------------------------------------------------------------------------


def _crewai_tasks(attrs: dict[str, Any]) -> str | None:
    tasks = json_list(attrs.get("crew_tasks"))
    first = tasks[0] if tasks else None
    description = first.get("description") if isinstance(first, dict) else None
    return description if isinstance(description, str) and description.strip() else None


# Where a framework's run span keeps the user's prompt when its input value does not (found in its attributes).
PROMPT_LOCATIONS: Final[tuple[Envelope[str], ...]] = (
    Envelope(
        name="crewai-crew-tasks",
        reason=(
            "a CrewAI crew is prompted by its tasks: openinference-instrumentation-crewai records the kickoff "
            "inputs (template values, often none) as input and the tasks, with their descriptions, as `crew_tasks`; "
            "the first task's description is what the crew was asked"
        ),
        apply=_crewai_tasks,
    ),
)


def prompt_in(attrs: dict[str, Any]) -> str | None:
    """The user's prompt at a framework's known place in a run span's attributes, or `None`."""
    return _first(PROMPT_LOCATIONS, attrs)
