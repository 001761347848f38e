"""The scoring engine: match traces to cases, run the scorers, aggregate repeats, gate.

Matching (CONTRACT.md). A trace belongs to a case when any of its spans carries
`evaltrace.case_id` equal to the case id (`Trace.case_id`); otherwise when its input,
whitespace-normalised, equals the case's input (a trace whose input equals several cases'
input is a sample of each). Several traces of one case are repeats, decided by the case's
`repeat` rule. A multi-turn case matches a conversation (`Trace.conversation_id`, or the trace
alone when it has none): one of its traces carries the case id, or its first trace's input equals
the first turn's; turns are matched to the conversation's traces in start-time order. Traces that
match no case are reported as unmatched, not scored; traces of cases left out by the selection
are ignored.

Streaming. Traces are consumed one at a time and scored as they arrive; only results are kept,
not `Trace` objects. The exception is a spec with multi-turn cases: traces that may belong to a
conversation are held until the input ends, since a conversation's traces arrive in any order.

Without a spec, every trace is an entry scored by the reference-free defaults.
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version as dist_version
from typing import Any

from evaltrace.collector.errors import InputError
from evaltrace.collector.records import Trace
from evaltrace.evaluators._aggregate import aggregate_case, trace_entry
from evaltrace.evaluators._engine_run import RunStats, judge_session_for, score_conversation, score_trace
from evaltrace.evaluators.base import Scorer
from evaltrace.evaluators.prices import DEFAULT_PRICES
from evaltrace.evaluators.registry import create_scorer
from evaltrace.evaluators.report import (
    Counts,
    EntryResult,
    Report,
    ReportInputs,
    SampleResult,
    ScorerInfo,
    UnmatchedTrace,
    evaluate_gate,
)
from evaltrace.evaluators.spec import Case
from evaltrace.evaluators.spec_loader import LoadedSpec

DEFAULT_CONFIDENCE = 1.0
"""Without `confidence` in the spec or `--confidence`, every entry must pass."""
DEFAULT_SCORERS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("tool_errors", {}),
    ("tool_call_validity", {}),
    ("tool_efficiency", {}),
    ("outcome", {"expected": "success"}),
)
"""The reference-free scorers applied to every trace when there is no spec."""
_MAX_IN_FLIGHT = 64
_UNMATCHED_INPUT_CHARS = 200

Job = Coroutine[Any, Any, tuple[str | None, SampleResult]]


@dataclass(frozen=True)
class ScoreOptions:
    """How to score: the threshold override, the selection, and what the report records."""

    confidence: float | None = None
    """Overrides the spec's `confidence`."""
    tiers: tuple[str, ...] = ()
    """Keep cases whose tier is one of these."""
    tags: tuple[str, ...] = ()
    """Keep cases carrying any of these tags."""
    cases: tuple[str, ...] = ()
    """Keep cases whose id matches any of these globs."""
    paths: tuple[str, ...] = ()
    """The PATH arguments, recorded in the report."""
    judge_overrides: dict[str, Any] = field(default_factory=dict)
    """Passed to `JudgeSettings.from_env` when a judge scorer runs."""
    progress: Callable[[int], None] | None = None
    """Called with the number of traces read so far."""


def normalize_input(text: str | None) -> str | None:
    """Whitespace-normalised input: runs of whitespace become one space, ends trimmed."""
    return None if text is None else " ".join(text.split())


def select_cases(spec: LoadedSpec, options: ScoreOptions) -> list[Case]:
    """The cases the selection keeps (tiers OR'ed, tags OR'ed, id globs OR'ed; the three AND'ed).

    Raises:
        InputError: no case is left.
    """
    selected = [
        case
        for case in spec.cases
        if (not options.tiers or case.tier in options.tiers)
        and (not options.tags or any(tag in case.tags for tag in options.tags))
        and (not options.cases or any(fnmatch.fnmatchcase(case.id, pattern) for pattern in options.cases))
    ]
    if not selected:
        wanted = _describe_selection(options)
        raise InputError(f"{spec.path}: no case matches the selection ({wanted}); check the case ids, tiers and tags")
    return selected


def _describe_selection(options: ScoreOptions) -> str:
    parts = [f"--tier {t}" for t in options.tiers] + [f"--tag {t}" for t in options.tags]
    return " ".join(parts + [f"--case {c}" for c in options.cases]) or "all cases"


def default_scorers() -> tuple[Scorer, ...]:
    """The reference-free scorers used without a spec."""
    return tuple(create_scorer(name, config) for name, config in DEFAULT_SCORERS)


def score_traces(traces: Iterable[Trace], spec: LoadedSpec | None, options: ScoreOptions | None = None) -> Report:
    """Score traces (against a spec's cases, or by the reference-free defaults) and gate.

    Args:
        traces: the traces, consumed once, one at a time.
        spec: the loaded spec, or `None` to score every trace with the defaults.
        options: threshold override, selection, report inputs, judge overrides.

    Returns:
        The report, with the gate's verdict in `passed`.

    Raises:
        InputError: the selection keeps no case, or there was no trace to score without a spec.
    """
    reports: list[Report] = []

    async def main() -> None:
        # The report is handed out through `reports`, not as the main task's result: on exit,
        # `asyncio.run` restores the SIGINT handler and CPython 3.11 then formats the task's repr,
        # result included (seconds for a report of 100k entries).
        reports.append(await ascore_traces(traces, spec, options or ScoreOptions()))

    asyncio.run(main())
    return reports[0]


async def ascore_traces(traces: Iterable[Trace], spec: LoadedSpec | None, options: ScoreOptions) -> Report:
    """Async twin of `score_traces`, for callers already in an event loop."""
    router = _SpecRouter(spec, select_cases(spec, options)) if spec is not None else _TraceRouter(default_scorers())
    stats = RunStats(prices={**DEFAULT_PRICES, **(spec.spec.prices if spec is not None else {})})
    results: list[tuple[str | None, SampleResult]] = []
    async with judge_session_for(router.scorers(), options.judge_overrides) as judge_stats:
        pending: set[asyncio.Task[tuple[str | None, SampleResult]]] = set()
        for trace in traces:
            stats.traces += 1
            if options.progress is not None:
                options.progress(stats.traces)
            for job in router.route(trace, stats):
                pending.add(asyncio.create_task(job))
            if len(pending) >= _MAX_IN_FLIGHT:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                results += [task.result() for task in done]
            await asyncio.sleep(0)  # let judge requests progress while the next trace is read
        pending |= {asyncio.create_task(job) for job in router.finish(stats)}
        results += await asyncio.gather(*pending)
        judge = judge_stats()
    return _build_report(router, results, stats, spec, options, judge)


class _TraceRouter:
    """Without a spec: every trace is scored by the defaults and is its own entry."""

    def __init__(self, scorers: tuple[Scorer, ...]) -> None:
        self._scorers = scorers
        self.unmatched: list[UnmatchedTrace] = []

    def scorers(self) -> list[Scorer]:
        return list(self._scorers)

    def route(self, trace: Trace, stats: RunStats) -> list[Job]:
        return [_keyed(trace.case_id, score_trace(trace, None, self._scorers, stats))]

    def finish(self, stats: RunStats) -> list[Job]:
        return []

    def entries(self, results: Sequence[tuple[str | None, SampleResult]]) -> list[EntryResult]:
        ordered = sorted(results, key=lambda r: (r[1].start_time or datetime.max.replace(tzinfo=UTC), r[1].trace_id))
        return [trace_entry(sample, case_id) for case_id, sample in ordered]


class _SpecRouter:
    """With a spec: traces go to the cases they match; conversations wait for the input to end."""

    def __init__(self, spec: LoadedSpec, selected: list[Case]) -> None:
        self.spec = spec
        self.selected = selected
        self._selected_ids = {case.id for case in selected}
        self._by_id = {case.id: case for case in spec.cases}
        self._by_input: dict[str, list[Case]] = {}
        for case in spec.cases:
            key = normalize_input(case.input if case.turns is None else case.turns[0].input)
            if key is not None:
                self._by_input.setdefault(key, []).append(case)
        self._has_multi_turn = any(case.turns is not None for case in spec.cases)
        self._conversations: dict[str, list[Trace]] = {}
        self.unmatched: list[UnmatchedTrace] = []

    def scorers(self) -> list[Scorer]:
        return [s for case in self.selected for turn in self.spec.case_scorers[case.id] for s in turn]

    def route(self, trace: Trace, stats: RunStats) -> list[Job]:
        cases = self._cases_for(trace)
        single = [case for case in cases if case.turns is None]
        if single:
            return [self._job(case, trace, stats) for case in single if case.id in self._selected_ids]
        if self._has_multi_turn and (cases or trace.conversation_id is not None):
            # Maybe a turn of a conversation: decided once all its traces are in (see finish).
            self._conversations.setdefault(trace.conversation_id or f"trace:{trace.trace_id}", []).append(trace)
            return []
        self._unmatched(trace)
        return []

    def _cases_for(self, trace: Trace) -> list[Case]:
        if trace.case_id is not None and trace.case_id in self._by_id:
            return [self._by_id[trace.case_id]]
        return self._by_input.get(normalize_input(trace.input) or "", [])

    def _job(self, case: Case, trace: Trace, stats: RunStats) -> Job:
        return _keyed(case.id, score_trace(trace, case, self.spec.case_scorers[case.id][0], stats))

    def _unmatched(self, trace: Trace) -> None:
        text = trace.input[:_UNMATCHED_INPUT_CHARS] if trace.input is not None else None
        self.unmatched.append(UnmatchedTrace(trace_id=trace.trace_id, input=text))

    def finish(self, stats: RunStats) -> list[Job]:
        jobs: list[Job] = []
        for traces in self._conversations.values():
            traces.sort(key=lambda t: (t.start_time or datetime.max.replace(tzinfo=UTC), t.trace_id))
            case = self._conversation_case(traces)
            if case is None:
                for trace in traces:
                    self._unmatched(trace)
            elif case.id in self._selected_ids:
                turn_scorers = self.spec.case_scorers[case.id]
                jobs.append(_keyed(case.id, score_conversation(traces, case, turn_scorers, stats)))
        self._conversations.clear()
        return jobs

    def _conversation_case(self, traces: list[Trace]) -> Case | None:
        for trace in traces:
            case = self._by_id.get(trace.case_id or "")
            if case is not None and case.turns is not None:
                return case
        candidates = self._by_input.get(normalize_input(traces[0].input) or "", [])
        return next((case for case in candidates if case.turns is not None), None)

    def entries(self, results: Sequence[tuple[str | None, SampleResult]]) -> list[EntryResult]:
        samples: dict[str, list[SampleResult]] = {case.id: [] for case in self.selected}
        for case_id, sample in results:
            if case_id is not None:
                samples[case_id].append(sample)
        return [aggregate_case(case, self.spec.spec.repeat_for(case), samples[case.id]) for case in self.selected]


async def _keyed(key: str | None, job: Coroutine[Any, Any, SampleResult]) -> tuple[str | None, SampleResult]:
    return key, await job


def _build_report(
    router: _TraceRouter | _SpecRouter,
    results: list[tuple[str | None, SampleResult]],
    stats: RunStats,
    spec: LoadedSpec | None,
    options: ScoreOptions,
    judge: dict[str, Any] | None,
) -> Report:
    entries = router.entries(results)
    if not entries:
        raise InputError("no trace to score: the PATHs hold no traces")
    confidence = _confidence(spec, options)
    gate = evaluate_gate(entries, confidence)
    return Report(
        evaltrace_version=dist_version("evaltrace"),
        created_at=datetime.now(UTC),
        inputs=ReportInputs(
            paths=list(options.paths),
            spec=spec.path if spec is not None else None,
            tiers=list(options.tiers),
            tags=list(options.tags),
            cases=list(options.cases),
        ),
        passed=gate.passed,
        pass_rate=gate.pass_rate,
        confidence=confidence,
        gate_reason=gate.reason,
        counts=_counts(entries, stats.traces, len(router.unmatched)),
        entries=entries,
        scorers=_scorer_infos(router.scorers()),
        latency=stats.latency(),
        usage=stats.usage,
        cost=stats.cost(),
        unmatched=router.unmatched,
        judge=judge,
    )


def _confidence(spec: LoadedSpec | None, options: ScoreOptions) -> float:
    if options.confidence is not None:
        return options.confidence
    if spec is not None and spec.spec.confidence is not None:
        return spec.spec.confidence
    return DEFAULT_CONFIDENCE


def _counts(entries: list[EntryResult], traces: int, unmatched: int) -> Counts:
    def count(status: str) -> int:
        return sum(1 for e in entries if e.status == status)

    return Counts(
        entries=len(entries),
        passed=count("passed"),
        failed=count("failed"),
        missing=count("missing"),
        not_applicable=count("not_applicable"),
        traces=traces,
        unmatched=unmatched,
    )


def _scorer_infos(scorers: Iterable[Scorer]) -> list[ScorerInfo]:
    infos: dict[tuple[str, str], ScorerInfo] = {}
    for scorer in scorers:
        digest = scorer.config_hash()
        infos.setdefault(
            (scorer.name, digest),
            ScorerInfo(
                name=scorer.name, version=scorer.version, config_hash=digest, config=scorer.model_dump(mode="json")
            ),
        )
    return list(infos.values())
