"""`evaltrace doctor PATH` never calls a recording fine when its rebuilt traces would mislead scoring.

Each recording is made with the real OTel SDK and written by evaltrace's own exporter, by a real
`evaltrace collect` from the SDK's OTLP exporter, or by the official OTLP JSON file exporter (read
through evaltrace's import); `doctor` runs as a CLI subprocess. The cases: two tool spans under
one call id, one model call described by two sibling spans, a reply that stopped for tool use
with no call recorded, a run whose root span never ended (in a Python process, sent by another
language's app, and in an OTLP file), and a run recorded with content capture off. Each must
exit 2 with a `problem` naming its cause, an example trace and a fix that fits where the spans
came from.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cli_process import evaltrace
from opentelemetry.exporter.otlp.json.file import FileSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, Tracer, set_span_in_context

from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.redact import RedactionSettings
from tests.collector.otlp._receive_process import running_collector

Check = dict[str, Any]
QUESTION = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}])
ANSWER = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "18C and sunny."}]}])
CALL = json.dumps(
    [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"c": "P"}}]}]
)
RECORDING_CHECKS = (
    *("traces", "events", "content", "arguments", "fragments"),
    *("roots", "call-ids", "model-calls", "tool-stops", "losses"),
)


def _chat(finish: str, output: str, tokens: tuple[int, int] = (20, 5)) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
        "gen_ai.response.finish_reasons": [finish],
        "gen_ai.input.messages": QUESTION,
        "gen_ai.output.messages": output,
    }


def _tool(result: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "weather",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.call.arguments": '{"c": "P"}',
        "gen_ai.tool.call.result": result,
    }


_AGENT = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "weather",
    "gen_ai.input.messages": QUESTION,
    "gen_ai.output.messages": ANSWER,
}


@contextmanager
def _provider(exporter: SpanExporter, language: str | None = None) -> Iterator[Tracer]:
    attributes = {"service.name": "weather-agent"}
    if language is not None:  # what another language's SDK puts on its resource, as `collect` writes it
        attributes["telemetry.sdk.language"] = language
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("weather-app")
    provider.shutdown()


def _record(folder: Path, body: Callable[[Tracer], str], *, language: str | None = None, **settings: Any) -> str:
    exporter = ParquetSpanExporter(folder, run_id="weather", redaction=RedactionSettings(**settings))
    with _provider(exporter, language) as tracer:
        return body(tracer)


def _trace_id(span: Span) -> str:
    return f"{span.get_span_context().trace_id:032x}"


def _repeated_call_id(tracer: Tracer) -> str:
    with tracer.start_as_current_span("invoke_agent weather", attributes=_AGENT) as root:
        with tracer.start_as_current_span("chat gpt-4o", attributes=_chat("tool_calls", CALL)):
            pass
        for result in ("18C", "19C"):  # two tool runs recorded under the one call id the model gave
            with tracer.start_as_current_span("execute_tool weather", attributes=_tool(result)):
                pass
        with tracer.start_as_current_span("chat gpt-4o", attributes=_chat("stop", ANSWER, (40, 6))):
            pass
    return _trace_id(root)


def _model_call_twice(tracer: Tracer) -> str:
    with tracer.start_as_current_span("invoke_agent weather", attributes=_AGENT) as root:
        # Two instrumentations of one client describe the same request beside each other.
        context = set_span_in_context(root)
        first = tracer.start_span("chat gpt-4o", context=context, attributes=_chat("stop", ANSWER))
        second = tracer.start_span("ChatCompletion", context=context, attributes=_chat("stop", ANSWER))
        second.end()
        first.end()
    return _trace_id(root)


def _model_call_twice_same_response(tracer: Tracer) -> str:
    with tracer.start_as_current_span("invoke_agent weather", attributes=_AGENT) as root:
        # The same two spans, but both name the provider's response: the converter reads them as one call.
        context, chat = set_span_in_context(root), {**_chat("stop", ANSWER), "gen_ai.response.id": "resp-1"}
        first = tracer.start_span("chat gpt-4o", context=context, attributes=chat)
        second = tracer.start_span("ChatCompletion", context=context, attributes=chat)
        second.end()
        first.end()
    return _trace_id(root)


def _tool_stop_without_call(tracer: Tracer) -> str:
    with tracer.start_as_current_span("invoke_agent weather", attributes=_AGENT) as root:
        with tracer.start_as_current_span("chat gpt-4o", attributes=_chat("tool_use", ANSWER)):
            pass
    return _trace_id(root)


def _root_never_ended(tracer: Tracer) -> str:
    root = tracer.start_span("invoke_agent weather", attributes=_AGENT)  # never ended: never exported
    with tracer.start_as_current_span(
        "chat gpt-4o", context=set_span_in_context(root), attributes=_chat("stop", ANSWER)
    ):
        pass
    return _trace_id(root)


def _tool_loop(tracer: Tracer) -> str:
    with tracer.start_as_current_span("invoke_agent weather", attributes=_AGENT) as root:
        with tracer.start_as_current_span("chat gpt-4o", attributes=_chat("tool_calls", CALL)):
            pass
        with tracer.start_as_current_span("execute_tool weather", attributes=_tool("18C")):
            pass
        with tracer.start_as_current_span("chat gpt-4o", attributes=_chat("stop", ANSWER, (40, 6))):
            pass
    return _trace_id(root)


def _final_answer_tool(tracer: Tracer) -> str:
    # smolagents ends a run by the model calling `final_answer`: that call becomes the run's answer.
    final = {"type": "tool_call", "id": "f1", "name": "final_answer", "arguments": {"answer": "18C"}}
    reply = json.dumps([{"role": "assistant", "parts": [final]}])
    agent = {k: v for k, v in _AGENT.items() if k != "gen_ai.output.messages"}
    with tracer.start_as_current_span("invoke_agent weather", attributes=agent) as root:
        with tracer.start_as_current_span("chat gpt-4o", attributes=_chat("tool_calls", reply)):
            pass
    return _trace_id(root)


def _doctor(path: Path, cwd: Path) -> tuple[int, dict[str, Check]]:
    env = {"OTEL_TRACES_EXPORTER": "evaltrace", "EVALTRACE_CACHE_DIR": str(cwd / "cache")}
    done = evaltrace("doctor", "--json", path, cwd=cwd, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    checks = {c["name"].removeprefix("recording/"): c for c in json.loads(done.stdout)["checks"]}
    return done.returncode, checks


def _problems(checks: dict[str, Check]) -> set[str]:
    return {name for name in RECORDING_CHECKS if checks[name]["status"] == "problem"}


@pytest.mark.parametrize("run", [_tool_loop, _final_answer_tool])
def test_a_complete_run_passes_every_recording_check(tmp_path: Path, run: Callable[[Tracer], str]) -> None:
    _record(tmp_path / "runs", run)
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert {checks[name]["status"] for name in RECORDING_CHECKS} == {"ok"}, checks
    assert code == 0


def test_two_tool_calls_under_one_call_id_are_a_problem(tmp_path: Path) -> None:
    trace_id = _record(tmp_path / "runs", _repeated_call_id)
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert code == 2 and _problems(checks) == {"call-ids"}
    found = checks["call-ids"]
    assert "1 of 1 trace hold two tool calls with one call id" in found["message"]
    assert f"e.g. trace {trace_id}" in found["message"]
    assert f"evaltrace traces {tmp_path / 'runs'} --explain {trace_id}" in found["fix"]
    assert "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS" in found["fix"]


def test_one_model_call_described_twice_is_a_problem(tmp_path: Path) -> None:
    trace_id = _record(tmp_path / "runs", _model_call_twice)
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert code == 2 and _problems(checks) == {"model-calls"}
    found = checks["model-calls"]
    assert f"count one model call twice (e.g. trace {trace_id})" in found["message"]
    assert "iterations and tokens are doubled" in found["message"]
    assert f"--explain {trace_id}" in found["fix"]


def test_a_model_call_the_converter_read_once_is_ok_and_points_to_explain(tmp_path: Path) -> None:
    trace_id = _record(tmp_path / "runs", _model_call_twice_same_response)
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert code == 0 and checks["model-calls"]["status"] == "ok"
    message = checks["model-calls"]["message"]
    assert "model calls described twice were read once in 1 trace" in message
    assert f"evaltrace traces {tmp_path / 'runs'} --explain {trace_id}" in message


def test_a_tool_use_stop_with_no_call_recorded_is_a_problem(tmp_path: Path) -> None:
    trace_id = _record(tmp_path / "runs", _tool_stop_without_call)
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert code == 2 and _problems(checks) == {"tool-stops"}
    found = checks["tool-stops"]
    assert f"no tool call rebuilt for it (e.g. trace {trace_id})" in found["message"]
    assert "evaltrace.collector.tool_call" in found["fix"]


def test_a_python_run_whose_root_span_never_ended_is_a_problem(tmp_path: Path) -> None:
    trace_id = _record(tmp_path / "runs", _root_never_ended)
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert code == 2 and _problems(checks) == {"roots"}
    found = checks["roots"]
    assert f"1 of 1 trace have spans whose parent was never recorded (e.g. trace {trace_id})" in found["message"]
    assert found["fix"].startswith("end the run's root span before the process exits")
    assert "shutdown()" in found["fix"]
    assert checks["fragments"]["status"] == "ok"  # a lone model call, but under a root that never arrived


def test_a_sender_cut_off_before_its_root_span_is_named_as_such_not_as_a_python_fix(tmp_path: Path) -> None:
    trace_id = _record(tmp_path / "runs", _root_never_ended, language="nodejs")
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert code == 2 and _problems(checks) == {"roots"}
    fix = checks["roots"]["fix"]
    assert fix.startswith("the nodejs app's root span never reached `evaltrace collect`: shut its tracer provider")
    assert f"--explain {trace_id}" in fix
    problems = [c for c in checks.values() if c["status"] == "problem"]
    assert not any("agent_run" in c["fix"] or "EVALTRACE_" in c["fix"] for c in problems), problems


def test_a_sender_cut_off_through_a_real_collect_is_named_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy"):  # the OTLP exporter's requests session must not take a proxy
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    with running_collector(tmp_path / "received") as collector:
        sender = OTLPSpanExporter(endpoint=f"{collector.http_url}/v1/traces", timeout=10)
        with _provider(sender, language="nodejs") as tracer:
            trace_id = _root_never_ended(tracer)
        assert collector.stop() == 0, collector.err
    code, checks = _doctor(tmp_path / "received", tmp_path)
    assert code == 2 and _problems(checks) == {"roots"}
    assert f"e.g. trace {trace_id}" in checks["roots"]["message"]
    assert checks["roots"]["fix"].startswith("the nodejs app's root span never reached `evaltrace collect`")


def test_an_otlp_file_cut_before_the_root_span_is_named_as_cut(tmp_path: Path) -> None:
    otlp = tmp_path / "export.jsonl"
    with _provider(FileSpanExporter(str(otlp))) as tracer:
        trace_id = _root_never_ended(tracer)
    code, checks = _doctor(otlp, tmp_path)
    assert code == 2 and _problems(checks) == {"roots"}
    assert checks["roots"]["fix"].startswith("export.jsonl was cut before these runs ended")
    assert f"e.g. trace {trace_id}" in checks["roots"]["message"]


def test_a_recording_with_content_capture_off_is_a_problem(tmp_path: Path) -> None:
    trace_id = _record(tmp_path / "runs", _tool_loop, capture_content=False)
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert code == 2 and _problems(checks) == {"content"}
    found = checks["content"]
    assert "1 of 1 trace with model calls have no input, no answer and no message text" in found["message"]
    assert f"e.g. trace {trace_id}" in found["message"]
    assert "EVALTRACE_CAPTURE_CONTENT" in found["fix"]
    # Every framework switch evaltrace's distro turns on is named (the Anthropic SDK's spans need its own).
    assert "ENABLE_SENSITIVE_DATA" in found["fix"]
    assert "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content" in found["fix"]
    assert checks["tool-stops"]["status"] == "ok"  # the reply's call ids and names are kept without content


def test_content_off_in_another_languages_app_names_its_own_switch(tmp_path: Path) -> None:
    _record(tmp_path / "runs", _tool_loop, language="go", capture_content=False)
    code, checks = _doctor(tmp_path / "runs", tmp_path)
    assert code == 2 and _problems(checks) == {"content"}
    fix = checks["content"]["fix"]
    assert fix.startswith("turn message content capture on in the go app's GenAI instrumentation")
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true" in fix and "EVALTRACE_" not in fix
