"""Scoring one sample (a trace, or a conversation's turns), run statistics, and the judge session.

All scorers of a sample run through `arun_scorer` under asyncio: rule scorers return at once,
judge scorers await their client, so judges of many samples run concurrently (bounded by the
judge's own semaphore). The judge session is opened only when a judge (a scorer overriding
`ascore`) is among the scorers, so rule-only scoring never touches the network.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.engine._aggregate import sample_status, score_result, status_passed
from evaltrace.evaluators.engine._numbers import ExactSum, percentile
from evaltrace.evaluators.engine.time_limit import Limiter, ScorerTimeout, current_limiter, timeout_message
from evaltrace.evaluators.results.report.model import CostStats, LatencyStats, SampleResult, ScoreResult, TokenUsage
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer, arun_scorer, run_scorer
from evaltrace.evaluators.scoring.scorers.prices import DEFAULT_PRICES, ModelPrice, TokenCounts, call_cost, find_price
from evaltrace.evaluators.scoring.spec.model import Case

Run = tuple[float | None, int | None, int | None, Sequence[tuple[str | None, TokenCounts]]]
"""A scored trace as `RunStats` counts it: duration, input and output tokens, its model calls' models and usages."""


@dataclass
class RunStats:
    """Aggregates over every scored trace: latency, tokens, estimated cost."""

    prices: Mapping[str, ModelPrice] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    """Model prices: the built-in table, extended or overridden by the spec's `prices`."""
    traces: int = 0
    """Traces read (scored or not)."""
    durations: array[float] = field(default_factory=lambda: array("d"))
    """8 bytes per trace: the exact percentiles need every duration."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: ExactSum = field(default_factory=ExactSum)
    """The priced traces' estimated costs (summed exactly: a sharded run adds them in another order)."""
    unpriced_models: set[str] = field(default_factory=set)
    dropped_spans: int = 0
    """Spans the recording of the scored files dropped on a full export queue (writers' counts)."""
    unwritten_spans: int = 0
    """Spans the recording of the scored files could not write (writers' counts)."""
    _price_of: dict[str, ModelPrice | None] = field(default_factory=dict, repr=False)
    """`find_price` results by model name: a run has few models and many model calls."""

    def add(self, trace: Trace) -> float | None:
        """Count a scored trace; returns its estimated cost (`None` when it cannot be priced)."""
        usage = trace.usage
        calls = [(iteration.model, iteration.usage) for iteration in trace.iterations]
        return self.add_runs([(trace.duration_seconds, usage.input_tokens, usage.output_tokens, calls)])[0]

    def add_runs(self, runs: Sequence[Run]) -> list[float | None]:
        """Count scored traces given as values (the warm path's batch of rows): `add` without a `Trace`.

        Returns each one's estimated cost, as `add` does.
        """
        self.durations.extend([duration for duration, *_ in runs if duration is not None])
        self.usage = TokenUsage(
            input_tokens=self.usage.input_tokens + sum(run[1] or 0 for run in runs),
            output_tokens=self.usage.output_tokens + sum(run[2] or 0 for run in runs),
        )
        costs = [self._cost(calls) for *_, calls in runs]
        for cost in costs:
            if cost is not None:
                self.cost_usd.add(cost)
        return costs

    def merge(self, other: RunStats) -> None:
        """Add `other`'s counts (a worker's share of the run) to these."""
        self.traces += other.traces
        self.durations.extend(other.durations)
        self.usage = TokenUsage(
            input_tokens=self.usage.input_tokens + other.usage.input_tokens,
            output_tokens=self.usage.output_tokens + other.usage.output_tokens,
        )
        self.cost_usd.merge(other.cost_usd)
        self.unpriced_models |= other.unpriced_models

    def _cost(self, calls: Sequence[tuple[str | None, TokenCounts]]) -> float | None:
        total, complete = 0.0, True
        known = self._price_of
        for model, usage in calls:
            price = (known[model] if model in known else self._price(model)) if model else None
            if price is None:
                complete = False
                self.unpriced_models.add(model or "(unknown model)")
                continue
            total += call_cost(usage, price)
        # A trace without model calls has nothing to price: it is neither priced nor unpriced.
        return total if complete and calls else None

    def _price(self, model: str) -> ModelPrice | None:
        if model not in self._price_of:
            self._price_of[model] = find_price(model, self.prices)
        return self._price_of[model]

    def latency(self) -> LatencyStats:
        """p50/p95 of the scored traces' durations."""
        return LatencyStats(
            p50_seconds=percentile(self.durations, 0.5),
            p95_seconds=percentile(self.durations, 0.95),
            traces=len(self.durations),
        )

    def cost(self) -> CostStats:
        """The estimated cost; `None` when nothing could be priced."""
        estimated = self.cost_usd.total() if self.cost_usd.count else None
        return CostStats(estimated_usd=estimated, unpriced_models=sorted(self.unpriced_models))


async def _run_scorers(trace: Trace, case: Case | None, scorers: Sequence[Scorer]) -> list[Any]:
    # Rule scorers run inline (a task per scorer costs more than most rules); only async scorers
    # (judges, custom I/O) are gathered concurrently. Results keep the scorers' order either way.
    limiter = current_limiter()
    judges = [index for index, s in enumerate(scorers) if is_async_scorer(s)]
    found: list[Any] = [
        None if index in judges else _run_limited(s, trace, case, limiter) for index, s in enumerate(scorers)
    ]
    if judges:
        verdicts = await asyncio.gather(*(_arun_limited(scorers[index], trace, case, limiter) for index in judges))
        for index, verdict in zip(judges, verdicts, strict=True):
            found[index] = verdict
    return found


def _run_limited(scorer: Scorer, trace: Trace, case: Case | None, limiter: Limiter | None) -> Score:
    """`run_scorer` under the run's time limit (see `time_limit.py`)."""
    if limiter is None:
        return run_scorer(scorer, trace, case)
    try:
        return limiter.call(lambda: run_scorer(scorer, trace, case))
    except ScorerTimeout:
        return timed_out(scorer, limiter.seconds)


async def _arun_limited(scorer: Scorer, trace: Trace, case: Case | None, limiter: Limiter | None) -> Score:
    """`arun_scorer` under the run's time limit; judges are bounded by the judge's own timeout."""
    if limiter is None or scorer.uses_judge:
        return await arun_scorer(scorer, trace, case)
    try:
        return await asyncio.wait_for(arun_scorer(scorer, trace, case), limiter.seconds)
    except TimeoutError:  # raised by `wait_for`: the scorer's own errors are results of `arun_scorer`
        return timed_out(scorer, limiter.seconds)


def timed_out(scorer: Scorer, seconds: float) -> Score:
    """The result of a scorer (or its columnar form) stopped at the time limit."""
    return Score(
        scorer=scorer.name,
        passed=False,
        reason=timeout_message(scorer.name, seconds),
        error="ScorerTimeout",
        details={"time_limit_seconds": seconds},
    )


async def score_trace(trace: Trace, case: Case | None, scorers: Sequence[Scorer], stats: RunStats) -> SampleResult:
    """Score one trace with `scorers` (the case passed to each as context)."""
    scores = [score_result(s) for s in await _run_scorers(trace, case, scorers)]
    status = sample_status(scores)
    usage = trace.usage
    return SampleResult(
        trace_id=trace.trace_id,
        trace_ids=[trace.trace_id],
        root_span_ids=[trace.root_span_id],
        conversation_id=trace.conversation_id,
        status=status,
        passed=status_passed(status),
        scores=scores,
        input=trace.input,
        output=trace.final_answer(),
        error=trace.error,
        start_time=trace.start_time,
        duration_seconds=trace.duration_seconds,
        usage=TokenUsage(input_tokens=usage.input_tokens or 0, output_tokens=usage.output_tokens or 0),
        cost_usd=stats.add(trace),
    )


async def score_conversation(
    traces: Sequence[Trace], case: Case, turn_scorers: Sequence[Sequence[Scorer]], stats: RunStats
) -> SampleResult:
    """Score a conversation against a multi-turn case: turn i with the i-th trace (start-time order)."""
    turns = case.turns or []
    jobs = []
    for index, turn in enumerate(turns):
        if index < len(traces):
            update = {"input": turn.input, "expected_output": turn.expected_output, "expect": turn.expect}
            jobs.append(_run_scorers(traces[index], case.model_copy(update=update), turn_scorers[index]))
    scores: list[ScoreResult] = []
    for index, found in enumerate(await asyncio.gather(*jobs), start=1):
        scores += [score_result(s, turn=index) for s in found]
    for index in range(len(traces), len(turns)):
        reason = f"the conversation has {len(traces)} trace(s); no trace for turn {index + 1} ({turns[index].input!r})"
        scores.append(ScoreResult(scorer="turns", passed=False, reason=reason, turn=index + 1))
    used = traces[: len(turns)]
    costs = [stats.add(trace) for trace in used]
    status = sample_status(scores)
    return SampleResult(
        trace_id=used[0].trace_id,
        trace_ids=[t.trace_id for t in used],
        root_span_ids=[t.root_span_id for t in used],
        conversation_id=used[0].conversation_id,
        status=status,
        passed=status_passed(status),
        scores=scores,
        input=used[0].input,
        output=used[-1].final_answer(),
        error=next((t.error for t in used if t.error), None),
        start_time=used[0].start_time,
        duration_seconds=_span_seconds(used),
        usage=TokenUsage(
            input_tokens=sum(t.usage.input_tokens or 0 for t in used),
            output_tokens=sum(t.usage.output_tokens or 0 for t in used),
        ),
        cost_usd=None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
    )


def _span_seconds(traces: Sequence[Trace]) -> float | None:
    starts = [t.start_time for t in traces if t.start_time is not None]
    ends = [t.end_time for t in traces if t.end_time is not None]
    return (max(ends) - min(starts)).total_seconds() if starts and ends else None


def is_async_scorer(scorer: Scorer) -> bool:
    """Whether the scorer is async (overrides `Scorer.ascore`): the judges, and custom scorers doing I/O."""
    return type(scorer).ascore is not Scorer.ascore


@asynccontextmanager
async def judge_session_for(
    scorers: Sequence[Scorer], overrides: dict[str, Any]
) -> AsyncIterator[Callable[[], dict[str, Any] | None]]:
    """Open one judge session when a judge is among `scorers`; yields a getter of its stats.

    Without judges nothing is opened (no judge settings are needed) and the stats are `None`;
    other async scorers (custom ones doing their own I/O) run concurrently without a session.
    """
    if not any(s.uses_judge for s in scorers):
        yield lambda: None
        return
    # Imported here: the judge pulls in the HTTP client, which rule-only scoring never needs.
    from evaltrace.evaluators.scoring.judge.session import judge_session
    from evaltrace.evaluators.scoring.judge.settings import JudgeSettings

    settings = JudgeSettings.from_env(**overrides)
    async with judge_session(settings) as session:
        yield lambda: _stats_dict(session.stats())


def check_judge_setup(scorers: Iterable[Scorer], overrides: dict[str, Any]) -> None:
    """Raise the setup error `judge_session_for` would meet, before any work is done.

    `evaltrace run` asks this before its agent runs: a judge without a model or base URL is then
    a one-line error at once, not after minutes of agent calls whose recording is left unscored.

    Raises:
        JudgeSetupError: a judge is among `scorers` and its settings cannot work.
    """
    if not any(s.uses_judge for s in scorers):
        return
    from evaltrace.evaluators.scoring.judge.settings import JudgeSettings

    JudgeSettings.from_env(**overrides).require_usable()


def _stats_dict(stats: Any) -> dict[str, Any] | None:
    if stats is None:
        return None
    if hasattr(stats, "model_dump"):
        dumped: dict[str, Any] = stats.model_dump(mode="json")
        return dumped
    return dict(stats)
