"""Deterministic GenAI-shaped spans made with the real OTel SDK (fixed ids and timestamps).

Used by the golden, property and CLI tests: a `Recorder` owns a TracerProvider whose ids come
from a counter and whose spans are given explicit start and end times, so the same calls always
produce byte-identical spans. `Recorder.span(...)` opens a span as the current span.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Span, Status, StatusCode

from evaltrace.collector.recorder.exporter import ParquetSpanExporter

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z in ns


class CountingIds(IdGenerator):
    """Trace ids 1, 2, ... and span ids 1, 2, ... (as hex)."""

    def __init__(self) -> None:
        self.spans = 0
        self.traces = 0

    def generate_span_id(self) -> int:
        self.spans += 1
        return self.spans

    def generate_trace_id(self) -> int:
        self.traces += 1
        return self.traces


class Recorder:
    """A provider with counting ids and a millisecond clock; spans go to memory and optionally Parquet."""

    def __init__(self, directory: Path | None = None) -> None:
        self.provider = TracerProvider(id_generator=CountingIds(), resource=Resource({"service.name": "golden"}))
        self.memory = InMemorySpanExporter()
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        if directory is not None:
            self.provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(directory, run_id="golden")))
        self.tracer = self.provider.get_tracer("tests")
        self.now = T0

    def tick(self, ms: int = 1) -> int:
        self.now += ms * 1_000_000
        return self.now

    @contextmanager
    def span(
        self, name: str, attributes: dict[str, Any] | None = None, *, error: Exception | None = None, end: bool = True
    ) -> Iterator[Span]:
        """A current span from now to the clock's time at exit; `error` records it and sets ERROR."""
        span = self.tracer.start_span(name, attributes=attributes, start_time=self.tick())
        token_ctx = _use(span)
        with token_ctx:
            yield span
        if error is not None:
            span.record_exception(error, timestamp=self.tick())
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        if end:
            span.end(end_time=self.tick())

    def finished(self) -> list[ReadableSpan]:
        return list(self.memory.get_finished_spans())

    def close(self) -> None:
        self.provider.force_flush()
        self.provider.shutdown()


def _use(span: Span) -> Any:
    from opentelemetry.trace import use_span

    return use_span(span, end_on_exit=False)


def messages(*items: tuple[str, list[dict[str, Any]]]) -> str:
    """GenAI message JSON from (role, parts) pairs."""
    return json.dumps([{"role": role, "parts": parts} for role, parts in items])


def text(content: str) -> dict[str, Any]:
    return {"type": "text", "content": content}


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def tool_response(call_id: str, result: Any) -> dict[str, Any]:
    return {"type": "tool_call_response", "id": call_id, "response": result}


def chat(
    rec: Recorder,
    model: str,
    inputs: str | None,
    outputs: str | None,
    tokens: tuple[int, int],
    finish: str = "stop",
    **extra: Any,
) -> None:
    """One `chat` span with GenAI v1.37 content (omitted where `None`)."""
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.response.model": model,
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
        "gen_ai.response.finish_reasons": [finish],
        **extra,
    }
    if inputs is not None:
        attrs["gen_ai.input.messages"] = inputs
    if outputs is not None:
        attrs["gen_ai.output.messages"] = outputs
    with rec.span(f"chat {model}", attrs):
        rec.tick(5)


def tool_attrs(name: str, call_id: str | None, arguments: Any = None, result: Any = None) -> dict[str, Any]:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = call_id
    if arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = arguments
    if result is not None:
        attrs["gen_ai.tool.call.result"] = result
    return attrs


def agent_attrs(name: str, **extra: Any) -> dict[str, Any]:
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **extra}


def agent_turn(
    rec: Recorder, prompt: str, answer: str, city: str | None = None, conversation: str | None = None
) -> None:
    """One agent run: with a city, a get_weather call (18C) before the answer; in a conversation when given."""
    extra = {"gen_ai.conversation.id": conversation} if conversation else {}
    with rec.span("invoke_agent helper", agent_attrs("helper", **extra)):
        user = ("user", [text(prompt)])
        if city is not None:
            call_id = f"c-{rec.now}"
            call = ("assistant", [tool_call(call_id, "get_weather", {"city": city})])
            chat(rec, "gpt-4o", messages(user), messages(call), (50, 5), "tool_call")
            arguments = json.dumps({"city": city})
            with rec.span("execute_tool get_weather", tool_attrs("get_weather", call_id, arguments, "18C")):
                rec.tick(2)
        chat(rec, "gpt-4o", messages(user), messages(("assistant", [text(answer)])), (80, 9))


def without_prompts(dumped: Any) -> Any:
    """Trace JSON (`model_dump(mode="json")`) with every iteration's prompt null, child traces included."""
    if isinstance(dumped, list):
        return [without_prompts(item) for item in dumped]
    if not isinstance(dumped, dict):
        return dumped
    stripped = {key: without_prompts(value) for key, value in dumped.items()}
    if "input_messages" in stripped:  # only iterations have this key
        stripped["input_messages"] = None
    return stripped
