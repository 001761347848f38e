"""Redaction: removes what it should and nothing else, before anything is written."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from evaltrace.collector.recorder.exporter import ParquetSpanExporter
from evaltrace.collector.recorder.redact import MASK, RedactionSettings, Redactor
from evaltrace.collector.runfiles.jsonvalue import loads_attributes

MESSAGES = json.dumps(
    [
        {"role": "user", "parts": [{"type": "text", "content": "my secret question"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": {"city": "Paris"}}],
            "finish_reason": "tool_call",
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": "18C"}]},
    ]
)


def _record(tmp_path: Path, settings: RedactionSettings, attrs: dict[str, Any], events: bool = False) -> dict[str, Any]:
    exporter = ParquetSpanExporter(tmp_path, redaction=settings)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("t").start_as_current_span("s", attributes=attrs) as span:
        if events:
            span.add_event("gen_ai.user.message", {"content": "event text", "gen_ai.system": "openai"})
            choice = {"role": "assistant", "content": "answer", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}
            span.add_event("gen_ai.choice", {"message": json.dumps(choice), "index": 0})
    exporter.shutdown()
    (path,) = tmp_path.glob("*.parquet")
    row = pq.read_table(path).drop_columns(["start_time", "end_time", "events"]).to_pylist()[0]
    merged = loads_attributes(row["attributes"]) | dict(row["large_attributes"] or [])
    ev = pq.read_table(path, columns=["events"]).column("events").combine_chunks().flatten()
    return {"row": row, "attrs": merged, "events": [loads_attributes(a) for a in ev.field("attributes").to_pylist()]}


def test_drop_keys_by_glob_only_matching(tmp_path: Path) -> None:
    attrs = {"http.request.header.authorization": "x", "http.request.header.accept": "y", "http.method": "GET"}
    out = _record(tmp_path, RedactionSettings(drop_keys=("http.request.header.*",)), attrs)
    assert out["attrs"] == {"http.method": "GET"}


def test_default_patterns_mask_secrets_and_emails_only(tmp_path: Path) -> None:
    attrs = {
        "a": "key sk-proj-ABCDEFGHIJKLMNOP1234 end",
        "b": "Authorization: Bearer abc.def-123456",
        "c": "AKIAABCDEFGHIJKLMNOP",
        "d": ("mail bob@example.com", "no secret"),
        "e": "sk-short stays",
        "n": 5,
        "gen_ai.input.messages": '[{"role":"user","parts":[{"type":"text","content":"reach me at a.b@c.io"}]}]',
    }
    out = _record(tmp_path, RedactionSettings(mask_defaults=True), attrs)["attrs"]
    assert out["a"] == f"key {MASK} end"
    assert out["b"] == f"Authorization: {MASK}"
    assert out["c"] == MASK
    assert out["d"] == [f"mail {MASK}", "no secret"]
    assert out["e"] == "sk-short stays" and out["n"] == 5
    assert json.loads(out["gen_ai.input.messages"])[0]["parts"][0]["content"] == f"reach me at {MASK}"


def test_custom_pattern_applies_to_events_too(tmp_path: Path) -> None:
    out = _record(tmp_path, RedactionSettings(mask_patterns=(r"event\s+\w+",)), {"x": "event text"}, events=True)
    assert out["attrs"]["x"] == MASK
    assert out["events"][0]["content"] == MASK and out["events"][0]["gen_ai.system"] == "openai"


def test_no_content_keeps_structure_and_drops_text(tmp_path: Path) -> None:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": '{"city": "Paris"}',
        "gen_ai.tool.call.result": "18C",
        "gen_ai.system_instructions": "be nice",
        "gen_ai.input.messages": MESSAGES,
        "input.value": "question",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "question",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": "{}",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "question",
    }
    out = _record(tmp_path, RedactionSettings(capture_content=False), attrs, events=True)
    kept = out["attrs"]
    assert set(kept) == {
        "gen_ai.operation.name",
        "gen_ai.usage.input_tokens",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "gen_ai.input.messages",
        "llm.input_messages.0.message.role",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
        "gen_ai.prompt.0.role",
    }
    messages = json.loads(kept["gen_ai.input.messages"])
    assert messages == [
        {"role": "user", "parts": [{"type": "text"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather"}],
            "finish_reason": "tool_call",
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1"}]},
    ]
    user_event, choice_event = out["events"]
    assert user_event == {"gen_ai.system": "openai"}  # absent, not ""
    assert json.loads(choice_event["message"]) == {
        "role": "assistant",
        "tool_calls": [{"id": "c", "function": {"name": "f"}}],
    }
    assert out["row"]["gen_ai_tool_call_id"] == "call_1" and out["row"]["gen_ai_usage_input_tokens"] == 10


def test_nothing_changes_without_settings(tmp_path: Path) -> None:
    attrs = {"a": "sk-proj-ABCDEFGHIJKLMNOP1234", "input.value": "q", "b": "me@example.com"}
    assert _record(tmp_path, RedactionSettings(), attrs)["attrs"] == attrs


def test_invalid_regex_in_code_raises() -> None:
    with pytest.raises(ValueError, match="invalid mask pattern"):
        RedactionSettings(mask_patterns=("(unclosed",))


def test_env_settings_and_invalid_env_regex_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("EVALTRACE_REDACT_KEYS", "secret.*, token")
    monkeypatch.setenv("EVALTRACE_REDACT_PATTERNS", "good\\d+\n(bad")
    monkeypatch.setenv("EVALTRACE_REDACT_DEFAULTS", "1")
    monkeypatch.setenv("EVALTRACE_CAPTURE_CONTENT", "0")
    with caplog.at_level(logging.ERROR, logger="evaltrace"):
        settings = RedactionSettings.from_env()
    assert settings.drop_keys == ("secret.*", "token")
    assert settings.mask_patterns == ("good\\d+",)
    assert settings.mask_defaults and not settings.capture_content
    assert any("EVALTRACE_REDACT_PATTERNS" in r.getMessage() and "(bad" in r.getMessage() for r in caplog.records)
    redactor = Redactor(settings)
    assert redactor.apply({"secret.x": 1, "token": 2, "k": "good123 x"}) == {"k": f"{MASK} x"}
    monkeypatch.setenv("EVALTRACE_REDACT_PATTERNS", '["a,b{2,}", "c"]')
    assert RedactionSettings.from_env().mask_patterns == ("a,b{2,}", "c")
