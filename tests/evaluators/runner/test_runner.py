"""The runner's building blocks: calling an agent with a time limit, sealing a timed-out trace, loading agents."""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.runner.agent import RunOptions, load_agent, new_run_directory
from evaltrace.evaluators.runner.call import call_agent
from evaltrace.evaluators.runner.spans import SealingSpanProcessor


def call(fn: object, timeout: float | None = 1.0, timeouts: list[str] | None = None) -> object:
    async def go() -> object:
        return await call_agent(
            fn,  # type: ignore[arg-type]
            ("question",),
            {},
            contextvars.copy_context(),
            timeout,
            on_timeout=lambda: (timeouts if timeouts is not None else []).append("sealed"),
        )

    return asyncio.run(go())


def test_sync_agent_value_and_exceptions() -> None:
    ok = call(lambda q: f"answer to {q}")
    assert (ok.outcome, ok.value) == ("ok", "answer to question")  # type: ignore[attr-defined]

    def boom(q: str) -> str:
        raise ValueError("bad city")

    failed = call(boom)
    assert failed.outcome == "error" and isinstance(failed.error, ValueError)  # type: ignore[attr-defined]

    def stops(q: str) -> str:
        raise SystemExit(3)  # exceptions futures refuse still become an `error` result

    assert call(stops).outcome == "error"  # type: ignore[attr-defined]


def test_sync_timeout_returns_at_the_limit_and_abandons_the_thread() -> None:
    release = threading.Event()
    sealed: list[str] = []

    def hangs(q: str) -> str:
        release.wait(10)
        return "late"

    started = time.monotonic()
    result = call(hangs, timeout=0.2, timeouts=sealed)
    assert result.outcome == "timeout"  # type: ignore[attr-defined]
    assert time.monotonic() - started < 2
    assert sealed == ["sealed"]
    release.set()


def test_async_agent_runs_on_the_loop_and_is_cancelled_on_timeout() -> None:
    cancelled: list[bool] = []

    async def slow(q: str) -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    async def fast(q: str) -> str:
        await asyncio.sleep(0)
        return q.upper()

    assert call(slow, timeout=0.1).outcome == "timeout"  # type: ignore[attr-defined]
    assert cancelled == [True]
    assert call(fast).value == "QUESTION"  # type: ignore[attr-defined]


def test_call_runs_in_the_given_context_only() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="outer")
    ctx = contextvars.copy_context()
    ctx.run(var.set, "call")

    async def go() -> object:
        return await call_agent(lambda q: var.get(), ("q",), {}, ctx, None, on_timeout=lambda: None)

    assert asyncio.run(go()).value == "call"  # type: ignore[attr-defined]
    assert var.get() == "outer"


def test_sealed_trace_drops_late_spans_but_keeps_the_root() -> None:
    exported = InMemorySpanExporter()
    sealer = SealingSpanProcessor(SimpleSpanProcessor(exported))
    provider = TracerProvider()
    provider.add_span_processor(sealer)
    tracer = provider.get_tracer("test")
    root = tracer.start_span("root")
    from opentelemetry import trace

    with trace.use_span(root):
        early = tracer.start_span("early")
        early.end()
        late = tracer.start_span("late")
    other = tracer.start_span("other trace")
    context = root.get_span_context()
    sealer.seal(context.trace_id, context.span_id)
    late.end()
    other.end()
    root.end()
    assert sorted(s.name for s in exported.get_finished_spans()) == ["early", "other trace", "root"]


def test_stamped_attributes_reach_child_spans_without_overwriting() -> None:
    exported = InMemorySpanExporter()
    sealer = SealingSpanProcessor(SimpleSpanProcessor(exported))
    provider = TracerProvider()
    provider.add_span_processor(sealer)
    tracer = provider.get_tracer("test")
    root = tracer.start_span("root", attributes={"gen_ai.conversation.id": "c1"})
    sealer.stamp(root.get_span_context().trace_id, {"gen_ai.conversation.id": "c1"})
    from opentelemetry import trace

    with trace.use_span(root, end_on_exit=True):
        tracer.start_span("child").end()
        tracer.start_span("own", attributes={"gen_ai.conversation.id": "mine"}).end()
    ids = {s.name: (s.attributes or {}).get("gen_ai.conversation.id") for s in exported.get_finished_spans()}
    assert ids == {"root": "c1", "child": "c1", "own": "mine"}


def test_load_agent_imports_from_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_agent_mod.py").write_text("class Bot:\n    @staticmethod\n    def run(q):\n        return q\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "my_agent_mod", raising=False)
    assert load_agent("my_agent_mod:Bot.run")("hi") == "hi"
    with pytest.raises(InputError, match="cannot import 'my_agent_mod_missing'"):
        load_agent("my_agent_mod_missing:run")
    with pytest.raises(InputError, match="expected MODULE:FUNCTION"):
        load_agent(":run")


def test_new_run_directory_is_unique_and_timestamped() -> None:
    first, second = new_run_directory("runs"), new_run_directory("runs")
    assert first != second and first.parent == Path("runs")
    assert first.name[:8].isdigit() and first.name[8] == "T"


def test_run_options_validate() -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        RunOptions(timeout=0)
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        RunOptions(repeat=0)
