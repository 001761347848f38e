"""Log records (GenAI events) through the real SDK, `ParquetLogExporter`, the reader and the converter.

The events are built by opentelemetry-instrumentation-openai-v2's own builders for its v1.30
conventions (`message_to_event`, `choice_to_event`: one record per message, content in the
body) and emitted inside real SDK spans, as the instrumentation does on that path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from openai.types.chat import ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message_function_tool_call import ChatCompletionMessageFunctionToolCall
from opentelemetry._logs import LogRecord
from opentelemetry.instrumentation.openai_v2.utils import choice_to_event, message_to_event
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.collector import agent_run, resolve_paths
from evaltrace.collector.recorder.exporter import ExporterSettings, ParquetSpanExporter
from evaltrace.collector.recorder.log_exporter import EvaltraceLogRecordProcessor, ParquetLogExporter
from evaltrace.collector.recorder.redact import RedactionSettings
from evaltrace.collector.runfiles.compact import compact_folder
from evaltrace.collector.runfiles.reader import LogAttachment, Shard, iter_traces, split_signals, summarize_runs
from evaltrace.collector.traces.rebuild import read_traces

SECRET = "sk-THISISASECRETKEY1234567890"
QUESTION = f"Weather in Paris? my key is {SECRET}"


class Recording:
    """A tracer provider and a logger provider writing through evaltrace's exporters into `folder`."""

    def __init__(self, folder: Path, redaction: RedactionSettings | None = None, run_id: str = "r1") -> None:
        settings = ExporterSettings(directory=folder, run_id=run_id, redaction=redaction or RedactionSettings())
        self.spans = ParquetSpanExporter(settings=settings)
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.logs = ParquetLogExporter(settings=settings)
        self.logger_provider = LoggerProvider()
        self.logger_provider.add_log_record_processor(EvaltraceLogRecordProcessor(self.logs))
        self.tracer = self.tracer_provider.get_tracer("test")
        self.logger = self.logger_provider.get_logger("opentelemetry.instrumentation.openai_v2")

    def flush(self, *, spans: bool = True) -> None:
        if spans:
            self.spans.force_flush()
        self.logger_provider.force_flush()

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()


def _choice(content: str | None, calls: list[tuple[str, str, str]] | None = None) -> Choice:
    tool_calls = [
        ChatCompletionMessageFunctionToolCall(id=cid, type="function", function={"name": name, "arguments": args})
        for cid, name, args in calls or []
    ]
    message = ChatCompletionMessage(role="assistant", content=content, tool_calls=tool_calls or None)
    return Choice(index=0, finish_reason="tool_calls" if calls else "stop", message=message)


def _chat(rec: Recording, messages: list[dict[str, Any]], choice: Choice, tokens: tuple[int, int]) -> None:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.usage.input_tokens": tokens[0],
        "gen_ai.usage.output_tokens": tokens[1],
    }
    with rec.tracer.start_as_current_span("chat gpt-4o-mini", attributes=attributes):
        for message in messages:
            rec.logger.emit(message_to_event(message, True))
        rec.logger.emit(choice_to_event(choice, True))


def tool_loop(rec: Recording, case_id: str = "paris") -> None:
    """One agent run in the v1.30 event shape: a tool call, then the answer."""
    call = ("call_1", "get_weather", '{"city": "Paris"}')
    with agent_run("weather", input=QUESTION, case_id=case_id, tracer_provider=rec.tracer_provider) as run:
        user = {"role": "user", "content": QUESTION}
        _chat(rec, [user], _choice(None, [call]), (100, 10))
        assistant = {
            "role": "assistant",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": call[1], "arguments": call[2]}}],
        }
        tool = {"role": "tool", "tool_call_id": "call_1", "content": "18C in Paris"}
        _chat(rec, [user, assistant, tool], _choice("It is 18C in Paris."), (200, 20))
        run.output = "It is 18C in Paris."


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[Path]:
    rec = Recording(tmp_path)
    tool_loop(rec)
    rec.flush()
    rec.close()
    yield tmp_path


def test_log_files_are_named_marked_and_complete(recorded: Path) -> None:
    logs = sorted(recorded.glob("*.logs.parquet"))
    assert len(logs) == 1 and not list(recorded.glob(".inflight-*"))
    meta = pq.read_metadata(logs[0]).metadata
    assert meta[b"evaltrace.signal"] == b"logs" and meta[b"evaltrace.schema_version"] == b"1"
    rows = pq.read_table(logs[0], columns=["event_name", "trace_id", "span_id", "log_id", "run_id"]).to_pylist()
    assert [r["event_name"] for r in rows] == [
        "gen_ai.user.message",
        "gen_ai.choice",
        "gen_ai.user.message",
        "gen_ai.assistant.message",
        "gen_ai.tool.message",
        "gen_ai.choice",
    ]
    assert all(len(r["trace_id"]) == 32 and len(r["span_id"]) == 16 and r["run_id"] == "r1" for r in rows)
    assert len({r["log_id"] for r in rows}) == 6
    # Recognised by content, not by name: renamed like a span file, it is still read as logs.
    renamed = logs[0].with_name("renamed.parquet")
    logs[0].rename(renamed)
    span_files, log_files = split_signals(sorted(recorded.glob("*.parquet")))
    assert log_files == [renamed] and renamed not in span_files
    assert _rebuilt(recorded).output == "It is 18C in Paris."


def _rebuilt(folder: Path) -> Any:
    (trace,) = read_traces(resolve_paths([folder]))
    return trace


def test_v1_30_events_rebuild_the_whole_run(recorded: Path) -> None:
    trace = _rebuilt(recorded)
    assert trace.input == QUESTION and trace.output == "It is 18C in Paris."
    assert trace.case_id == "paris" and trace.agent_name == "weather"
    assert [(c.call_id, c.name, c.arguments, c.result) for c in trace.tool_calls] == [
        ("call_1", "get_weather", {"city": "Paris"}, "18C in Paris")
    ]
    assert (trace.usage.input_tokens, trace.usage.output_tokens) == (300, 30)
    assert [len(it.input_messages or []) for it in trace.iterations] == [1, 3]


def test_capture_off_and_masks_apply_to_bodies_and_attributes(tmp_path: Path) -> None:
    rec = Recording(tmp_path, RedactionSettings(capture_content=False, mask_defaults=True))
    tool_loop(rec)
    with rec.tracer.start_as_current_span("plain"):
        rec.logger.emit(LogRecord(body=f"free text {SECRET}", attributes={"note": f"token {SECRET}"}))
    rec.flush()
    rec.close()
    for path in tmp_path.glob("*.parquet"):
        data = _plain_bytes(path)
        assert SECRET.encode() not in data and b"Paris" not in data, path.name
    (log_file,) = tmp_path.glob("*.logs.parquet")
    text = _plain_bytes(log_file)
    assert b"[REDACTED]" in text  # the attribute was masked, not dropped
    trace = next(t for t in read_traces(resolve_paths([tmp_path])) if t.agent_name == "weather")
    assert trace.input is None and trace.output is None
    assert [(c.call_id, c.name, c.arguments) for c in trace.tool_calls] == [("call_1", "get_weather", None)]


def _plain_bytes(path: Path) -> bytes:
    plain = path.with_name(".plain-" + path.name + ".tmp")
    pq.write_table(pq.read_table(path), plain, compression="none", use_dictionary=False)
    try:
        return plain.read_bytes()
    finally:
        plain.unlink()


def test_records_whose_span_is_missing_are_counted_and_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    rec = Recording(tmp_path)
    tool_loop(rec, case_id="kept")
    rec.flush()
    tool_loop(rec, case_id="lost")  # its spans are never written (flushed logs only)
    rec.logger.emit(LogRecord(event_name="app.started", body={"ok": True}))  # outside any span
    rec.flush(spans=False)
    rec.spans.shutdown = lambda: None  # type: ignore[method-assign]  # the process "dies" before writing spans
    rec.close()
    stats = LogAttachment()
    with caplog.at_level(logging.WARNING, logger="evaltrace"):
        traces = list(iter_traces(resolve_paths([tmp_path]), logs=stats))
    assert len(traces) == 1
    assert (stats.attached, stats.unattached, stats.without_trace) == (6, 6, 1)
    assert stats.unattached_events == {"gen_ai.user.message": 2, "gen_ai.choice": 2, **_assistant_and_tool()}
    assert "6 log record(s) name spans that are not in these files" in caplog.text
    summary = summarize_runs(resolve_paths([tmp_path]))
    assert (summary.log_records, summary.unattached_log_records, summary.log_records_without_trace) == (13, 6, 1)
    assert summary.log_events["app.started"] == 1 and summary.trace_list[0].log_records == 6


def _assistant_and_tool() -> dict[str, int]:
    return {"gen_ai.assistant.message": 1, "gen_ai.tool.message": 1}


def test_compact_merges_log_files_apart_from_span_files(tmp_path: Path) -> None:
    rec = Recording(tmp_path)
    for case in ("a", "b", "c"):
        tool_loop(rec, case_id=case)
        rec.flush()
    rec.close()
    before = _by_case(tmp_path)
    assert len(list(tmp_path.glob("*.logs.parquet"))) == 3 and len(list(tmp_path.glob("*.parquet"))) == 6
    done = compact_folder(tmp_path)
    assert len(done.merged) == 2 and done.files_after == 2
    span_files, log_files = split_signals(sorted(tmp_path.glob("*.parquet")))
    assert len(span_files) == 1 and len(log_files) == 1 and log_files[0].name.endswith(".logs.parquet")
    assert pq.read_metadata(log_files[0]).num_rows == 18 and pq.read_metadata(span_files[0]).num_rows == 9
    assert _by_case(tmp_path) == before


def _by_case(folder: Path) -> dict[str | None, Any]:
    return {
        t.case_id: (t.input, t.output, [(c.name, c.arguments, c.result) for c in t.tool_calls])
        for t in read_traces(resolve_paths([folder]))
    }


def test_shards_read_the_same_events_as_a_full_read(tmp_path: Path) -> None:
    rec = Recording(tmp_path)
    for index in range(12):
        tool_loop(rec, case_id=f"c{index}")
        if index % 4 == 3:
            rec.flush()
    rec.close()
    full = {spans[0].trace_id: _events(spans) for spans in iter_traces(resolve_paths([tmp_path]))}
    sharded: dict[str, Any] = {}
    for index in range(3):
        for spans in iter_traces(resolve_paths([tmp_path]), Shard(index, 3)):
            assert spans[0].trace_id not in sharded
            sharded[spans[0].trace_id] = _events(spans)
    assert sharded == full and len(full) == 12
    assert all(sum(len(events) for _, events in spans) == 6 for spans in full.values())


def _events(spans: list[Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    return [(s.span_id, [(e.name, e.attributes) for e in s.events]) for s in spans]
