"""A plain openai tool loop under opentelemetry-instrumentation-openai-v2, recording spans only.

The two ways a new user's first recording goes wrong, made for `test_doctor_recording.py`:
the instrumentation's default mode puts message content in log records, which this app does not
record, and with `--no-root` nothing wraps the loop, so each model call is a trace of its own.

    python openai_v2_spans_only.py OUT_DIR [--no-root]
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for fake_llm

import openai
from fake_llm import FakeLLM, call, text_turn, tool_turn
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.collector.recorder.exporter import ParquetSpanExporter

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def main(out: Path, root: bool) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(out, run_id="spans-only")))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("app")
    turns = [tool_turn(call("get_weather", {"city": "Paris"})), text_turn("18C in Paris.")]
    with FakeLLM(turns) as llm, openai.OpenAI(base_url=llm.base_url, api_key="test") as client:
        messages: list[dict[str, object]] = [{"role": "user", "content": "Weather in Paris?"}]
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "loop"}
        with tracer.start_as_current_span("invoke_agent loop", attributes=agent) if root else nullcontext():
            first = client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
            tool_call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
            messages += [
                first.choices[0].message.model_dump(),
                {"role": "tool", "tool_call_id": tool_call.id, "content": "18C"},
            ]
            client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
    provider.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]), root="--no-root" not in sys.argv)
