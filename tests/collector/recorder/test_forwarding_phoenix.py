"""Local recording and OTLP forwarding side by side, against a real Phoenix server on 127.0.0.1.

Two ways a user combines evaltrace with a tracing backend (CONTRACT.md, Recording):

- `OTEL_TRACES_EXPORTER=evaltrace,otlp opentelemetry-instrument python app.py`, over OTLP/HTTP
  and over the default OTLP/gRPC;
- an app that already exports to Phoenix with its own OTLP exporter and adds
  `evaltrace.collector.record()`.

Each app is this file run as a script (see `main()` at the bottom). It prints the ids of the
GenAI-shaped trace it made: an `invoke_agent` span with a `chat` child and an `execute_tool`
child. The test then finds those same spans, with the same names, parents and attributes, both
in the Parquet files under `EVALTRACE_DIR` and in Phoenix (queried over its REST API).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _phoenix import PhoenixServer, running_phoenix, without_proxies

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import read_spans

TESTS = Path(__file__).resolve().parents[2]
INSTRUMENT = str(Path(sys.executable).parent / "opentelemetry-instrument")
APP_TIMEOUT = 120.0
EXPECTED_OPERATIONS = {
    "invoke_agent weather-agent": ("invoke_agent", None),
    "chat fake-model": ("chat", "invoke_agent weather-agent"),
    "execute_tool get_weather": ("execute_tool", "invoke_agent weather-agent"),
}
"""Span name -> (gen_ai.operation.name, parent span name) of the trace every app makes."""


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server


def app_env(runs: Path, project: str, **extra: str) -> dict[str, str]:
    """The app's environment: no inherited OTel/evaltrace settings, no proxies, spans labelled for `project`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_", "PHOENIX_"))}
    env.update(
        EVALTRACE_DIR=str(runs),
        PYTHONPATH=str(TESTS),  # the app imports this module, which imports _phoenix
        PYTHONUNBUFFERED="1",
        OTEL_SERVICE_NAME="forwarding-app",
        # Phoenix files spans under the project named by this resource attribute.
        OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}",
        OTEL_EXPORTER_OTLP_TIMEOUT="10",  # bounds the exit if Phoenix stops answering
    )
    env.update(extra)
    return without_proxies(env)


def run_app(cmd: list[str], cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run an app to completion and return the trace it reports on its last stdout line."""
    # cwd is the temp folder: opentelemetry-instrument puts the cwd first on PYTHONPATH.
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=APP_TIMEOUT)
    assert done.returncode == 0, f"app failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    for complaint in ("Failed to auto initialize", "Failed to export", "Exception while exporting"):
        assert complaint not in done.stderr, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def expected_shape(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """`span_id -> (name, parent_span_id)` of the app's trace, checked against the intended shape first."""
    spans = report["spans"]
    by_name = {s["name"]: s["span_id"] for s in spans}
    assert sorted(by_name) == sorted(EXPECTED_OPERATIONS), spans
    for span in spans:
        parent_name = EXPECTED_OPERATIONS[span["name"]][1]
        assert span["parent_span_id"] == (by_name[parent_name] if parent_name else None), spans
    return {s["span_id"]: (s["name"], s["parent_span_id"]) for s in spans}


def assert_recorded(runs: Path, report: dict[str, Any]) -> None:
    """The trace is in the Parquet files, span for span, with its GenAI attributes and resource."""
    assert sorted(runs.glob("*.parquet")), f"no Parquet file in {runs}"
    spans = [s for s in read_spans(resolve_paths([runs])) if s.trace_id == report["trace_id"]]
    assert {s.span_id: (s.name, s.parent_span_id) for s in spans} == expected_shape(report)
    for span in spans:
        assert span.attributes["gen_ai.operation.name"] == EXPECTED_OPERATIONS[span.name][0]
        assert span.attributes["app.marker"] == report["marker"]
        assert span.service_name == "forwarding-app"
    tool = next(s for s in spans if s.name == "execute_tool get_weather")
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"


def assert_forwarded(phoenix: PhoenixServer, project: str, report: dict[str, Any]) -> None:
    """The same trace reached Phoenix: same span ids, names, parents and GenAI attributes."""
    shape = expected_shape(report)
    got = phoenix.wait_for_spans(project, report["trace_id"], count=len(shape))
    seen = {s["context"]["span_id"]: (s["name"], s["parent_id"]) for s in got}
    assert seen == shape, f"Phoenix holds {seen} in project {project!r}. Phoenix log tail:\n{phoenix.log_tail()}"
    for span in got:
        attributes = span["attributes"]
        assert attributes["gen_ai.operation.name"] == EXPECTED_OPERATIONS[span["name"]][0]
        assert attributes["app.marker"] == report["marker"]
        assert span["context"]["trace_id"] == report["trace_id"]


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_instrumented_app_records_locally_and_forwards_to_phoenix(
    phoenix: PhoenixServer, tmp_path: Path, protocol: str
) -> None:
    project = f"instrumented-{protocol.replace('/', '-')}"
    endpoint = phoenix.base_url if protocol == "http/protobuf" else phoenix.grpc_endpoint
    env = app_env(
        tmp_path / "runs",
        project,
        OTEL_TRACES_EXPORTER="evaltrace,otlp",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=protocol,
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="*",  # speed: instrumentors import heavy libraries
    )
    report = run_app([INSTRUMENT, sys.executable, __file__, "instrumented"], tmp_path, env)
    assert report["provider"] == "TracerProvider"
    assert_recorded(tmp_path / "runs", report)
    assert_forwarded(phoenix, project, report)


def test_record_keeps_the_apps_own_otlp_exporter_forwarding(phoenix: PhoenixServer, tmp_path: Path) -> None:
    project = "own-exporter"
    env = app_env(tmp_path / "runs", project, APP_OTLP_TRACES_URL=f"{phoenix.base_url}/v1/traces")
    report = run_app([sys.executable, __file__, "own-exporter"], tmp_path, env)
    assert report["provider_kept"] is True
    assert report["recording_to"] == str(tmp_path / "runs")
    assert_recorded(tmp_path / "runs", report)
    assert_forwarded(phoenix, project, report)


# --- the app --------------------------------------------------------------------------------------


def make_agent_trace() -> dict[str, Any]:
    """Make one GenAI-shaped trace with the global tracer and describe it."""
    from opentelemetry import trace

    tracer = trace.get_tracer("forwarding-app")
    marker = os.urandom(6).hex()
    common = {"app.marker": marker}
    ended: list[Any] = []
    agent_attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather-agent", **common}
    with tracer.start_as_current_span("invoke_agent weather-agent", attributes=agent_attrs) as root:
        chat_attrs: dict[str, str | int] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "fake-model",
            "gen_ai.usage.input_tokens": 12,
            "gen_ai.usage.output_tokens": 5,
            **common,
        }
        with tracer.start_as_current_span("chat fake-model", attributes=chat_attrs) as chat:
            ended.append(chat)
        tool_attrs = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.id": "call_1",
            **common,
        }
        with tracer.start_as_current_span("execute_tool get_weather", attributes=tool_attrs) as tool:
            ended.append(tool)
        ended.append(root)
    spans = [
        {
            "span_id": f"{s.get_span_context().span_id:016x}",
            "name": s.name,
            "parent_span_id": f"{s.parent.span_id:016x}" if s.parent else None,
        }
        for s in ended
    ]
    return {"trace_id": f"{root.get_span_context().trace_id:032x}", "spans": spans, "marker": marker}


def own_exporter_app() -> dict[str, Any]:
    """An app that set up its own OTLP/HTTP export to Phoenix, then adds evaltrace with `record()`."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from evaltrace.collector import record

    provider = TracerProvider()  # resource from OTEL_SERVICE_NAME / OTEL_RESOURCE_ATTRIBUTES
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=os.environ["APP_OTLP_TRACES_URL"])))
    trace.set_tracer_provider(provider)
    recorder = record()
    report = make_agent_trace()
    report["provider_kept"] = trace.get_tracer_provider() is provider
    report["recording_to"] = str(recorder.directory)
    return report  # both processors are flushed by the provider's atexit shutdown


def main() -> None:
    """Run the app named by argv[1] and print its report as the last stdout line."""
    from opentelemetry import trace

    mode = sys.argv[1]
    if mode == "instrumented":  # whatever opentelemetry-instrument configured
        report = make_agent_trace()
        report["provider"] = type(trace.get_tracer_provider()).__name__
    elif mode == "own-exporter":
        report = own_exporter_app()
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    sys.stdout.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()


def test_readme_phoenix_example_records_and_forwards_as_written(phoenix: PhoenixServer, tmp_path: Path) -> None:
    # The README's Phoenix command, run by bash as written, on the README's openai recipe app.
    from fake_llm import FakeLLM, call, text_turn, tool_turn
    from readme_blocks import bash_block, recipes, run_lines, user_env

    (tmp_path / "app.py").write_text(recipes()["openai"].app, encoding="utf-8")
    project = "readme-phoenix"
    resource = f"openinference.project.name={project}"
    with FakeLLM([tool_turn(call("get_weather", {"city": "Paris"})), text_turn("18C in Paris.")]) as llm:
        env = user_env(llm, PHOENIX_URL=phoenix.base_url, OTEL_RESOURCE_ATTRIBUTES=resource)
        (done,) = run_lines([bash_block("# Phoenix:")], tmp_path, env)
    assert done.stdout.strip() == "18C in Paris."
    for complaint in ("Failed to export", "Exception while exporting"):
        assert complaint not in done.stderr, done.stderr
    local = list(read_spans(resolve_paths([tmp_path / "runs"])))
    (trace_id,) = {s.trace_id for s in local}
    got = phoenix.wait_for_spans(project, trace_id, count=len(local))
    assert {s["context"]["span_id"] for s in got} == {s.span_id for s in local}
    assert {s["name"] for s in got} >= {"invoke_agent weather-agent", "chat gpt-4o-mini"}
