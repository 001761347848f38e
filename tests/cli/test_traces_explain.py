"""`evaltrace traces PATH --explain TRACE`: each span's reading, through a real CLI subprocess.

The spans are made with the real OTel SDK and written by `ParquetSpanExporter`: an agent run whose
graph step (a container) holds a model call, that model call's second description by another
instrumentation (nested in it), a tool call, and an HTTP span of the client.
"""

from __future__ import annotations

import json

from cli_process import evaltrace
from conftest import SpanRecorder

QUESTION = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
ANSWER = [{"role": "assistant", "parts": [{"type": "text", "content": "18C."}]}]


def _record(recorder: SpanRecorder) -> str:
    tracer = recorder.provider.get_tracer("app")
    agent = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather",
        "gen_ai.input.messages": json.dumps(QUESTION),
        "gen_ai.output.messages": json.dumps(ANSWER),
    }
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 5}
    with tracer.start_as_current_span("invoke_agent weather", attributes=agent) as root:
        with tracer.start_as_current_span("graph step", attributes={"openinference.span.kind": "CHAIN"}):
            with tracer.start_as_current_span("chat m", attributes=chat):
                with tracer.start_as_current_span("chat m again", attributes=chat):
                    with tracer.start_as_current_span("POST /v1/chat/completions", attributes={"http.method": "POST"}):
                        pass
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "c1"}
        with tracer.start_as_current_span("execute_tool get_weather", attributes=tool):
            pass
    recorder.provider.shutdown()  # writes the file
    return f"{root.get_span_context().trace_id:032x}"


def test_explain_says_what_each_span_became_and_why_others_were_set_aside(span_recorder: SpanRecorder) -> None:
    trace_id = _record(span_recorder)
    done = evaltrace("traces", span_recorder.directory, "--explain", trace_id[:10])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"trace {trace_id}: 6 spans, read as follows"
    by_name = {line.strip().split("  [")[0]: line for line in lines[1:]}
    assert by_name["invoke_agent weather"].endswith("-> the run (invoke_agent weather); the input; the answer")
    assert "set aside: a container" in by_name["graph step"]
    assert by_name["chat m"].endswith("-> iteration 0")
    merged = "-> merged into iteration 0: the same model call (its usage not counted again)"
    assert by_name["chat m again"].endswith(merged)
    assert "set aside: no convention's model, tool or agent attributes" in by_name["POST /v1/chat/completions"]
    assert by_name["execute_tool get_weather"].endswith("-> tool call 0: get_weather (no result recorded)")
    assert by_name["chat m again"].startswith("      chat m again")  # depth shown by indentation


def test_explain_as_json_lines_and_unknown_ids(span_recorder: SpanRecorder) -> None:
    trace_id = _record(span_recorder)
    done = evaltrace("traces", span_recorder.directory, "--explain", trace_id, "--json")
    readings = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["role"] for r in readings] == ["agent", "chain", "llm", "llm", "other", "tool"]
    assert readings[2]["became"] == ["iteration 0"] and readings[2]["set_aside"] is None
    assert readings[3]["became"][0].startswith("merged into iteration 0") and readings[3]["set_aside"] is None
    missing = evaltrace("traces", span_recorder.directory, "--explain", "ffff")
    assert missing.returncode == 2
    assert missing.stderr.startswith("Error: no trace with id 'ffff'")
