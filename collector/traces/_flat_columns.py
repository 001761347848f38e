"""The traces-table row of the common OTel GenAI trace, straight from its spans: no `Trace` on the way.

Most recorded runs are one shape (the GenAI instrumentations' own, the recorder's `agent_run`
with `tool_call`, the benchmarks' sets): a root `invoke_agent` span whose children are model-call
(`chat`, `generate_content`, `text_completion`) and `execute_tool` spans, nothing nested, each
tool span answering one call the model requested by its call id. For such a trace the general
assembly (the span tree, convention detection, scopes, nested runs, handoffs, model calls
described twice, pairing by name) decides nothing, so `flat_row` reads the spans' attributes with
the GenAI extractor's own readers (message parts, arguments, results, envelopes, errors) and
appends the row `TableEncoder` would write for the converter's `Trace`, without building the
records and encoding them again (two thirds of a first scoring's work). It answers `None`, and
appends nothing, whenever a rule it skips could apply (any attribute key outside the shape's,
events, links, a warning, a value validation would convert, a call without its span, a result only
a prompt holds): the caller then converts the trace (`rebuild.py`). The converter is the reference:
tests/flat_agreement.py compares the two rows over recorded framework runs and generated traces.
Without histories only: with them each iteration's prompt is part of the row.
"""

from __future__ import annotations

from typing import Any, Final

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces import _attributes as A
from evaltrace.collector.traces._construct import texts_or_none
from evaltrace.collector.traces._flat_shape import flat_shape
from evaltrace.collector.traces._genai_messages import MessageValues, message_values
from evaltrace.collector.traces._lenient_json import json_list
from evaltrace.collector.traces._pair_calls import usable_id
from evaltrace.collector.traces._provider import stop_reason
from evaltrace.collector.traces._spanutil import as_int, as_str, error_type, read_arguments, read_content, span_error
from evaltrace.collector.traces._table_columns import Structs
from evaltrace.collector.traces._table_encode import _TRACE_SCALARS, _encode, _Shared
from evaltrace.collector.traces.conventions.answer_tool import ANSWER_TOOLS
from evaltrace.collector.traces.conventions.envelopes import unwrap_arguments, unwrap_result
from evaltrace.collector.traces.conventions.genai import tool_schemas
from evaltrace.collector.traces.conventions.structure import _conversation_id, _name_suffix, agent_name, finish_reasons

_CONTENT: Final = frozenset({A.INPUT_MESSAGES, A.OUTPUT_MESSAGES, A.TOOL_CALL_ARGUMENTS, A.TOOL_CALL_RESULT})


class NotFlat(Exception):
    """A rule the flat row skips could apply: the converter decides the trace."""


# A message as the row holds it: role, name, and its parts' values in `MessagePart` order.
Message = MessageValues


def flat_row(spans: list[Span]) -> FlatRow | None:
    """The row of one OTel trace's spans when they are the flat GenAI shape, else `None`."""
    try:
        return FlatRow(spans)
    except Exception:  # `NotFlat`, or a value a reader fails on: the converter reads it, and says so
        return None


class FlatRow:
    """The traces-table values of a flat GenAI trace (see the module docstring); raises `NotFlat`."""

    def __init__(self, spans: list[Span]) -> None:
        root, chats, tools = _shape(spans)
        self.root, self.span_count = root, len(spans)
        self.iterations = [_Iteration(index, span) for index, span in enumerate(chats)]
        self.tools, self.calls = tools, _calls(self.iterations, tools)
        self._outcome(root)
        self.schemas = _schemas(root, chats)

    def _outcome(self, root: Span) -> None:
        attrs = root.attributes
        content = not _CONTENT.isdisjoint(attrs)  # else read by its structure alone: no input, no output
        case = attrs.get(A.CASE_ID)
        self.name = agent_name(root)
        self.conversation_id = _conversation_id(attrs)
        if not (case is None or type(case) is str) or not texts_or_none(self.name, self.conversation_id):
            raise NotFlat
        self.case_id = case
        self.input = _last_text(_messages(attrs.get(A.INPUT_MESSAGES)), "user") if content else None
        if self.input is None and self.iterations:  # the first prompt's last user text
            self.input = _last_text(self.iterations[0].prompt(), "user")
        reply = self.iterations[-1].output_text() if self.iterations else None
        output = _last_text(_messages(attrs.get(A.OUTPUT_MESSAGES)), "assistant") if content else None
        output = reply if output is None else output
        if reply is not None and output is not None and output.strip() == reply.strip():
            output = reply  # the agent span re-renders the last reply: the model's own words are the answer
        self.output, self.error = output, span_error(root)
        kind = f"{error_type(root) or ''} {self.error}".lower()
        timeout = "timeout" in kind or "timedout" in kind
        self.status = "success" if self.error is None else "timeout" if timeout else "error"
        conventions = {"genai" if content else "structure"} | {it.convention for it in self.iterations}
        conventions |= {"structure" if _CONTENT.isdisjoint(span.attributes) else "genai" for span in self.tools}
        self.convention = "+".join(sorted(conventions))

    def append(self, columns: Structs, row: int, shared: _Shared) -> None:
        """Append the row, numbered `row` (a top-level trace: its own top row, no parent)."""
        root, fields, lists = self.root, columns.fields, columns.lists
        case = self.case_id
        values: tuple[Any, ...] = (row, row, None, root.trace_id, root.span_id, root.name, self.name, case)
        values += (
            self.conversation_id,
            root.run_id,
            root.service_name,
            self.convention,
            self.status,
            self.input,
            self.output,
            self.error,
        )
        values += (_micros(root.start_time_ns), _micros(root.end_time_ns), self.span_count)
        for name, value in zip(_SCALARS, values, strict=True):
            fields[name].append(value)
        fields["attributes_json"].append(_encode({A.CASE_ID: case} if case is not None else {}))
        columns.structs["usage"].add_dict(_summed(it.usage for it in self.iterations))
        models = [it.model for it in self.iterations if it.model]
        lists["models"].extend(list(dict.fromkeys(models)))
        lists["handoffs"].close(0)
        lists["warnings"].close(0)
        calls = lists["tool_calls"]
        for call in self.calls:
            _add_call(calls.items, call)  # type: ignore[arg-type]
        calls.close(len(self.calls))
        iterations = lists["iterations"]
        for iteration in self.iterations:
            iteration.append(iterations.items, shared)  # type: ignore[arg-type]
        iterations.close(len(self.iterations))
        schemas = lists["tool_schemas"]
        for schema in self.schemas:
            parameters = shared.json(schema.parameters)
            schema_fields = {"name": schema.name, "description": schema.description, "parameters_json": parameters}
            schemas.items.add_dict(schema_fields)  # type: ignore[union-attr]
        schemas.close(len(self.schemas))


_SCALARS = ("row", "top_row", "parent_row", *_TRACE_SCALARS)
"""A row's scalar columns in `add_row`'s order: its place in the table, then the encoder's trace scalars."""
_USAGE: Final = ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens")


class _Iteration:
    """One model-call span's iteration, its requested calls (`positions` set once paired)."""

    def __init__(self, index: int, span: Span) -> None:
        attrs = span.attributes
        self.index, self.span = index, span
        self.model = as_str(attrs.get(A.RESPONSE_MODEL)) or as_str(attrs.get(A.REQUEST_MODEL))
        self.provider = as_str(attrs.get(A.PROVIDER_NAME))
        self.finish_reasons = finish_reasons(attrs.get(A.FINISH_REASONS))
        counts = (_count(attrs.get(A.INPUT_TOKENS[0])), _count(attrs.get(A.OUTPUT_TOKENS[0])), None, None)
        self.usage = dict(zip(_USAGE, counts, strict=True))  # `genai_usage`: the shape holds no other count
        self.error = span_error(span)
        content = not _CONTENT.isdisjoint(attrs)
        self.convention = "genai" if content else "structure"
        self.messages = _messages(attrs.get(A.OUTPUT_MESSAGES)) if content else None
        self.requested = [p for m in self.messages or [] for p in m[2] if p[0] == "tool_call"]
        self.positions: list[int] = []
        if not texts_or_none(self.model, self.provider, self.error, *self.finish_reasons):
            raise NotFlat
        replied = any(m[2] for m in self.messages or []) or self.requested or self.finish_reasons
        if not (replied or any(value is not None for value in self.usage.values())):
            raise NotFlat  # a model span saying nothing of a reply is merged or skipped by the assembly

    def prompt(self) -> list[Message] | None:
        """The model call's input messages (`LlmCall.inputs()` of a span without system instructions)."""
        return _messages(self.span.attributes.get(A.INPUT_MESSAGES)) if self.convention == "genai" else None

    def output_text(self) -> str | None:
        texts = [text for message in self.messages or [] if (text := _text(message)) is not None]
        return "\n".join(texts) if texts else None

    def append(self, columns: Structs, shared: _Shared) -> None:
        fields, lists, span = columns.fields, columns.lists, self.span
        reason = stop_reason(self.finish_reasons)
        start, end = _micros(span.start_time_ns), _micros(span.end_time_ns)
        values = (self.index, span.span_id, self.model, self.provider, start, end, self.error, reason)
        for name, value in zip(_ITERATION_SCALARS, values, strict=True):
            fields[name].append(value)
        columns.structs["usage"].add_dict(self.usage)
        lists["finish_reasons"].extend(list(self.finish_reasons))
        lists["merged_span_ids"].close(0)
        lists["duplicate_call_ids"].close(0)
        lists["input_messages"].close(None)  # no histories
        _add_messages(lists["output_messages"], self.messages, shared)
        lists["other_tool_calls"].close(0)
        lists["tool_call_positions"].extend(self.positions)


_ITERATION_SCALARS = ("index", "span_id", "model", "provider", "start_time", "end_time", "error", "stop_reason")


def _shape(spans: list[Span]) -> tuple[Span, list[Span], list[Span]]:
    """The root, model-call and tool spans of a flat GenAI trace (`_flat_shape.py`), each kind in start order."""
    shape = flat_shape(spans)
    if shape is None:
        raise NotFlat
    root, chats, tools = shape
    responses = [response for span in chats if (response := as_str(span.attributes.get(A.RESPONSE_ID)))]
    if len({span.scope_name for span in chats}) > 1 or len(set(responses)) != len(responses):
        raise NotFlat  # two spans of one model call would merge (`_model_calls`): one instrumentation only
    return shape


def _micros(ns: int) -> int | None:
    """`ns_to_datetime` as the table's microseconds (the column takes them as they are)."""
    return ns // 1000 if ns else None


def _count(value: Any) -> int | None:
    """`as_int`, an exact int in range taken as it is (nearly every recorded count)."""
    if type(value) is int and -(2**63) <= value < 2**63:
        return value
    return as_int(value)


def _messages(value: Any) -> list[Message] | None:
    """`parse_messages` of a messages attribute, as row values; `NotFlat` on anything it would warn about."""
    if value is None:
        return None
    items = json_list(value)
    if items is None:
        raise NotFlat
    warnings: list[str] = []
    messages = message_values(items, "", warnings)
    if messages is None or warnings:
        raise NotFlat
    return messages


def _text(message: Message) -> str | None:
    texts = [part[1] for part in message[2] if part[0] == "text" and part[1] is not None]
    return "\n".join(texts) if texts else None


def _last_text(messages: list[Message] | None, role: str) -> str | None:
    for message in reversed(messages or []):
        if message[0] == role and (text := _text(message)) is not None:
            return text
    return None


# A call's values in the table's `CALL_TYPE` order (child row left out: a flat trace has none).
Call = list[Any]


def _calls(iterations: list[_Iteration], tools: list[Span]) -> list[Call]:
    """The calls, each requested call merged with the one tool span of its id (as `_pair_calls.merge`)."""
    by_id: dict[str, Span] = {}
    for span in tools:
        key = usable_id(as_str(span.attributes.get(A.TOOL_CALL_ID)))
        if key is None or key in by_id or span.attributes.get(A.TOOL_NAME) in A.RESTATED_TOOL_NAMES:
            raise NotFlat
        by_id[key] = span
    requested = [(it, part) for it in iterations for part in it.requested]
    ids = [usable_id(part[2]) for _, part in requested]
    if len(set(ids)) != len(ids) or set(ids) != by_id.keys():
        raise NotFlat  # duplicate ids in a reply, a call without its span, a span without its call
    calls: list[Call] = []
    for (iteration, part), key in zip(requested, ids, strict=True):
        iteration.positions.append(len(calls))
        calls.append(_merged(iteration.index, part, by_id[key]))  # type: ignore[index]
    if any(call[4] is None for call in calls):
        _results_from_prompts(calls, iterations, {span.span_id: span.scope_name for span in tools})
    for call in calls:  # JSON text, as the table holds them
        call[2], call[4] = None if call[2] is None else _encode(call[2]), None if call[4] is None else _encode(call[4])
    return calls


def _merged(index: int, part: tuple[Any, ...], span: Span) -> Call:
    attrs = span.attributes
    warnings: list[str] = []
    name = as_str(attrs.get(A.TOOL_NAME)) or _name_suffix(span.name, A.TOOL_OPERATION) or span.name or part[3] or ""
    args = read_arguments(attrs.get(A.TOOL_CALL_ARGUMENTS), "")
    result = read_content(attrs.get(A.TOOL_CALL_RESULT), "", warnings)
    requested = part[4]
    recorded = unwrap_arguments(args.value, requested)
    arguments, truncated = recorded, args.truncated if recorded is not None else False
    if (recorded is None or (isinstance(requested, dict) and not isinstance(recorded, (dict, list)))) and (
        requested is not None
    ):
        arguments, truncated = requested, False
    error = span_error(span)
    call_id = usable_id(as_str(attrs.get(A.TOOL_CALL_ID)))
    if args.warning or warnings or type(name) is not str or name in ANSWER_TOOLS:
        raise NotFlat
    if not isinstance(arguments, (dict, type(None))) or not texts_or_none(error):
        raise NotFlat
    start, end = _micros(span.start_time_ns), _micros(span.end_time_ns)
    result = unwrap_result(result, span.scope_name)  # a framework's envelope holds the return value
    return [call_id, name, arguments, truncated, result, error, index, span.span_id, start, end, False]


def _results_from_prompts(calls: list[Call], iterations: list[_Iteration], scopes: dict[str, str | None]) -> None:
    """The results the tool spans lack, from the prompts by call id (as `_pair_calls.tool_results`)."""
    found: dict[str, tuple[Any, ...]] = {}
    missing = {call[0] for call in calls if call[4] is None}
    for iteration in iterations:
        if missing <= found.keys():
            break  # the first result of each id is taken: later prompts change nothing but their warnings
        for _, _, parts in iteration.prompt() or []:
            for part in parts:
                if part[0] == "tool_result" and (key := usable_id(part[2])) is not None:
                    found.setdefault(key, part)
    for call in calls:
        if call[4] is None:
            result = found.get(call[0])
            if result is None:
                raise NotFlat  # the converter would look by name next
            call[4] = unwrap_result(result[5], scopes[call[7]])


_CALL_FIELDS: tuple[str, ...] = (
    "call_id",
    "name",
    "arguments_json",
    "arguments_truncated",
    "result_json",
    "error",
    "iteration",
    "span_id",
)
_CALL_FIELDS += ("start_time", "end_time", "handoff")


def _add_call(columns: Structs, call: Call) -> None:
    fields = columns.fields
    for name, value in zip(_CALL_FIELDS, call, strict=True):
        fields[name].append(value)
    fields["child_row"].append(None)


def _add_messages(column: Any, messages: list[Message] | None, shared: _Shared) -> None:
    if messages is None:
        column.close(None)
        return
    structs = column.items
    fields = structs.fields
    parts = structs.lists["parts"]
    part_fields = parts.items.fields
    for role, name, values in messages:
        fields["role"].append(role)
        fields["name"].append(name)
        for kind, text, call_id, tool, arguments, result, error in values:
            part_fields["type"].append(kind)
            part_fields["text"].append(text)
            part_fields["call_id"].append(call_id)
            part_fields["name"].append(tool)
            part_fields["arguments_json"].append(None if arguments is None else _encode(arguments))
            part_fields["result_json"].append(None if result is None else _encode(result))
            part_fields["error"].append(error)
        parts.close(len(values))
    column.close(len(messages))


def _summed(usages: Any) -> dict[str, int | None]:
    """`Usage.combined`: a count stays `None` only when no model call reported it."""
    totals: dict[str, int | None] = dict.fromkeys(_USAGE)
    for usage in usages:
        for name in _USAGE:
            value = usage[name]
            if value is not None:
                totals[name] = (totals[name] or 0) + value
    return totals


def _schemas(root: Span, chats: list[Span]) -> list[Any]:
    """The tools offered, by name, the root's first then each model call's (as `_calls.tool_schemas`)."""
    found: dict[str, Any] = {}
    for span in (root, *chats):
        attrs = span.attributes
        if _CONTENT.isdisjoint(attrs):
            continue  # a span read by its structure alone: its definitions are not read
        for schema in tool_schemas(attrs.get(A.TOOL_DEFINITIONS)):
            found.setdefault(schema.name, schema)
    return list(found.values())
