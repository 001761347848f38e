"""Run an agent function over a spec's cases and record its spans into a new run folder.

`evaltrace run` is this module followed by `evaltrace score` on the folder it wrote (docs/run.md).
The agent function (`module:function`, sync or `async def`) gets the case's input as its one
positional argument and returns the answer; what it did is read from the spans it (or its
instrumentation, loaded first by `autoconf.instrument_installed`) ends. The run folder is the
process's one evaltrace recording, spans and log records (see `_record_into`).

Each call runs inside a root span the runner opens, `evaltrace.case <id>`, carrying
`evaltrace.case_id`, `evaltrace.repeat` (0-based) and, for a multi-turn case, `evaltrace.turn`
(1-based) and `gen_ai.conversation.id`, so each call is one trace whatever the agent's own
instrumentation does.

Multi-turn cases: one call per turn, in order, in one conversation with a fresh id; the agent gets
`conversation_id` and `history` (`[{"role", "content"}, ...]` of earlier turns) as keywords only
when its signature names them. A failed or timed-out turn ends the conversation (later turns are
missing).

Failures never stop the run. An exception is an `error` entry (root span status ERROR, `error.type`
the exception class); a call running past `timeout` is a `timeout` entry (`error.type` = `timeout`,
which the converter maps to `Trace.status == "timeout"`). A timed-out sync call keeps running on
its daemon thread, an async one is cancelled; spans of that trace ending later are dropped, so they
can neither change its outcome nor reach another entry. An async agent that blocks its event loop
cannot be timed out. Up to `concurrency` cases (a conversation counts as one) run at once, sync
agents on threads, async agents as tasks on one event loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from pydantic import BaseModel, ConfigDict, Field

from evaltrace.collector.errors import InputError
from evaltrace.collector.recorder.span_scope import record_error
from evaltrace.evaluators.runner.call import CallOutcome, CallResult, call_agent
from evaltrace.evaluators.runner.spans import SealingSpanProcessor, sdk_provider
from evaltrace.evaluators.scoring.scorers.plugins import import_user_module
from evaltrace.evaluators.scoring.spec.model import Case

if TYPE_CHECKING:
    from evaltrace.collector.recorder.recording import Recorder

CASE_ID_ATTRIBUTE = "evaltrace.case_id"
REPEAT_ATTRIBUTE = "evaltrace.repeat"
TURN_ATTRIBUTE = "evaltrace.turn"
CONVERSATION_ID_ATTRIBUTE = "gen_ai.conversation.id"
ROOT_SPAN_PREFIX = "evaltrace.case"

AgentFunction = Callable[..., Any]


class RunOptions(BaseModel):
    """How to run the agent over the cases."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    repeat: int = Field(default=1, ge=1)
    """Calls per case (each repeat is a sample of the case)."""
    concurrency: int = Field(default=1, ge=1)
    """Cases running at once."""
    timeout: float | None = Field(default=None, gt=0)
    """Seconds one call (one turn) may take; `None` = no limit."""
    run_id: str | None = None
    """Label stored with every span (default: the run folder's name)."""


@dataclass(frozen=True)
class CallRecord:
    """One call of the agent: a case (or one turn of it) in one repeat."""

    case_id: str
    repeat: int
    turn: int | None
    outcome: CallOutcome
    trace_id: str
    error: str | None = None
    duration_seconds: float = 0.0


@dataclass
class RunResult:
    """What a run recorded, and where."""

    directory: Path
    run_id: str
    calls: list[CallRecord] = field(default_factory=list)

    def count(self, outcome: CallOutcome) -> int:
        """How many calls ended with `outcome`."""
        return sum(1 for call in self.calls if call.outcome == outcome)


def load_agent(reference: str) -> AgentFunction:
    """Import the agent function named `module:function` (the working directory is importable).

    Raises:
        InputError: the reference is malformed, the module cannot be imported, or the name is
            missing or not callable.
    """
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise InputError(f"--agent {reference!r}: expected MODULE:FUNCTION, e.g. samples.agent:run")
    try:
        target: Any = import_user_module(module_name)
    except Exception as exc:  # the user's module failing to import is an input problem, not our bug
        raise InputError(f"--agent {reference!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise InputError(f"--agent {reference!r}: {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not callable(target):
        raise InputError(f"--agent {reference!r}: {attribute!r} is a {type(target).__name__}, not a function")
    function: AgentFunction = target
    return function


def new_run_directory(base: str | os.PathLike[str] = "runs") -> Path:
    """A fresh folder name under `base`: `<UTC timestamp>-<random id>` (not created yet)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path(base) / f"{stamp}-{uuid.uuid4().hex[:8]}"


def run_agent(
    agent: AgentFunction,
    cases: Sequence[Case],
    directory: Path,
    options: RunOptions,
    on_call: Callable[[CallRecord], None] | None = None,
) -> RunResult:
    """Call `agent` for every case and repeat, recording the spans into `directory`.

    Args:
        agent: the agent function (sync or async); see the module docstring for its contract.
        cases: the cases to run (already selected).
        directory: a new folder, or an existing one without span files.
        options: repeats, concurrency, timeout.
        on_call: called with each call's record as soon as the call ends (progress), on the
            event loop's thread.

    Returns:
        Every call with its outcome; the files are complete when this returns.

    Raises:
        InputError: `directory` already holds span files.
    """
    if directory.is_dir() and any(directory.glob("*.parquet")):
        raise InputError(f"{directory}: already holds recorded spans; choose a new folder for this run")
    run_id = options.run_id or directory.name
    sealer, recorder = _record_into(directory, run_id)
    result = RunResult(directory=directory, run_id=run_id)
    try:
        result.calls = asyncio.run(_Runner(agent, sealer, options, on_call).run(cases))
    finally:
        sealer.shutdown()  # writes the buffered spans and stops recording
        recorder.stop()  # and the log records
    return result


def _record_into(directory: Path, run_id: str) -> tuple[SealingSpanProcessor, Recorder]:
    """Make the run folder the process's one evaltrace recording, spans and log records.

    A recording already active (`opentelemetry-instrument` with `OTEL_TRACES_EXPORTER=evaltrace`,
    or the agent's module calling `record()`) is stopped first, so each span is written once, to
    the run folder. The new one is registered as the active recording, so an agent calling
    `record()` gets it rather than starting a second writer.
    """
    # Imported here: the Parquet writer (pyarrow) is not needed to import evaltrace.evaluators.
    from evaltrace.collector.recorder.exporter import ParquetSpanExporter
    from evaltrace.collector.recorder.recording import EvaltraceSpanProcessor, adopt, current, record_logs

    provider = sdk_provider()
    previous = current()
    if previous is not None:
        previous.stop()
    processor = EvaltraceSpanProcessor(ParquetSpanExporter(directory, run_id=run_id))
    sealer = SealingSpanProcessor(processor)
    provider.add_span_processor(sealer)
    return sealer, adopt(processor, record_logs(processor.exporter))


class _Runner:
    def __init__(
        self,
        agent: AgentFunction,
        sealer: SealingSpanProcessor,
        options: RunOptions,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> None:
        self._agent = agent
        self._on_call = on_call
        self._sealer = sealer
        self._options = options
        self._tracer = trace.get_tracer("evaltrace.runner")
        self._passes_history = _accepts(agent, "history")
        self._passes_conversation = _accepts(agent, "conversation_id")

    async def run(self, cases: Sequence[Case]) -> list[CallRecord]:
        slots = asyncio.Semaphore(self._options.concurrency)

        async def unit(case: Case, repeat: int) -> list[CallRecord]:
            async with slots:
                return await (self._single(case, repeat) if case.turns is None else self._conversation(case, repeat))

        # Repeat-major order: with concurrency 1 the dataset runs through once per repeat.
        units = [unit(case, repeat) for repeat in range(self._options.repeat) for case in cases]
        return [record for records in await asyncio.gather(*units) for record in records]

    async def _single(self, case: Case, repeat: int) -> list[CallRecord]:
        record, _ = await self._call(case, repeat, case.input or "", None, {})
        return [record]

    async def _conversation(self, case: Case, repeat: int) -> list[CallRecord]:
        conversation_id = uuid.uuid4().hex
        history: list[dict[str, str]] = []
        records = []
        for turn, spec_turn in enumerate(case.turns or [], start=1):
            kwargs: dict[str, Any] = {}
            if self._passes_conversation:
                kwargs["conversation_id"] = conversation_id
            if self._passes_history:
                kwargs["history"] = list(history)
            record, value = await self._call(case, repeat, spec_turn.input, (turn, conversation_id), kwargs)
            records.append(record)
            if record.outcome != "ok":
                break  # the conversation cannot go on without this turn's answer
            history += [{"role": "user", "content": spec_turn.input}, {"role": "assistant", "content": _text(value)}]
        return records

    async def _call(
        self, case: Case, repeat: int, text: str, turn: tuple[int, str] | None, kwargs: dict[str, Any]
    ) -> tuple[CallRecord, Any]:
        attributes: dict[str, str | int] = {CASE_ID_ATTRIBUTE: case.id, REPEAT_ATTRIBUTE: repeat}
        if turn is not None:
            attributes |= {TURN_ATTRIBUTE: turn[0], CONVERSATION_ID_ATTRIBUTE: turn[1]}
        span = self._tracer.start_span(f"{ROOT_SPAN_PREFIX} {case.id}", attributes=attributes)
        span_context = span.get_span_context()
        if turn is not None:
            # The agent's own spans carry the conversation id too: converters read it from the agent span.
            self._sealer.stamp(span_context.trace_id, {CONVERSATION_ID_ATTRIBUTE: turn[1]})
        ctx = contextvars.copy_context()
        ctx.run(otel_context.attach, trace.set_span_in_context(span))
        started = time.monotonic()
        result = await call_agent(
            self._agent,
            (text,),
            kwargs,
            ctx,
            self._options.timeout,
            on_timeout=lambda: self._sealer.seal(span_context.trace_id, span_context.span_id),
        )
        error = _finish(span, result, self._options.timeout)
        self._sealer.forget(span_context.trace_id)
        record = CallRecord(
            case_id=case.id,
            repeat=repeat,
            turn=turn[0] if turn is not None else None,
            outcome=result.outcome,
            trace_id=f"{span_context.trace_id:032x}",
            error=error,
            duration_seconds=time.monotonic() - started,
        )
        if self._on_call is not None:
            self._on_call(record)
        return record, result.value


def _finish(span: Span, result: CallResult, timeout: float | None) -> str | None:
    """End the root span with the call's outcome; returns the error text (`None` when ok)."""
    error: str | None = None
    if result.outcome == "timeout":
        error = f"timed out after {timeout:g} s"
        span.set_attribute("error.type", "timeout")
        span.set_status(Status(StatusCode.ERROR, error))
    elif result.error is not None:
        error = record_error(span, result.error)
    span.end()
    return error


def _accepts(function: AgentFunction, name: str) -> bool:
    """Whether `function` has a parameter `name` that can be passed by keyword."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # some builtins and C callables have no signature
        return False
    found = parameters.get(name)
    return found is not None and found.kind in (found.POSITIONAL_OR_KEYWORD, found.KEYWORD_ONLY)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


__all__ = [
    "AgentFunction",
    "CallRecord",
    "RunOptions",
    "RunResult",
    "load_agent",
    "new_run_directory",
    "run_agent",
]
