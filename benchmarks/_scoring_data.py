"""Synthetic, seeded GenAI agent traces for the scoring benchmark, written by the real exporter.

Each trace is one agent run as OTel GenAI v1.37+ instrumentation records it:

- an `invoke_agent` root span with `gen_ai.input.messages` (the user's question) and
  `gen_ai.output.messages` (the final answer), a conversation id and, on about half of the
  traces, `evaltrace.case_id` (the others match their case by input text);
- 3 to 10 `chat` iterations (skewed to short runs, ~4.9 on average) whose
  `gen_ai.input.messages` repeat the growing history (system, user, every earlier tool call
  and tool result), whose `gen_ai.output.messages` hold `tool_call` parts (1, sometimes 2 per
  reply) or the final text, with token usage, finish reasons and `gen_ai.tool.definitions`;
- one `execute_tool` span per requested call, with the call id, JSON arguments and a JSON
  result; about 4% of calls fail (status ERROR, `error.type`) and are retried once.

Every trace's answer and tool results carry trace-specific numbers, so no two traces share
their payload text. About 3% of answers miss an expected fact, 2% of runs pass a bad argument
type and 4% of traces match no case, so the gate has real failures to find.

The spans are built as SDK `ReadableSpan` objects and handed to `ParquetSpanExporter.export`
in batches of 512 (what a `BatchSpanProcessor` does), so the files are exactly what the
recorder writes. Generation is not part of any measurement.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CASES = 100
EXPORT_BATCH = 512
_BASE_NS = 1_735_689_600_000_000_000  # 2025-01-01T00:00:00Z
_ITERATION_WEIGHTS = {3: 30, 4: 25, 5: 15, 6: 10, 7: 8, 8: 5, 9: 4, 10: 3}
_CITIES = ["Paris", "Lisbon", "Tokyo", "Nairobi", "Lima", "Oslo", "Hanoi", "Denver", "Cairo", "Perth"]
_SYSTEM = (
    "You are a travel assistant. Use the tools to look up weather, flights, hotels and currency "
    "rates before answering. Answer concisely and always name the destination city."
)
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather forecast for a city for the next few days.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name."},
                "days": {"type": "integer", "description": "Number of days (1-14)."},
            },
            "required": ["city"],
        },
    },
    {
        "type": "function",
        "name": "search_flights",
        "description": "Search direct and one-stop flights between two cities on a date.",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "description": "Departure city."},
                "destination": {"type": "string", "description": "Arrival city."},
                "date": {"type": "string", "description": "Departure date, YYYY-MM-DD."},
            },
            "required": ["origin", "destination", "date"],
        },
    },
    {
        "type": "function",
        "name": "find_hotels",
        "description": "Hotels in a city under a nightly budget, sorted by rating.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name."},
                "nights": {"type": "integer", "description": "Number of nights."},
                "max_price": {"type": "number", "description": "Budget per night in EUR."},
            },
            "required": ["city", "nights"],
        },
    },
    {
        "type": "function",
        "name": "convert_currency",
        "description": "Convert an amount between two ISO 4217 currencies at today's rate.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number", "description": "Amount to convert."},
                "source": {"type": "string", "description": "Source currency code."},
                "target": {"type": "string", "description": "Target currency code."},
            },
            "required": ["amount", "source", "target"],
        },
    },
]
TOOL_DEFINITIONS = json.dumps(TOOLS)


@dataclass(frozen=True)
class CaseTemplate:
    """One spec case: its id, input text, destination and the calls it expects."""

    id: str
    input: str
    city: str
    origin: str
    date: str


def case_templates(seed: int) -> list[CaseTemplate]:
    """The spec's cases (the same for every size of one seed)."""
    rng = random.Random(f"cases-{seed}")
    cases = []
    for index in range(CASES):
        city, origin = rng.sample(_CITIES, 2)
        date = f"2025-{rng.randint(3, 11):02d}-{rng.randint(1, 28):02d}"
        text = f"Plan a {rng.randint(2, 9)}-day trip from {origin} to {city} leaving {date}: weather and flights?"
        cases.append(CaseTemplate(f"trip-{index:03d}", text, city, origin, date))
    return cases


def write_spec(path: Path, seed: int) -> None:
    """The benchmark's spec: the reference-free defaults plus per-case expectations."""
    cases = []
    for case in case_templates(seed):
        expect = {
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": case.city}},
                {"name": "search_flights", "arguments": {"destination": case.city}},
            ],
            "trajectory": "in_order",
            "output": {"contains": [case.city], "not_contains": ["I cannot"]},
            "usage": {"total": {"total_tokens": {"max": 400_000}}},
        }
        cases.append({"id": case.id, "input": case.input, "tier": "smoke", "expect": expect})
    spec = {
        "confidence": 0.8,
        "scorers": ["tool_errors", "tool_call_validity", "tool_efficiency", {"outcome": {"expected": "success"}}],
        "cases": cases,
    }
    path.write_text(json.dumps(spec, indent=1), encoding="utf-8")


def _text(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


@dataclass
class _Planned:
    """One tool call of the plan: what the model asks, what the tool answers."""

    name: str
    arguments: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None = None


@dataclass
class _Trace:
    """The spans of one trace, as (name, parent index, attributes, start, end, error) tuples."""

    spans: list[tuple[str, int | None, dict[str, Any], int, int, str | None]] = field(default_factory=list)


def _plan_calls(rng: random.Random, case: CaseTemplate, n: int, serial: int) -> list[list[_Planned]]:
    """Tool calls per non-final iteration: the expected two first, then fillers."""
    first = [
        _Planned("get_weather", {"city": case.city, "days": rng.randint(2, 9)}, None),
        _Planned("search_flights", {"origin": case.origin, "destination": case.city, "date": case.date}, None),
    ]
    calls = first + [_filler(i, case, serial) for i in range(n)]
    if rng.random() < 0.02:
        calls[0].arguments["days"] = "three"  # a bad argument type: tool_call_validity fails
    plan: list[list[_Planned]] = []
    for _ in range(n - 1):
        take = 2 if rng.random() < 0.2 and len(calls) > 1 else 1
        plan.append([calls.pop(0) for _ in range(min(take, len(calls)))])
    return plan


def _filler(i: int, case: CaseTemplate, serial: int) -> _Planned:
    # Arguments vary with `i`, so a long run has no accidental repeats (tool_efficiency).
    kind = i % 4
    if kind == 0:
        return _Planned("find_hotels", {"city": case.city, "nights": 2 + i, "max_price": 80 + serial % 170}, None)
    if kind == 1:
        return _Planned("convert_currency", {"amount": 100 + serial % 900 + i, "source": "EUR", "target": "USD"}, None)
    if kind == 2:
        return _Planned("get_weather", {"city": case.origin, "days": 1 + i}, None)
    back = f"2025-12-{1 + i:02d}"
    return _Planned("search_flights", {"origin": case.city, "destination": case.origin, "date": back}, None)


def _result_of(call: _Planned, serial: int, rng: random.Random) -> dict[str, Any]:
    if call.name == "get_weather":
        return {"forecast": [{"day": d, "high_c": 10 + (serial + d) % 20, "sky": "clear"} for d in range(3)]}
    if call.name == "search_flights":
        return {"flights": [{"no": f"XY{serial % 9000 + k}", "eur": 90 + (serial * 7 + k) % 400} for k in range(3)]}
    if call.name == "find_hotels":
        return {"hotels": [{"name": f"Hotel {serial % 997}-{k}", "rating": 3 + k % 3} for k in range(3)]}
    return {"rate": round(1.0 + rng.random() / 10, 4), "converted": 100 + serial % 1000}


def build_trace(rng: random.Random, case: CaseTemplate, serial: int, start: int, with_case_id: bool) -> _Trace:
    """The spans of one agent run (see the module docstring)."""
    n = rng.choices(list(_ITERATION_WEIGHTS), weights=list(_ITERATION_WEIGHTS.values()))[0]
    plan = _plan_calls(rng, case, n, serial)
    question = case.input if not with_case_id else f"{case.input} (ticket {serial})"
    history: list[dict[str, Any]] = [_text("system", _SYSTEM), _text("user", question)]
    out = _Trace()
    clock = start + 1_000_000
    total_in = total_out = 0
    for step in range(n):
        calls = plan[step] if step < len(plan) else []
        if calls and rng.random() < 0.04:
            failed = _Planned(calls[0].name, dict(calls[0].arguments), None, error="TimeoutError")
            calls = [failed, *calls]  # the failed call is retried in the same reply
        reply = _reply(calls, case, serial, rng, step)
        in_tokens, out_tokens = 180 + 60 * len(history) + serial % 50, 20 + 15 * len(calls) + rng.randint(0, 60)
        total_in, total_out = total_in + in_tokens, total_out + out_tokens
        chat_end = clock + 400_000_000 + rng.randint(0, 900_000_000)
        attrs = _chat_attributes(history, reply, in_tokens, out_tokens, "tool_call" if calls else "stop")
        out.spans.append(("chat gpt-4o", 0, attrs, clock, chat_end, None))
        clock = chat_end + 1_000_000
        history.append(reply)
        for index, call in enumerate(calls):
            call_id = f"call_{serial:07d}_{step}_{index}"
            call.result = None if call.error else _result_of(call, serial, rng)
            tool_end = clock + 50_000_000 + rng.randint(0, 300_000_000)
            out.spans.append(
                (f"execute_tool {call.name}", 0, _tool_attributes(call, call_id), clock, tool_end, call.error)
            )
            clock = tool_end + 1_000_000
            response = call.result if call.result is not None else {"error": call.error}
            history.append(
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": response}]}
            )
    answer = history[-1]["parts"][0]["content"]
    root = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "travel_planner",
        "gen_ai.provider.name": "openai",
        "gen_ai.conversation.id": f"conv-{serial:07d}",
        "gen_ai.input.messages": json.dumps([_text("user", question)]),
        "gen_ai.output.messages": json.dumps([_text("assistant", answer)]),
        "gen_ai.usage.input_tokens": total_in,
        "gen_ai.usage.output_tokens": total_out,
    }
    if with_case_id:
        root["evaltrace.case_id"] = case.id
    out.spans.insert(0, ("invoke_agent travel_planner", None, root, start, clock + 1_000_000, None))
    return out


def _reply(calls: list[_Planned], case: CaseTemplate, serial: int, rng: random.Random, step: int) -> dict[str, Any]:
    if calls:
        parts = [
            {"type": "tool_call", "id": f"call_{serial:07d}_{step}_{i}", "name": c.name, "arguments": c.arguments}
            for i, c in enumerate(calls)
        ]
        return {"role": "assistant", "parts": parts, "finish_reason": "tool_call"}
    city = case.city if rng.random() >= 0.03 else "your destination"
    text = (
        f"Trip plan {serial}: {city} will be mostly clear, highs around {10 + serial % 20} C. "
        f"The cheapest direct flight from {case.origin} on {case.date} is XY{serial % 9000} at "
        f"EUR {90 + serial * 7 % 400}. Budget about EUR {400 + serial % 600} for {2 + serial % 7} nights."
    )
    return {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}


def _chat_attributes(
    history: list[dict[str, Any]], reply: dict[str, Any], in_tokens: int, out_tokens: int, finish: str
) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "gpt-4o-2024-08-06",
        "gen_ai.response.id": f"chatcmpl-{random.getrandbits(48):012x}",
        "gen_ai.usage.input_tokens": in_tokens,
        "gen_ai.usage.output_tokens": out_tokens,
        "gen_ai.response.finish_reasons": (finish,),
        "gen_ai.input.messages": json.dumps(history),
        "gen_ai.output.messages": json.dumps([reply]),
        "gen_ai.tool.definitions": TOOL_DEFINITIONS,
        "server.address": "api.openai.com",
    }


def _tool_attributes(call: _Planned, call_id: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": json.dumps(call.arguments),
    }
    if call.error:
        attrs["error.type"] = call.error
    else:
        attrs["gen_ai.tool.call.result"] = json.dumps(call.result)
    return attrs


def generate(directory: Path, traces: int, seed: int) -> int:
    """Write `traces` agent traces as evaltrace Parquet files in `directory`; returns the span count."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

    from evaltrace.collector.recorder.exporter import ParquetSpanExporter

    rng = random.Random(seed)
    random.seed(seed)  # response ids in `_chat_attributes`
    cases = case_templates(seed)
    resource = Resource.create({"service.name": "travel-agent", "deployment.environment": "bench"})
    scope = InstrumentationScope("opentelemetry.instrumentation.openai_v2", "2.1b0")
    exporter = ParquetSpanExporter(directory, run_id=f"bench-{seed}", flush_interval=3600, max_rows=50_000)
    pending: list[ReadableSpan] = []
    spans = 0
    for serial in range(traces):
        roll = rng.random()
        case = cases[serial % CASES]
        trace = build_trace(rng, case, serial, _BASE_NS + serial * 20_000_000_000, with_case_id=roll < 0.5)
        if roll > 0.96:  # matches no case: a question outside the spec
            trace.spans[0][2]["gen_ai.input.messages"] = json.dumps([_text("user", f"Unrelated question {serial}")])
            trace.spans[0][2].pop("evaltrace.case_id", None)
        trace_id = rng.getrandbits(128)
        ids = [rng.getrandbits(64) or 1 for _ in trace.spans]
        contexts = [SpanContext(trace_id, i, is_remote=False, trace_flags=TraceFlags(1)) for i in ids]
        for index, (name, parent, attrs, start, end, error) in enumerate(trace.spans):
            status = Status(StatusCode.ERROR, error) if error else Status(StatusCode.UNSET)
            kind = SpanKind.CLIENT if name.startswith("chat") else SpanKind.INTERNAL
            pending.append(
                ReadableSpan(
                    name=name,
                    context=contexts[index],
                    parent=contexts[parent] if parent is not None else None,
                    resource=resource,
                    attributes=attrs,
                    kind=kind,
                    status=status,
                    start_time=start,
                    end_time=end,
                    instrumentation_scope=scope,
                )
            )
        spans += len(trace.spans)
        if len(pending) >= EXPORT_BATCH:
            exporter.export(pending)
            pending = []
    if pending:
        exporter.export(pending)
    exporter.shutdown()
    return spans
