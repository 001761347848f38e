"""The flat GenAI row builder (`_flat_columns.flat_row`) against the converter.

Wherever it builds, the row must be the converter's, row for row in the traces table; it must
actually build the common shape, else it saves nothing. A table built from span files holds the
converter's rows in `read_traces`' order. Checked over runs recorded with real instrumentation (the
openai-v2 instrumentation's app in both content modes, the repository's sample run, the golden
scenarios made with the real SDK) and over generated flat traces with and without the variations
the builder must leave to the converter.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from flat_agreement import flat_agrees
from genai_scenarios import old_events_no_agent, parallel_nested, sequential, unfinished_parent
from genai_spans import Recorder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaltrace.collector import resolve_paths
from evaltrace.collector.runfiles.reader import iter_traces
from evaltrace.collector.runfiles.spans import Span, SpanEvent
from evaltrace.collector.traces.rebuild import convert_trace, read_traces, table_batches_of
from evaltrace.collector.traces.table import to_table

ROOT = Path(__file__).resolve().parents[3]
APP = Path(__file__).with_name("genai_openai_v2_app.py")


def flat_share(folder: Path) -> tuple[int, int]:
    """(traces the builder made rows of, traces) of the span files in `folder`, each checked against the converter."""
    groups = list(iter_traces(resolve_paths([folder])))
    return sum(flat_agrees(spans) for spans in groups), len(groups)


@pytest.mark.parametrize("mode", ["default", "latest"])
def test_openai_v2_instrumented_runs(mode: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "EVALTRACE_", "APP_"))}
    if mode == "default":
        env["APP_ROOT_CONTENT"] = "1"
    else:
        env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    done = subprocess.run(
        [sys.executable, str(APP), str(tmp_path)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    built, total = flat_share(tmp_path)
    # The app's runs with tool spans take the builder (4 and 6 of 10 when written); the others
    # (calls known from the model's messages alone) are left to the converter.
    assert 0 < built < total


def test_the_sample_run() -> None:
    built, total = flat_share(ROOT / "samples" / "runs")
    assert 0 < built <= total


@pytest.mark.parametrize("case", [sequential, parallel_nested, old_events_no_agent, unfinished_parent])
def test_golden_scenarios(case: Any, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    case(rec)
    rec.close()
    built, total = flat_share(tmp_path)
    assert total > 0 and built <= total


def test_a_table_built_from_spans_is_the_converters_table(tmp_path: Path) -> None:
    """Flat rows and converted traces' rows (nested agents among them) merge in `read_traces`' order."""
    rec = Recorder(tmp_path)
    for case in (sequential, parallel_nested, old_events_no_agent, unfinished_parent):
        case(rec)
    rec.close()
    files = resolve_paths([tmp_path, ROOT / "samples" / "runs"])
    built, total = sum(flat_share(folder)[0] for folder in (tmp_path, ROOT / "samples" / "runs")), 0
    batches = list(table_batches_of(iter_traces(files), histories=False, rows=3))
    reference = to_table(read_traces(files, histories=False))
    total = reference.num_rows
    assert 0 < built < total and len(batches) > 1
    assert [row for batch in batches for row in batch.to_pylist()] == reference.to_pylist()


# --- generated flat traces ---------------------------------------------------------------------

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
VARIATIONS = (
    "none",
    "exception event",
    "openinference kind",
    "nested chat",
    "missing tool span",
    "unrequested tool span",
    "duplicate call id",
    "shared response id",
    "answer tool",
    "result only by name",
    "redacted arguments",
    "no root input",
    "case id as number",
    "tool named by a number",
)
"""Ways a trace leaves the flat shape's rules; "none" and the failed or result-less calls below keep it."""


def _span(span_id: int, parent: int | None, name: str, start: int, attrs: dict[str, Any], **kw: Any) -> Span:
    return Span(
        trace_id=TRACE_ID,
        span_id=f"{span_id:016x}",
        parent_span_id=None if parent is None else f"{parent:016x}",
        name=name,
        kind="INTERNAL",
        status_code=kw.pop("status", "UNSET"),
        status_message=kw.pop("message", None),
        start_time_ns=1_767_225_600_000_000_000 + start * 1_000_000,
        end_time_ns=1_767_225_600_000_000_000 + (start + kw.pop("length", 1)) * 1_000_000,
        attributes=attrs,
        run_id="run",
        service_name="svc",
        scope_name=kw.pop("scope", "opentelemetry.instrumentation.openai_v2"),
        **kw,
    )


def _messages(*items: tuple[str, list[dict[str, Any]]]) -> str:
    return json.dumps([{"role": role, "parts": parts} for role, parts in items])


@st.composite
def flat_traces(draw: st.DrawFn) -> tuple[list[Span], str]:
    """A flat GenAI trace's spans (in any order) and the variation drawn."""
    variation = draw(st.sampled_from(VARIATIONS))
    calls_per_turn = draw(st.lists(st.integers(0, 3), min_size=0, max_size=3)) + [0]
    prompt = [("user", [{"type": "text", "content": draw(st.sampled_from(["Paris?", "  hi ", "été"]))}])]
    spans: list[Span] = []
    history: list[tuple[str, list[dict[str, Any]]]] = list(prompt)
    clock, ids = 1, 2
    for turn, count in enumerate(calls_per_turn):
        calls = [
            {"type": "tool_call", "id": f"call_{turn}_{k}", "name": draw(st.sampled_from(["weather", "flights"])),
             "arguments": {"city": draw(st.sampled_from(["Paris", "Lima"]))}}
            for k in range(count)
        ]  # fmt: skip
        reply = calls or [{"type": "text", "content": draw(st.sampled_from(["Sunny.", "Sunny.\n"]))}]
        chat = {
            "gen_ai.operation.name": draw(st.sampled_from(["chat", "generate_content", "text_completion"])),
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.id": f"resp-{turn}",
            "gen_ai.usage.input_tokens": draw(st.integers(0, 900)),
            "gen_ai.usage.output_tokens": draw(st.integers(0, 90)),
            "gen_ai.response.finish_reasons": ["tool_calls" if calls else "stop"],
            "gen_ai.input.messages": _messages(*history),
            "gen_ai.output.messages": _messages(("assistant", reply)),
        }
        spans.append(_span(ids, 1, "chat gpt-4o", clock, chat, length=2))
        ids, clock = ids + 1, clock + 3
        history.append(("assistant", reply))
        for call in calls:
            failed = draw(st.booleans())
            result = {"error": "TimeoutError"} if failed else {"temp": draw(st.integers(-5, 30))}
            attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call["name"],
                "gen_ai.tool.call.id": call["id"],
                "gen_ai.tool.call.arguments": json.dumps(call["arguments"]),
            }
            if not failed or draw(st.booleans()):
                attrs["gen_ai.tool.call.result"] = json.dumps(result)
            extra = {"status": "ERROR", "message": "TimeoutError"} if failed else {}
            spans.append(_span(ids, 1, f"execute_tool {call['name']}", clock, attrs, **extra))
            ids, clock = ids + 1, clock + 2
            history.append(("tool", [{"type": "tool_call_response", "id": call["id"], "response": result}]))
    root = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "planner",
        "gen_ai.input.messages": _messages(*prompt),
        "gen_ai.output.messages": _messages(("assistant", [{"type": "text", "content": "Sunny."}])),
        "evaltrace.case_id": "case-1",
    }
    spans.append(_span(1, None, "invoke_agent planner", 0, root, length=clock + 1))
    _vary(spans, variation, ids, clock)
    return draw(st.permutations(spans)), variation


def _vary(spans: list[Span], variation: str, ids: int, clock: int) -> None:
    root, chats = spans[-1], [s for s in spans if s.name.startswith("chat")]
    tools = [s for s in spans if s.name.startswith("execute_tool")]
    if variation == "exception event":
        root.events.append(SpanEvent("exception", root.start_time_ns, {"exception.type": "ValueError"}))
    elif variation == "openinference kind":
        chats[0].attributes["openinference.span.kind"] = "LLM"
    elif variation == "nested chat":
        inner = dict(chats[0].attributes, **{"gen_ai.response.id": "inner"})
        spans.append(_span(ids, int(chats[0].span_id, 16), "chat inner", clock, inner))
    elif variation == "missing tool span" and tools:
        spans.remove(tools[0])
    elif variation == "unrequested tool span":
        attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "x", "gen_ai.tool.call.id": "zz"}
        spans.append(_span(ids, 1, "execute_tool x", clock, dict(attrs, **{"gen_ai.tool.call.result": "1"})))
    elif variation == "duplicate call id" and len(tools) > 1:
        tools[1].attributes["gen_ai.tool.call.id"] = tools[0].attributes["gen_ai.tool.call.id"]
    elif variation == "shared response id" and len(chats) > 1:
        chats[1].attributes["gen_ai.response.id"] = chats[0].attributes["gen_ai.response.id"]
    elif variation == "answer tool" and tools:
        tools[-1].attributes["gen_ai.tool.name"] = "final_answer"
    elif variation == "result only by name" and tools:
        tools[0].attributes.pop("gen_ai.tool.call.result", None)
        for chat in chats:  # the prompts name the result by tool, not by id
            chat.attributes["gen_ai.input.messages"] = chat.attributes["gen_ai.input.messages"].replace('"id"', '"x"')
    elif variation == "redacted arguments" and tools:
        tools[0].attributes["gen_ai.tool.call.arguments"] = "[REDACTED]"
    elif variation == "no root input":
        root.attributes.pop("gen_ai.input.messages")
    elif variation == "case id as number":
        root.attributes["evaltrace.case_id"] = 7
    elif variation == "tool named by a number":  # the extractor fails on the span (validation): the converter warns
        reply = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c", "name": 5}]}]
        chats[0].attributes["gen_ai.output.messages"] = json.dumps(reply)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(flat_traces())
def test_generated_flat_traces(drawn: tuple[list[Span], str]) -> None:
    spans, variation = drawn
    built = flat_agrees(spans)
    if variation == "none":
        assert built, "the builder left a plain flat trace to the converter"


def test_the_builder_makes_the_common_shapes_row() -> None:
    """A failed call whose result only the next prompt holds still takes the builder (the peer set has 15%)."""
    spans, _ = _one_failed_call()
    assert flat_agrees(spans)
    (call,) = next(table_batches_of([spans], histories=False, rows=1)).column("tool_calls").to_pylist()[0]
    assert call["error"] == "TimeoutError" and json.loads(call["result_json"]) == {"error": "TimeoutError"}


def _one_failed_call() -> tuple[list[Span], str]:
    reply = [{"type": "tool_call", "id": "c1", "name": "weather", "arguments": {"city": "Paris"}}]
    user = ("user", [{"type": "text", "content": "Paris?"}])
    back = ("tool", [{"type": "tool_call_response", "id": "c1", "response": {"error": "TimeoutError"}}])

    def chat(n: int, history: str, out: str) -> Span:
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.response.id": f"r{n}", "gen_ai.usage.input_tokens": 3}
        attrs.update({"gen_ai.input.messages": history, "gen_ai.output.messages": out})
        return _span(n, 1, "chat", n * 3, attrs)

    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather", "gen_ai.tool.call.id": "c1"}
    tool["gen_ai.tool.call.arguments"] = '{"city": "Paris"}'  # no result: the tool failed
    answer = _messages(("assistant", [{"type": "text", "content": "Sunny."}]))
    root = {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": _messages(user)}
    spans = [
        _span(1, None, "invoke_agent a", 0, root, length=20),
        chat(2, _messages(user), _messages(("assistant", reply))),
        _span(3, 1, "execute_tool weather", 7, tool, status="ERROR", message="TimeoutError"),
        chat(4, _messages(user, ("assistant", reply), back), answer),
    ]
    return spans, "none"


def test_a_rebuilt_trace_is_settled_in_the_oldest_generation() -> None:
    """Left young, every collection while scoring holds the traces scanned them again (3.8 s of 10,000)."""
    before = gc.isenabled()
    gc.disable()  # no automatic collection while looking at generations
    try:
        spans, _ = _one_failed_call()
        (trace,) = convert_trace(spans, histories=False)
        assert any(o is trace for o in gc.get_objects(generation=2))
        assert gc.get_freeze_count() == 0
    finally:
        (gc.enable if before else gc.disable)()
