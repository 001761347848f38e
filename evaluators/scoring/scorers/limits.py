"""Resource limits: token usage, latency and estimated cost.

`usage` sets min/max bounds on token metrics for the whole run (`total`) and per model
(`per_model`). Metrics: `input_tokens`, `output_tokens`, `total_tokens`, `cache_read_tokens`,
`reasoning_tokens` (with the short forms `input`, `output`, `total`, `cached`, `reasoning` and
Timbal's names such as `input_text_tokens`), and sums of them written with `+`
(`input+output`). A bound is `{min, max}` or a bare number meaning the max. A model's usage is
the sum over its model calls; a model name matches exactly or as a prefix followed by `-`
(`gpt-4.1` covers `gpt-4.1-2025-04-14`). A bound whose metric was not recorded, or a model
with no recorded call, fails a spec check with what is missing; used outside a spec such a bound
is reported and not checked, and with nothing checked the scorer does not apply.

`latency` bounds the run's wall time, each model call's and each tool call's. A spec check
fails when a bounded duration was not recorded (a limit per model call with no model call
recorded, a run without start or end); a per-tool limit for a tool not called checks nothing.

`cost` estimates USD from each model call's usage and a price table (`prices.DEFAULT_PRICES`
overlaid with the `prices` option). A call of a model with no price makes the estimate
incomplete: by default (`unknown_model: skip`) the priced calls are checked and the reason
names the skipped ones (with no call priced, a spec check fails and a default does not apply);
`unknown_model: fail` fails. With no model call recorded a spec check fails. In a spec, `cost`
needs `max_usd` or `unknown_model: fail`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Literal, NamedTuple, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evaltrace.collector.traces.records import Iteration, Trace, Usage
from evaltrace.evaluators.scoring._kernels import Bools, Ints, by_object, sums_within
from evaltrace.evaluators.scoring.columns import BatchCalls, RowCalls, columnar_form, columnar_forms
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer
from evaltrace.evaluators.scoring.scorers.prices import DEFAULT_PRICES, ModelPrice, call_cost, find_price
from evaltrace.evaluators.scoring.scorers.registry import register

_METRICS = {
    "input_tokens": ("input", "input_text_tokens", "prompt_tokens"),
    "output_tokens": ("output", "output_text_tokens", "completion_tokens"),
    "total_tokens": ("total",),
    "cache_read_tokens": ("cached", "input_cached_tokens", "cache_read"),
    "reasoning_tokens": ("reasoning", "output_reasoning_tokens"),
}
_METRIC_NAMES = {alias: canonical for canonical, aliases in _METRICS.items() for alias in (canonical, *aliases)}


class Limit(BaseModel):
    """Inclusive bounds on one metric; a bare number in config means `max`."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    min: float | None = None
    """Smallest allowed value."""
    max: float | None = None
    """Largest allowed value."""

    @model_validator(mode="before")
    @classmethod
    def _bare_number_is_max(cls, value: Any) -> Any:
        return {"max": value} if isinstance(value, int | float) and not isinstance(value, bool) else value

    @model_validator(mode="after")
    def _ordered(self) -> Limit:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min:g} is greater than max {self.max:g}")
        return self

    def violation(self, value: float) -> str | None:
        """Why `value` is out of bounds, or `None`."""
        if self.max is not None and value > self.max:
            return f"{value:g} > max {self.max:g}"
        if self.min is not None and value < self.min:
            return f"{value:g} < min {self.min:g}"
        return None


def metric_value(usage: Usage, metric: str) -> int | None:
    """The value of a metric expression such as `input+output` (`None` if a part was not recorded)."""
    total = 0
    for part in metric.split("+"):
        value = getattr(usage, _METRIC_NAMES[part.strip()])
        if value is None:
            return None
        total += value
    return total


def _check_metrics(limits: dict[str, Limit]) -> dict[str, Limit]:
    for metric in limits:
        for part in metric.split("+"):
            if part.strip() not in _METRIC_NAMES:
                choices = ", ".join(_METRICS)
                raise ValueError(
                    f"unknown usage metric {part.strip()!r} in {metric!r}; use {choices} or sums like input+output"
                )
    return limits


def model_matches(pattern: str, model: str | None) -> bool:
    """Whether a configured model name covers a recorded one (exact, or prefix then `-`)."""
    if model is None:
        return False
    p, m = pattern.lower(), model.rsplit("/", 1)[-1].lower()
    return m == p or m.startswith(p + "-")


@register
class UsageLimits(Scorer):
    """Token usage within bounds, for the whole run and per model."""

    name: ClassVar[str] = "usage"
    reads_histories: ClassVar[bool] = False

    total: dict[str, Limit] = Field(default_factory=dict)
    """Bounds on the run's usage by metric, e.g. {total_tokens: {max: 20000}, input+output: 15000}."""
    per_model: dict[str, dict[str, Limit]] = Field(default_factory=dict)
    """Bounds per model name, e.g. {gpt-4.1: {input_tokens: {min: 100, max: 5000}}}."""

    @field_validator("total")
    @classmethod
    def _known_total(cls, value: dict[str, Limit]) -> dict[str, Limit]:
        return _check_metrics(value)

    @field_validator("per_model")
    @classmethod
    def _known_per_model(cls, value: dict[str, dict[str, Limit]]) -> dict[str, dict[str, Limit]]:
        for limits in value.values():
            _check_metrics(limits)
        return value

    def configuration_problem(self) -> str | None:
        """No bound configured."""
        return None if self.total or self.per_model else "no usage limit is configured: give total or per_model"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Evaluate every bound that can be evaluated (a spec check fails on those that cannot)."""
        if not self.total and not self.per_model:
            return self.result(None, reason="No usage limit is configured.")
        return self.judged(trace.usage, trace.iterations)

    def judged(self, usage: Usage, iterations: list[Iteration]) -> Score:
        """The verdict on a run's usage and its model calls (read only for `per_model` bounds)."""
        failures: list[str] = []
        unknown: list[str] = []
        checked = self._check("run", usage, self.total, failures, unknown)
        for model, limits in self.per_model.items():
            its = [it for it in iterations if model_matches(model, it.model)]
            if not its:
                unknown.append(f"{model}: no model call of this model was recorded")
                continue
            checked += self._check(model, Usage.combined(it.usage for it in its), limits, failures, unknown)
        if unknown and self.spec_check:  # a bound that cannot be evaluated fails a spec check
            failures += [f"{gap} (cannot be checked)" for gap in unknown]
            unknown = []
        skipped = f" Not checked: {'; '.join(unknown)}." if unknown else ""
        if not checked and not failures:
            return self.result(None, reason="No usage limit could be checked." + skipped, unknown=unknown)
        if failures:
            return self.result(False, None, "Usage out of bounds: " + "; ".join(failures) + "." + skipped)
        return self.result(True, None, f"All {checked} usage limits met." + skipped, unknown=unknown)

    @staticmethod
    def _check(scope: str, usage: Usage, limits: dict[str, Limit], failures: list[str], unknown: list[str]) -> int:
        checked = 0
        for metric, limit in limits.items():
            value = metric_value(usage, metric)
            if value is None:
                unknown.append(f"{scope} {metric}: not recorded")
                continue
            checked += 1
            problem = limit.violation(value)
            if problem:
                failures.append(f"{scope} {metric} {problem}")
        return checked


@register
class Latency(Scorer):
    """Wall time within bounds: the run, each model call, each tool call."""

    name: ClassVar[str] = "latency"
    reads_histories: ClassVar[bool] = False

    max_seconds: float | None = Field(default=None, gt=0)
    """Longest allowed run."""
    max_iteration_seconds: float | None = Field(default=None, gt=0)
    """Longest allowed model call."""
    max_tool_seconds: float | dict[str, float] | None = None
    """Longest allowed tool call: one number for every tool, or per tool name."""

    def configuration_problem(self) -> str | None:
        """No bound configured."""
        if (self.max_seconds, self.max_iteration_seconds, self.max_tool_seconds) != (None, None, None):
            return None
        return "no latency limit is configured: give max_seconds, max_iteration_seconds or max_tool_seconds"

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Compare the recorded durations with the bounds."""
        calls = [(call.name, call.duration_seconds) for call in trace.tool_calls]
        return self.judged(self._durations(trace.duration_seconds, trace.iterations, calls), not trace.iterations)

    def judged(self, checks: list[tuple[str, float | None, float]], no_model_call: bool) -> Score:
        """The verdict on `(label, seconds or None: not recorded, limit)` checks."""
        gaps = [f"{label}: duration not recorded" for label, d, _ in checks if d is None]
        if self.max_iteration_seconds is not None and no_model_call:
            gaps.append("max_iteration_seconds: no model call was recorded (is the model client instrumented?)")
        if self.spec_check and gaps:
            return self.result(False, None, "Cannot check latency: " + "; ".join(gaps[:5]) + ".", unrecorded=True)
        if not checks:
            if self.spec_check:  # only per-tool limits, for tools the agent did not call
                return self.result(True, None, "No call of a tool with a latency limit was made.")
            return self.result(None, reason="No latency limit is configured.")
        measured = [(label, d, lim) for label, d, lim in checks if d is not None]
        if not measured:
            return self.result(None, reason="The durations to check were not recorded.")
        over = [f"{label} took {d:.2f}s > max {lim:g}s" for label, d, lim in measured if d > lim]
        if over:
            return self.result(False, None, "Too slow: " + "; ".join(over[:5]) + ".")
        return self.result(True, None, f"All {len(measured)} measured durations within limits.")

    def _durations(
        self, run: float | None, iterations: list[Iteration], calls: Iterable[tuple[str, float | None]]
    ) -> list[tuple[str, float | None, float]]:
        """The bounded durations: the run's, the model calls' and the `(name, seconds)` tool calls'."""
        checks: list[tuple[str, float | None, float]] = []
        if self.max_seconds is not None:
            checks.append(("the run", run, self.max_seconds))
        if self.max_iteration_seconds is not None:
            per_call = self.max_iteration_seconds
            checks += [(f"model call {it.index}", it.duration_seconds, per_call) for it in iterations]
        for i, (name, seconds) in enumerate(calls):
            tool_limit = self.max_tool_seconds
            if isinstance(tool_limit, dict):
                tool_limit = tool_limit.get(name)
            if tool_limit is not None:
                checks.append((f"call #{i + 1} {name}", seconds, tool_limit))
        return checks


@register
class Cost(Scorer):
    """Estimated USD cost of the run's model calls (usage x price table) within `max_usd`."""

    name: ClassVar[str] = "cost"
    version: ClassVar[int] = 2
    """2: `unknown_model: skip` checks the priced calls against max_usd instead of not applying."""
    reads_histories: ClassVar[bool] = False

    max_usd: float | None = Field(default=None, ge=0)
    """Most the run may cost; without it the estimate is reported and the scorer does not apply."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Prices per model (USD per million tokens), overriding or extending the built-in estimates."""
    unknown_model: Literal["skip", "fail"] = "skip"
    """What a model call without a known price does: skip (not applicable) or fail."""

    def configuration_problem(self) -> str | None:
        """Nothing to check."""
        if self.max_usd is None and self.unknown_model == "skip":
            return "no cost limit is configured: give max_usd (or unknown_model: fail)"
        return None

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Price every model call and compare the total."""
        if not trace.iterations:
            why = "No model calls were recorded, so there is no cost to estimate (is the model client instrumented?)."
            return self.missing(why)
        estimate = estimate_cost(trace, self.prices)
        return self._verdict(estimate.usd, estimate.unpriced, len(trace.iterations))

    def _verdict(self, usd: float, unpriced: list[str], calls: int) -> Score:
        est = f"estimated ${usd:.4f}"
        gaps = f" without {len(unpriced)} unpriced call(s): {', '.join(unpriced[:3])}" if unpriced else ""
        if self.max_usd is not None and usd > self.max_usd:
            return self.result(False, None, f"Cost {est}{gaps} exceeds max ${self.max_usd:g}.", usd=usd)
        if unpriced and self.unknown_model == "fail":
            return self.result(False, None, f"Cost {est}{gaps}; add their prices under `prices`.", usd=usd)
        if unpriced and (self.max_usd is None or len(unpriced) == calls):
            return self.missing(f"Cost {est}{gaps}; add their prices under `prices` to check it.", usd=usd)
        if self.max_usd is None:
            if self.spec_check:  # `unknown_model: fail` alone: every call was priced
                return self.result(True, None, f"Cost {est}; every model call was priced.", usd=usd)
            return self.result(None, reason=f"Cost {est} (no max_usd set).", usd=usd)
        return self.result(True, None, f"Cost {est}{gaps} within max ${self.max_usd:g}.", usd=usd)


class CostEstimate(NamedTuple):
    """The estimated cost of a run's model calls."""

    usd: float
    """USD of the calls that could be priced."""
    unpriced: list[str]
    """The calls that could not be priced (unknown model, or usage not recorded)."""


def estimate_cost(trace: Trace, prices: Mapping[str, ModelPrice] | None = None) -> CostEstimate:
    """Estimate a run's model cost from its usage and a price table.

    Args:
        trace: The run; each model call is priced by its own model (or the run's only model).
        prices: Prices overriding or extending `prices.DEFAULT_PRICES`.

    Returns:
        The estimate and the calls it leaves out.
    """
    fallback = trace.models[0] if len(trace.models) == 1 else None
    return price_calls(((it.model, it.usage, it.index) for it in trace.iterations), fallback, prices)


def price_calls(
    calls: Iterable[tuple[str | None, Usage, int]], fallback: str | None, prices: Mapping[str, ModelPrice] | None
) -> CostEstimate:
    """`estimate_cost` of model calls given as `(model, usage, index)`; `fallback`: the run's only model."""
    table = {**DEFAULT_PRICES, **(prices or {})}
    usd, unpriced = 0.0, []
    found: dict[str, ModelPrice | None] = {}  # a run calls few models: look each up once
    for recorded, usage, index in calls:
        model = recorded or fallback
        price = None
        if model:
            price = found[model] if model in found else found.setdefault(model, find_price(model, table))
        if price is None or (usage.input_tokens is None and usage.output_tokens is None):
            unpriced.append(f"model call {index} ({model or 'model not recorded'})")
            continue
        usd += call_cost(usage, price)
    return CostEstimate(usd, unpriced)


# The columnar forms (see `columns.py`): a sure pass with the reference's exact `Score`, else `None`.
# `usage`: bounds on the whole run only (`total`; per-model bounds need the model calls, left to the
# reference), every metric recorded in the row's `usage` column and within its bounds. `latency`:
# the run's and the calls' durations from the table's microsecond timestamps, each within its
# bound. `cost`: every model call priced (`price_calls`, the reference's), the sum within `max_usd`.


def usage_forms(scorers: list[UsageLimits], batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """Per row (with its scorer), the passing `Score` of `usage` when every run-wide bound is recorded and met.

    By each scorer's rows at once: the rows within every bound (`_within`) share the pass judged on the
    first of them (it names no value); the others are judged row by row.
    """
    at, found, usages = np.asarray(rows, np.int64), np.full(len(rows), None, object), batch.column("usage")
    for scorer, places in by_object(scorers):
        if scorer.per_model or not scorer.total:
            continue
        passing, sure = batch.memo(scorer, "passing", run=True), _within(scorer, batch, at[places])  # by reason
        for k in [*places[sure][:1].tolist(), *places[~sure].tolist()]:
            score = scorer.judged(Usage.model_validate(usages[rows[k]]), [])  # the row's values, as the trace's
            found[k] = passing.setdefault(score.reason, score) if score.passed else None
        found[places[sure]] = found[places[sure][0]] if sure.any() else None
    return cast("list[Score | None]", found.tolist())


def _within(scorer: UsageLimits, batch: BatchCalls, tops: Ints) -> Bools:
    """Per row of `tops`: whether each bound's metric (`metric_value`) is recorded and within it."""
    bounds = [
        ([_METRIC_NAMES[part.strip()] for part in metric.split("+")], limit.min, limit.max)
        for metric, limit in scorer.total.items()
    ]
    return sums_within(batch.array("usage"), tops, bounds)


usage_form = columnar_forms(UsageLimits, usage_forms)


@columnar_form(Latency)
def latency_form(scorer: Latency, row: RowCalls) -> Score | None:
    """The passing `Score` of `latency` when every measured duration is within its bound, else `None`.

    `max_iteration_seconds` is left to the reference; `micros / 1_000_000` is `timedelta.total_seconds()`'s float.
    """
    if scorer.max_iteration_seconds is not None:
        return None
    micros, start = row.batch.call_micros, row.first_call
    run, calls = _seconds(row.batch.run_micros[row.index]), map(_seconds, micros[start : start + len(row.names)])
    found = scorer.judged(scorer._durations(run, [], zip(row.names, calls, strict=True)), False)
    return found if found.passed else None


def _seconds(micros: int | None) -> float | None:
    return None if micros is None else micros / 1_000_000


@columnar_form(Cost)
def cost_form(scorer: Cost, row: RowCalls) -> Score | None:
    """The passing `Score` of `cost` when the priced calls are within `max_usd` (or all priced), else `None`."""
    models = cast("list[str | None]", row.iteration_values("model"))
    if not models:
        return None
    run_models = cast("list[str]", row.value("models"))
    usages = cast("list[dict[str, int | None]]", row.iteration_values("usage"))
    indexes = cast("list[int]", row.iteration_values("index"))
    calls = zip(models, map(Usage.model_validate, usages), indexes, strict=True)
    usd, unpriced = price_calls(calls, run_models[0] if len(run_models) == 1 else None, scorer.prices)
    found = scorer._verdict(usd, unpriced, len(models))
    return found if found.passed else None
