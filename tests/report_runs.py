"""Recorded runs for the report-format tests: real OTel SDK GenAI spans written by evaltrace's exporter.

`record_runs(folder)` records a small evaluation run covering every outcome a report shows: a
passing case, a failing case whose answer is hostile text (a scorer quotes it whole in its
reason), a case repeated three times (one sample fails), a case whose scorer errors, a case
nothing applies to, and (by its absence) a missing case. `SPEC` is the spec scoring it; the
`t_report_*` scorers live in `report_scorers.py` (a plugin file, so the CLI subprocesses load them
with `--plugin`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Tracer

from evaltrace.collector import ParquetSpanExporter

HERE = Path(__file__).resolve().parent
PLUGIN = HERE / "report_scorers.py"

HOSTILE = (
    "Sunny ]]> <script>alert(1)</script> \x1b[31mred\x1b[0m \x00nul | a|b `tick` ``` *bold* _it_ [link](http://x) "
    "<b>html</b> & &amp; \u202eevil\nsecond line\r\n# heading\n| --- |"
)
"""A recorded answer built to break XML (CDATA end, NUL, ESC) and Markdown (pipes, backticks, HTML, newlines)."""

SPEC = """\
confidence: 0.5
cases:
  - id: paris
    input: "What's the weather in Paris?"
    tier: smoke
    expect:
      tool_calls:
        - {name: get_weather, arguments: {city: Paris}}
      output: {contains: ["18"]}
  - id: hostile
    input: "Tell me about the weather"
    tier: smoke
    expect:
      output: {equals: "It is sunny."}
      t_report_echo: {}
  - id: rome
    input: "And in Rome?"
    tier: full
    repeat: mean
    expect:
      output: {contains: ["21"]}
  - id: broken-scorer
    input: "Check the scorer"
    expect: {t_report_boom: {}}
  - id: nothing-applies
    input: "Nothing to check"
    expect: {t_report_na: {}}
  - id: never-recorded
    input: "Nobody asked this"
    tier: full
    expect:
      output: {contains: ["x"]}
"""

RUNS: list[dict[str, Any]] = [
    {"user": "What's the weather in Paris?", "answer": "It is 18C and sunny in Paris.", "city": "Paris"},
    {"user": "Tell me about the weather", "answer": HOSTILE},
    {"user": "And in Rome?", "answer": "Rome: 21C."},
    {"user": "And in Rome?", "answer": "Rome is warm."},
    {"user": "And in Rome?", "answer": "21C in Rome."},
    {"user": "Check the scorer", "answer": "fine"},
    {"user": "Nothing to check", "answer": "ok"},
]


def _chat(tracer: Tracer, user: str, reply: dict[str, Any], tokens: tuple[int, int]) -> None:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": user}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", **reply}]),
    }
    with tracer.start_as_current_span("chat gpt-4o", attributes=attributes):
        pass


def record_run(
    tracer: Tracer,
    user: str,
    answer: str,
    *,
    city: str | None = None,
    case_id: str | None = None,
    agent_name: str | None = None,
) -> None:
    """One agent run as OTel GenAI spans: invoke_agent > (chat with a tool call, execute_tool)? > chat."""
    attributes = {"gen_ai.operation.name": "invoke_agent"}
    if agent_name is not None:
        attributes["gen_ai.agent.name"] = agent_name
    if case_id is not None:
        attributes["evaltrace.case_id"] = case_id
    with tracer.start_as_current_span("invoke_agent weather", attributes=attributes):
        if city is not None:
            call = {"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": city}}
            _chat(tracer, user, {"parts": [call], "finish_reason": "tool_call"}, (100, 10))
            tool_attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": json.dumps({"city": city}),
                "gen_ai.tool.call.result": "18C sunny",
            }
            with tracer.start_as_current_span("execute_tool get_weather", attributes=tool_attributes):
                pass
        _chat(tracer, user, {"parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}, (200, 20))


def record_runs(folder: Path, runs: list[dict[str, Any]] | None = None) -> Path:
    """Record `runs` (default `RUNS`) into Parquet files in `folder` with the real SDK and exporter."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(ParquetSpanExporter(folder, run_id="report-test")))
    tracer = provider.get_tracer("report-test-agent")
    for kwargs in RUNS if runs is None else runs:
        record_run(tracer, **kwargs)
    provider.force_flush()
    provider.shutdown()
    assert list(folder.glob("*.parquet"))
    return folder


def write_spec(folder: Path, text: str = SPEC) -> Path:
    """`text` as `folder/evals.yaml`."""
    path = folder / "evals.yaml"
    path.write_text(text, encoding="utf-8")
    return path
