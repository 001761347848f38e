"""Redaction reaches every place a secret can land in a span file, checked in the file's bytes.

Spans are recorded with the real OTel SDK (and a real pydantic-ai agent) through
`ParquetSpanExporter` with secrets planted in every content-bearing place of every convention the
converter reads. The file is then searched three ways: its raw bytes (footer, statistics and
key-value metadata are stored uncompressed), a copy rewritten without compression or dictionary
encoding (every data page in plain form), and the text of every column read back. Each test
first checks that the same spans recorded without redaction DO hold every planted secret, so
a search that found nothing for the wrong reason cannot pass.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fake_llm import FakeLLM, call, text_turn, tool_turn
from openai import AsyncOpenAI
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Link, Status, StatusCode
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from evaltrace.collector import resolve_paths
from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.log_exporter import ParquetLogExporter
from evaltrace.collector.recorder.redact import MASK, RedactionSettings, Redactor
from evaltrace.collector.runfiles.jsonvalue import loads_attributes
from evaltrace.collector.traces.rebuild import read_traces

NO_CONTENT = RedactionSettings(capture_content=False)


class Secrets:
    """Planted tokens, one per place (the same place gives the same token), so a leak names its place."""

    def __init__(self) -> None:
        self.planted: dict[str, str] = {}

    def __call__(self, place: str) -> str:
        digest = hashlib.sha256(place.encode()).hexdigest()[:6]
        token = f"PLANTED{digest}X{''.join(c for c in place.upper() if c.isalnum())[:24]}"
        assert self.planted.setdefault(token, place) == place
        return token


def file_text(path: Path) -> str:
    """Everything the file holds, as searchable text (see the module docstring)."""
    raw = path.read_bytes()
    table = pq.read_table(path)
    plain = io.BytesIO()
    pq.write_table(table, plain, compression="NONE", use_dictionary=False)
    columns = json.dumps(table.cast(_without_timestamps(table.schema)).to_pylist(), ensure_ascii=False)
    metadata = json.dumps({k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()})
    return "\n".join([raw.decode("latin-1"), plain.getvalue().decode("latin-1"), columns, metadata])


def _without_timestamps(schema: pa.Schema) -> pa.Schema:
    """`schema` with every timestamp (top-level or nested) as int64, so `to_pylist` keeps nanoseconds."""

    def plain(kind: pa.DataType) -> pa.DataType:
        if pa.types.is_timestamp(kind):
            return pa.int64()
        if pa.types.is_list(kind):
            return pa.list_(pa.field(kind.value_field.name, plain(kind.value_type), kind.value_field.nullable))
        if pa.types.is_struct(kind):
            return pa.struct([pa.field(f.name, plain(f.type), f.nullable) for f in kind])
        return kind

    return pa.schema([pa.field(f.name, plain(f.type), f.nullable) for f in schema], metadata=schema.metadata)


def leaks(directory: Path, secrets: Secrets) -> dict[str, str]:
    """Planted token -> place, for every token found in any file of `directory`."""
    files = sorted(directory.glob("*.parquet"))
    assert files, f"no span file in {directory}"
    text = "\n".join(file_text(p) for p in files)
    return {token: place for token, place in secrets.planted.items() if token in text}


def record(
    directory: Path, settings: RedactionSettings, emit: Callable[[TracerProvider], None], **resource: str
) -> None:
    provider = TracerProvider(resource=Resource({"service.name": "svc", **resource}))
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(directory, redaction=settings)))
    emit(provider)
    provider.shutdown()


def both_ways(tmp_path: Path, settings: RedactionSettings, emit: Callable[[TracerProvider], None], **res: str) -> Path:
    """Record once without redaction (every secret must be found) and once with `settings`."""
    record(tmp_path / "plain", RedactionSettings(), emit, **res)
    record(tmp_path / "redacted", settings, emit, **res)
    return tmp_path / "redacted"


# --- EVALTRACE_CAPTURE_CONTENT=0 over every convention ----------------------------------------


def genai_spans(s: Secrets) -> Callable[[TracerProvider], None]:
    """GenAI v1.37+ agent, chat and tool spans, old-style message events, an operation-details event."""
    question, answer, args, result = s("user question"), s("answer"), s("tool argument"), s("tool result")
    definitions = [
        {
            "type": "function",
            "name": "get_weather",
            "description": s("tool description"),
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": s("parameter description"), "examples": [s("ex")]},
                    "description": {"type": "string"},  # a property named `description` stays
                },
            },
        }
    ]
    input_messages = [
        {"role": "system", "parts": [{"type": "text", "content": s("system message")}]},
        {"role": "user", "parts": [{"type": "text", "content": question}]},
        {"role": "user", "parts": [{"type": "blob", "modality": "image", "content": s("blob")}]},
        {"role": "user", "parts": [{"type": "uri", "modality": "image", "uri": s("uri")}]},
        {"role": "assistant", "parts": [{"type": "thinking", "content": s("reasoning")}]},
        {"role": "user", "parts": [{"type": "custom", "payload": s("unknown part field")}]},
    ]
    output_messages = [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": s("assistant text")},
                {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": args}},
            ],
            "finish_reason": "tool_call",
        }
    ]
    history = [
        *input_messages,
        *output_messages,
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": result}]},
    ]

    def emit(provider: TracerProvider) -> None:
        tracer = provider.get_tracer("t")
        agent_attrs = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "weather",
            "gen_ai.agent.description": s("agent description"),
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": question}]}]),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
            ),
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": s("system instructions")}]),
        }
        with tracer.start_as_current_span("invoke_agent weather", attributes=agent_attrs):
            with tracer.start_as_current_span("chat m") as chat:
                chat.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.request.model": "m",
                        "gen_ai.usage.input_tokens": 11,
                        "gen_ai.usage.output_tokens": 7,
                        "gen_ai.input.messages": json.dumps(history),
                        "gen_ai.output.messages": json.dumps(output_messages),
                        "gen_ai.tool.definitions": json.dumps(definitions),
                    }
                )
            tool_attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.description": s("tool span description"),
                "gen_ai.tool.call.arguments": json.dumps({"city": args}),
                "gen_ai.tool.call.result": result,
            }
            with tracer.start_as_current_span("execute_tool get_weather", attributes=tool_attrs):
                pass
            failing = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": "c2",
            }
            with pytest.raises(ValueError), tracer.start_as_current_span("execute_tool lookup", attributes=failing):
                raise ValueError(s("exception message"))  # status message and exception event hold it
            with tracer.start_as_current_span("execute_tool other") as other:
                other.set_status(Status(StatusCode.ERROR, s("status message")))
            with tracer.start_as_current_span("chat old") as old:
                old.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.system": "openai"})
                old.add_event("gen_ai.system.message", {"content": s("old system"), "role": "system"})
                old.add_event("gen_ai.user.message", {"content": s("old user"), "gen_ai.system": "openai"})
                old.add_event(
                    "gen_ai.assistant.message",
                    {"tool_calls": json.dumps([{"id": "c3", "function": {"name": "f", "arguments": s("old args")}}])},
                )
                old.add_event("gen_ai.tool.message", {"content": s("old tool result"), "id": "c3"})
                blocks = [
                    {"text": s("bedrock text")},
                    {"toolUse": {"toolUseId": "c4", "name": "f", "input": {"q": s("in")}}},
                ]
                old.add_event("gen_ai.assistant.message", {"content": json.dumps(blocks)})
                choice = {"role": "assistant", "content": s("choice text"), "tool_calls": [{"id": "c5"}]}
                old.add_event("gen_ai.choice", {"message": json.dumps(choice), "finish_reason": "stop", "index": 0})
                old.add_event(
                    "gen_ai.client.inference.operation.details",
                    {
                        "gen_ai.input.messages": json.dumps(
                            [{"role": "user", "parts": [{"type": "text", "content": s("d")}]}]
                        ),
                        "gen_ai.system_instructions": s("details instructions"),
                    },
                )

    return emit


def openinference_spans(s: Secrets) -> Callable[[TracerProvider], None]:
    """OpenInference AGENT, LLM, RETRIEVER, EMBEDDING, RERANKER and TOOL spans."""

    def emit(provider: TracerProvider) -> None:
        tracer = provider.get_tracer("openinference.instrumentation.x")
        with tracer.start_as_current_span("Agent", attributes={
            "openinference.span.kind": "AGENT", "input.value": s("oi input"), "output.value": s("oi output"),
            "session.id": "sess-1", "metadata": json.dumps({"k": "v"}),
        }):  # fmt: skip
            llm = {
                "openinference.span.kind": "LLM",
                "llm.model_name": "m",
                "llm.token_count.prompt": 5,
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": s("oi system"),
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.contents.0.message_content.type": "text",
                "llm.input_messages.1.message.contents.0.message_content.text": s("oi content text"),
                "llm.input_messages.1.message.contents.1.message_content.image.image.url": s("oi image"),
                "llm.input_messages.2.message.role": "tool",
                "llm.input_messages.2.message.tool_call_id": "call_9",
                "llm.input_messages.2.message.content": s("oi tool message"),
                "llm.input_messages.3.message.function_call_name": "legacy",
                "llm.input_messages.3.message.function_call_arguments_json": s("oi legacy args"),
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_9",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": s("oi arguments"),
                "llm.prompt_template.template": s("template"),
                "llm.prompt_template.variables": json.dumps({"city": s("template variable")}),
                "llm.prompt_template.version": "v1",
                "llm.tools.0.tool.json_schema": json.dumps(
                    {"type": "function", "function": {"name": "get_weather", "description": s("oi tool schema")}}
                ),
                "llm.invocation_parameters": json.dumps(
                    {
                        "model": "m",
                        "temperature": 0.5,
                        "instructions": s("oi instructions"),
                        "tools": [{"type": "function", "function": {"name": "f", "description": s("oi param tool")}}],
                    }
                ),  # fmt: skip
                "llm.prompts": (s("oi prompts"),),
            }
            with tracer.start_as_current_span("ChatModel", attributes=llm):
                pass
            with tracer.start_as_current_span("Retriever", attributes={
                "openinference.span.kind": "RETRIEVER", "input.value": s("retrieval query"),
                "retrieval.documents.0.document.id": "doc-1", "retrieval.documents.0.document.score": 0.9,
                "retrieval.documents.0.document.content": s("retrieved document"),
                "retrieval.documents.0.document.metadata": json.dumps({"source": s("document metadata")}),
            }):  # fmt: skip
                pass
            with tracer.start_as_current_span("Embedder", attributes={
                "openinference.span.kind": "EMBEDDING",
                "embedding.embeddings.0.embedding.text": s("embedded text"),
            }):  # fmt: skip
                pass
            with tracer.start_as_current_span("Reranker", attributes={
                "openinference.span.kind": "RERANKER", "reranker.query": s("rerank query"),
                "reranker.input_documents.0.document.content": s("rerank in"),
                "reranker.output_documents.0.document.content": s("rerank out"),
            }):  # fmt: skip
                pass
            with tracer.start_as_current_span("get_weather", attributes={
                "openinference.span.kind": "TOOL", "tool.name": "get_weather",
                "tool.description": s("oi tool description"), "tool.parameters": json.dumps({"city": s("tp")}),
                "input.value": s("oi tool input"), "output.value": s("oi tool output"),
            }):  # fmt: skip
                pass

    return emit


def openllmetry_and_framework_spans(s: Secrets) -> Callable[[TracerProvider], None]:
    """OpenLLMetry workflow, LLM and tool spans; pydantic-ai v1/v2 attributes; ADK vendor attributes."""

    def emit(provider: TracerProvider) -> None:
        tracer = provider.get_tracer("opentelemetry.instrumentation.x")
        with tracer.start_as_current_span("wf.workflow", attributes={
            "traceloop.span.kind": "workflow", "traceloop.entity.name": "wf",
            "traceloop.entity.input": json.dumps({"args": [s("tl input")], "kwargs": {}}),
            "traceloop.entity.output": s("tl output"),
        }):  # fmt: skip
            with tracer.start_as_current_span("openai.chat", attributes={
                "llm.request.type": "chat", "gen_ai.usage.prompt_tokens": 3,
                "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": s("tl prompt"),
                "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.finish_reason": "tool_calls",
                "gen_ai.completion.0.content": s("tl completion"),
                "gen_ai.completion.0.tool_calls.0.id": "call_7", "gen_ai.completion.0.tool_calls.0.name": "f",
                "gen_ai.completion.0.tool_calls.0.arguments": s("tl arguments"),
                "llm.request.functions.0.name": "f", "llm.request.functions.0.description": s("tl function desc"),
                "llm.request.functions.0.parameters": json.dumps(
                    {"type": "object", "properties": {"q": {"type": "string", "description": s("tl param")}}}
                ),
                "gen_ai.prompt": s("strands old prompt"), "gen_ai.completion": s("strands old completion"),
            }):  # fmt: skip
                pass
            with tracer.start_as_current_span("f.tool", attributes={
                "traceloop.span.kind": "tool", "traceloop.entity.name": "f",
                "traceloop.entity.input": s("tl tool input"), "traceloop.entity.output": s("tl tool output"),
            }):  # fmt: skip
                pass
            v1_events = [
                {"event.name": "gen_ai.user.message", "role": "user", "content": s("pyd v1 user")},
                {"event.name": "gen_ai.choice", "index": 0, "message": {"role": "assistant", "content": s("pyd v1")}},
            ]
            with tracer.start_as_current_span("agent run", attributes={
                "pydantic_ai.all_messages": json.dumps([{"role": "user", "parts": [{"content": s("p")}]}]),
                "final_result": s("pyd final result"), "events": json.dumps(v1_events),
                "model_request_parameters": json.dumps(
                    {"function_tools": [{"name": "f", "description": s("pyd tool desc")}]}
                ),
            }):  # fmt: skip
                with tracer.start_as_current_span("running tool", attributes={
                    "tool_name": "f", "tool_arguments": s("pyd tool args"), "tool_response": s("pyd tool response"),
                }):  # fmt: skip
                    pass
            with tracer.start_as_current_span("call_llm", attributes={
                "gen_ai.system": "gcp.vertex.agent",
                "gcp.vertex.agent.llm_request": json.dumps({"contents": [{"parts": [{"text": s("adk request")}]}]}),
                "gcp.vertex.agent.llm_response": s("adk response"),
                "gcp.vertex.agent.tool_call_args": s("adk args"), "gcp.vertex.agent.tool_response": s("adk result"),
            }):  # fmt: skip
                pass

    return emit


CONVENTIONS = {
    "genai": genai_spans,
    "openinference": openinference_spans,
    "openllmetry_and_frameworks": openllmetry_and_framework_spans,
}


@pytest.mark.parametrize("convention", list(CONVENTIONS))
def test_no_content_leaves_no_planted_text_in_the_file(tmp_path: Path, convention: str) -> None:
    secrets = Secrets()
    emit = CONVENTIONS[convention](secrets)
    redacted = both_ways(tmp_path, NO_CONTENT, emit)
    assert leaks(tmp_path / "plain", secrets) == secrets.planted  # every token was written without redaction
    assert leaks(redacted, secrets) == {}


def _spans(directory: Path) -> dict[str, dict[str, Any]]:
    """Span name -> row (attributes decoded, events' attributes decoded) of the files in `directory`."""
    rows: dict[str, dict[str, Any]] = {}
    for path in sorted(directory.glob("*.parquet")):
        table = pq.read_table(path)
        for row in table.cast(_without_timestamps(table.schema)).to_pylist():
            row["attributes"] = loads_attributes(row["attributes"]) | dict(row["large_attributes"] or [])
            row["events"] = [(e["name"], loads_attributes(e["attributes"])) for e in row["events"]]
            rows[row["name"]] = row
    return rows


def test_no_content_keeps_structure_of_every_convention(tmp_path: Path) -> None:
    secrets = Secrets()
    for name, spans in CONVENTIONS.items():
        record(tmp_path / name, NO_CONTENT, spans(secrets))
    genai, oi, tl = (_spans(tmp_path / name) for name in CONVENTIONS)

    chat = genai["chat m"]["attributes"]
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (11, 7)
    assert json.loads(chat["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text"}, {"type": "tool_call", "id": "call_1", "name": "get_weather"}],
            "finish_reason": "tool_call",
        }
    ]
    assert [p for m in json.loads(chat["gen_ai.input.messages"]) for p in m["parts"]][-1] == {
        "type": "tool_call_response",
        "id": "call_1",
    }
    (definition,) = json.loads(chat["gen_ai.tool.definitions"])
    assert definition == {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "description": {"type": "string"}}},
    }
    failing = genai["execute_tool lookup"]
    assert failing["status_code"] == "ERROR" and failing["status_message"] is None
    ((event_name, exception),) = failing["events"]
    assert event_name == "exception" and exception["exception.type"] == "ValueError"
    assert "exception.message" not in exception and "exception.stacktrace" not in exception
    assert genai["execute_tool other"]["status_message"] is None
    old = dict(genai["chat old"]["events"][:2]) | {"choice": genai["chat old"]["events"][5][1]}
    assert old["gen_ai.system.message"] == {"role": "system"}
    assert json.loads(old["choice"]["message"]) == {"role": "assistant", "tool_calls": [{"id": "c5"}]}
    assert json.loads(genai["chat old"]["events"][4][1]["content"]) == [{"toolUse": {"toolUseId": "c4", "name": "f"}}]

    llm = oi["ChatModel"]["attributes"]
    assert {k for k in llm if k.startswith("llm.")} == {
        "llm.model_name",
        "llm.token_count.prompt",
        "llm.input_messages.0.message.role",
        "llm.input_messages.1.message.role",
        "llm.input_messages.1.message.contents.0.message_content.type",
        "llm.input_messages.2.message.role",
        "llm.input_messages.2.message.tool_call_id",
        "llm.input_messages.3.message.function_call_name",
        "llm.output_messages.0.message.role",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
        "llm.prompt_template.version",
        "llm.tools.0.tool.json_schema",
        "llm.invocation_parameters",
    }
    assert json.loads(llm["llm.invocation_parameters"]) == {
        "model": "m",
        "temperature": 0.5,
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    retriever = oi["Retriever"]["attributes"]
    assert retriever["retrieval.documents.0.document.id"] == "doc-1"
    assert retriever["retrieval.documents.0.document.score"] == 0.9
    assert oi["get_weather"]["attributes"] == {"openinference.span.kind": "TOOL", "tool.name": "get_weather"}
    assert oi["Agent"]["attributes"]["session.id"] == "sess-1"

    openai_chat = tl["openai.chat"]["attributes"]
    assert openai_chat["gen_ai.completion.0.tool_calls.0.id"] == "call_7"
    assert openai_chat["gen_ai.completion.0.finish_reason"] == "tool_calls"
    assert json.loads(openai_chat["llm.request.functions.0.parameters"]) == {
        "type": "object",
        "properties": {"q": {"type": "string"}},
    }
    assert json.loads(tl["agent run"]["attributes"]["events"]) == [
        {"event.name": "gen_ai.user.message", "role": "user"},
        {"event.name": "gen_ai.choice", "index": 0, "message": {"role": "assistant"}},
    ]
    assert tl["running tool"]["attributes"] == {"tool_name": "f"}
    assert tl["call_llm"]["attributes"] == {"gen_ai.system": "gcp.vertex.agent"}


# --- a real instrumented agent ---------------------------------------------------------------


def _pydantic_ai_run(fake: FakeLLM, provider: TracerProvider, s: Secrets) -> str:
    question, system, description = s("question"), s("instructions"), s("docstring")
    args, result, retry, answer = s("argument"), s("result"), s("retry"), s("final answer")
    calls = (call("get_weather", {"city": args}), call("lookup", {"code": "X"}))
    fake.script(
        [tool_turn(*calls, input_tokens=50, output_tokens=5), text_turn(answer, input_tokens=60, output_tokens=6)]
    )

    async def main() -> str:
        async with AsyncOpenAI(base_url=fake.base_url, api_key="test") as client:
            model = OpenAIChatModel("fake-model", provider=OpenAIProvider(openai_client=client))
            settings = InstrumentationSettings(tracer_provider=provider)
            agent = Agent(model, name="w", instructions=system, capabilities=[Instrumentation(settings=settings)])

            def get_weather(city: str) -> str:
                return result

            get_weather.__doc__ = f"{description} weather of a city."
            agent.tool_plain(get_weather)

            @agent.tool_plain
            def lookup(code: str) -> str:
                """Look a code up."""
                raise ModelRetry(retry)

            return (await agent.run(question)).output

    return asyncio.run(main())


def test_real_pydantic_ai_run_without_content(tmp_path: Path, fake_llm: FakeLLM) -> None:
    secrets = Secrets()
    outputs: list[str] = []

    def emit(provider: TracerProvider) -> None:
        outputs.append(_pydantic_ai_run(fake_llm, provider, secrets))

    both_ways(tmp_path, NO_CONTENT, emit)
    assert outputs[0] == outputs[1] and outputs[0].startswith("PLANTED")
    assert leaks(tmp_path / "plain", secrets) == secrets.planted
    assert leaks(tmp_path / "redacted", secrets) == {}
    (plain,) = read_traces(resolve_paths([tmp_path / "plain"]))
    (redacted,) = read_traces(resolve_paths([tmp_path / "redacted"]))
    # Structure survives: tool names, call ids, iterations, tokens; the text is "not captured".
    assert [c.name for c in redacted.tool_calls] == [c.name for c in plain.tool_calls] == ["get_weather", "lookup"]
    # Call ids come from the scripted server (a new pair per run): each is kept and matched to its tool span.
    tool_spans = {row["attributes"]["gen_ai.tool.call.id"] for row in _spans(tmp_path / "redacted").values()
                  if row["attributes"].get("gen_ai.operation.name") == "execute_tool"}  # fmt: skip
    assert {c.call_id for c in redacted.tool_calls} == tool_spans and len(tool_spans) == 2
    assert len(redacted.iterations) == len(plain.iterations) == 2
    assert (redacted.usage.input_tokens, redacted.usage.output_tokens) == (110, 11)
    assert redacted.usage == plain.usage
    assert (redacted.input, redacted.output) == (None, None)
    assert all(c.arguments is None and c.result is None for c in redacted.tool_calls)
    assert {s.name for s in redacted.tool_schemas} == {"get_weather", "lookup"}
    assert all(s.description is None for s in redacted.tool_schemas)


# --- masking and key drops reach names, resources, status, events and links ------------------


def test_masks_reach_every_text_and_drops_every_mapping(tmp_path: Path) -> None:
    secrets = Secrets()
    pattern = r"PLANTED[0-9a-f]{6}X[A-Z0-9]+"
    name_token, event_token = secrets("span name"), secrets("event name")

    def emit(provider: TracerProvider) -> None:
        tracer = provider.get_tracer(f"lib-{secrets('scope name')}", f"1.0-{secrets('scope version')}")
        with tracer.start_as_current_span("linked") as linked:
            target = linked.get_span_context()
        links = [Link(target, {"link.note": f"see {secrets('link attribute')}", "secret.link": "x"})]
        with tracer.start_as_current_span(f"execute_tool get_weather {name_token}", links=links) as span:
            span.set_attribute("note", f"key {secrets('span attribute')} end")
            span.set_attribute("secret.attr", "dropped by key")
            span.add_event(f"progress {event_token}", {"detail": secrets("event attribute"), "secret.e": "y"})
            span.set_status(Status(StatusCode.ERROR, f"failed: {secrets('status message')}"))

    settings = RedactionSettings(mask_patterns=(pattern,), drop_keys=("secret.*",))
    redacted = both_ways(tmp_path, settings, emit, **{"deployment": secrets("resource attribute"), "secret.res": "z"})
    assert leaks(tmp_path / "plain", secrets) == secrets.planted
    assert leaks(redacted, secrets) == {}
    rows = _spans(redacted)
    row = rows[f"execute_tool get_weather {MASK}"]  # only the matched text of the name is replaced
    assert row["status_message"] == f"failed: {MASK}"
    assert row["attributes"] == {"note": f"key {MASK} end"}
    assert row["events"] == [(f"progress {MASK}", {"detail": MASK})]
    assert [loads_attributes(link["attributes"]) for link in row["links"]] == [{"link.note": f"see {MASK}"}]
    assert (row["scope_name"], row["scope_version"]) == (f"lib-{MASK}", f"1.0-{MASK}")
    assert loads_attributes(row["resource"]) == {"service.name": "svc", "deployment": MASK}


def test_service_name_is_masked_before_it_becomes_a_column(tmp_path: Path) -> None:
    settings = RedactionSettings(mask_patterns=("acme-secret",))
    record(tmp_path, settings, lambda p: p.get_tracer("t").start_span("s").end(), **{"service.name": "acme-secret-api"})
    (row,) = _spans(tmp_path).values()
    assert row["service_name"] == f"{MASK}-api"
    assert loads_attributes(row["resource"])["service.name"] == f"{MASK}-api"


# --- the Redactor's own edges -----------------------------------------------------------------


def test_deeply_nested_content_is_dropped_without_failing_the_batch(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    attrs = {"gen_ai.input.messages": deep, "gen_ai.output.messages": '[{"role": "assistant"}]', "n": 1}
    record(tmp_path, NO_CONTENT, lambda p: p.get_tracer("t").start_span("s", attributes=attrs).end())
    (row,) = _spans(tmp_path).values()
    assert row["attributes"] == {"gen_ai.output.messages": '[{"role": "assistant"}]', "n": 1}


def _log_bodies(folder: Path, settings: RedactionSettings, bodies: list[Any]) -> list[Any]:
    """The bodies as written by the real log exporter (through `LogEncoder`), parsed back."""
    exporter = ParquetLogExporter(folder, run_id="bodies", redaction=settings)
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    for body in bodies:
        provider.get_logger("t").emit(body=body)
    provider.shutdown()
    rows = pq.read_table(next(folder.glob("*.logs.parquet"))).to_pylist()
    return [None if row["body"] is None else json.loads(row["body"]) for row in rows]


def test_log_bodies_keep_structure_only_and_are_masked(tmp_path: Path) -> None:
    off_settings = RedactionSettings(capture_content=False, mask_patterns=("call_\\d",))
    body = {"role": "assistant", "content": "text", "tool_calls": [{"id": "call_1", "function": {"arguments": "{}"}}]}
    written = _log_bodies(tmp_path / "off", off_settings, [body, "plain text body", {"content": "only text"}])
    assert written == [{"role": "assistant", "tool_calls": [{"id": MASK}]}, None, {}]
    on = RedactionSettings(mask_patterns=("secret",))
    masked = _log_bodies(tmp_path / "on", on, [{"content": ["a secret", {"x": "secret b"}]}])
    assert masked == [{"content": [f"a {MASK}", {"x": f"{MASK} b"}]}]
    off = Redactor(off_settings)
    assert Redactor(on).status_message("a secret") == f"a {MASK}" and off.status_message("anything") is None
