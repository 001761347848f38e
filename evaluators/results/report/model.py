"""The scoring report: per-entry outcomes and the gate (the JSON file scripts read is `json_writer.py`'s).

Outcomes. A *sample* is one trace (or, for a multi-turn case, one conversation) scored by the
scorers that apply to it: it passes when at least one scorer passed and none failed; it fails
when any scorer failed or errored (an error never counts as a pass); it is *not applicable* when
every scorer returned `passed=None`. An *entry* is a spec case (or, without a spec, a trace); its
applicable samples decide it by the case's repeat rule (see `evaluators/scoring/spec/model.py`).
Nothing passes without evidence: an entry passes only when at least one check applied to it and
every applied check passed, so an entry no check applied to (a case with no check, or whose every
sample was not applicable) fails, its reason saying nothing applied. A case with too few matching
samples fails and is reported as missing.

The gate. Each entry contributes a value in [0, 1] to the pass rate: 1 or 0 under the `all`,
`majority` and `pass@k` rules (and for every single-sample entry), its sample pass rate under
`mean`, 0 when nothing applied. (Reports written before that rule may hold `not_applicable`
entries, which are left out of the pass rate; when no entry counts the gate fails.) The gate
passes when the pass rate is at least the confidence threshold (default 1.0: every entry must pass).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evaltrace.evaluators.scoring.spec.scorer_infos import ScorerInfo as ScorerInfo
from evaltrace.evaluators.scoring.spec.scorer_infos import ScorerList

REPORT_SCHEMA_VERSION = 1
# Pass rates are sums of fractions; a rounding error must not fail a gate sitting exactly at the threshold.
_EPSILON = 1e-9

SampleStatus = Literal["passed", "failed", "not_applicable"]
EntryStatus = Literal["passed", "failed", "missing", "not_applicable"]


class _ReportModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScoreResult(_ReportModel):
    """One scorer's verdict, as reported."""

    scorer: str
    passed: bool | None
    """`None` when the scorer does not apply."""
    value: float | None = None
    reason: str | None = None
    error: str | None = None
    """Set when the scorer failed to run (the entry then fails)."""
    turn: int | None = None
    """Turn number (from 1) in a multi-turn case."""
    details: dict[str, Any] | None = None


class ScorerCount(_ReportModel):
    """How one scorer's verdicts went over the scored traces (each sample, each turn), for the summary."""

    scorer: str
    passed: int = 0
    failed: int = 0
    """Failures and error results (an error fails its entry as a failure does)."""
    errors: int = 0
    """Of `failed`, the results where the scorer could not run (summaries list them apart)."""
    not_applied: int = 0
    """Verdicts "does not apply" (given only by reference-free defaults: a spec check always applies)."""
    unrecorded: int = 0
    """Verdicts, of any kind, that met evidence which was not recorded (content capture off, no root span)."""
    uninstrumented: int = 0
    """Of `unrecorded`, those on a trace holding nothing of the agent's (no model or tool call, input or
    output): what is missing is the client's instrumentation, not content capture."""


class TokenUsage(_ReportModel):
    """Token totals over model calls."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output."""
        return self.input_tokens + self.output_tokens


class SampleResult(_ReportModel):
    """One scored trace, or one scored conversation for a multi-turn case."""

    trace_id: str | None
    trace_ids: list[str] = Field(default_factory=list)
    root_span_ids: list[str | None] = Field(default_factory=list)
    """The root span of each trace in `trace_ids` (`None` if it has none): where a backend shows its scores."""
    conversation_id: str | None = None
    status: SampleStatus
    passed: bool | None
    scores: list[ScoreResult]
    input: str | None = None
    output: str | None = None
    error: str | None = None
    start_time: datetime | None = None
    duration_seconds: float | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float | None = None


class EntryResult(_ReportModel):
    """One entry: a spec case with its samples, or a trace when scoring without a spec."""

    case_id: str | None
    trace_id: str | None
    """The first sample's trace (`None` when the case is missing)."""
    passed: bool | None
    """`None` only in reports written before an entry nothing applied to failed."""
    status: EntryStatus
    pass_rate: float | None
    """What the entry contributes to the gate's pass rate (`None` when not applicable)."""
    rule: str | None = None
    reason: str | None = None
    scores: list[ScoreResult] = Field(default_factory=list)
    samples: list[SampleResult] = Field(default_factory=list)
    input: str | None = None
    output: str | None = None
    tier: str | None = None
    tags: list[str] = Field(default_factory=list)


class LatencyStats(_ReportModel):
    """Trace durations over the scored traces."""

    p50_seconds: float | None = None
    p95_seconds: float | None = None
    traces: int = 0


class CostStats(_ReportModel):
    """Estimated agent cost from the spec's `prices`."""

    estimated_usd: float | None = None
    """`None` when no model call could be priced."""
    unpriced_models: list[str] = Field(default_factory=list)


class UnmatchedTrace(_ReportModel):
    """A trace that matched no case (not scored)."""

    trace_id: str
    input: str | None = None


class Counts(_ReportModel):
    """How many entries ended how."""

    entries: int = 0
    passed: int = 0
    failed: int = 0
    missing: int = 0
    not_applicable: int = 0
    traces: int = 0
    """Traces read."""
    unmatched: int = 0


class ReportInputs(_ReportModel):
    """What was scored: the PATH arguments, the spec and the selection."""

    paths: list[str] = Field(default_factory=list)
    spec: str | None = None
    tiers: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    cases: list[str] = Field(default_factory=list)
    dropped_spans: int = 0
    """Spans the recording dropped on a full export queue, as the files' writers counted them."""
    unwritten_spans: int = 0
    """Spans the recording could not write (failed writes), as the files' writers counted them."""


class Gate(_ReportModel):
    """The gate's verdict."""

    passed: bool
    pass_rate: float | None
    confidence: float
    reason: str


class BaselineResult(_ReportModel):
    """`score --baseline REF`: this scoring compared with REF as `evaltrace compare` compares two runs."""

    ref: str
    alpha: float
    strict: bool
    regressed: bool
    """The comparison fails the gate: a significant regression, or with `strict` any regressed case."""
    regressed_cases: list[str] = Field(default_factory=list)
    """Cases that passed in REF and fail now (their outcome or a scorer's), each once."""
    verdict: str


class Report(_ReportModel):
    """Everything `evaltrace score` found; `--json` writes it."""

    schema_version: int = REPORT_SCHEMA_VERSION
    evaltrace_version: str
    created_at: datetime
    inputs: ReportInputs
    passed: bool
    """The gate."""
    pass_rate: float | None
    confidence: float
    gate_reason: str
    counts: Counts
    entries: list[EntryResult]
    scorers: ScorerList = Field(default_factory=ScorerList)
    """Each scorer that ran, once per (name, configuration hash): a list of `ScorerInfo` (see `ScorerList`)."""
    scorer_counts: list[ScorerCount] = Field(default_factory=list)
    """Per scorer, in the order first seen: verdicts passed, failed, not applied, and on unrecorded evidence."""
    latency: LatencyStats = Field(default_factory=LatencyStats)
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost: CostStats = Field(default_factory=CostStats)
    unmatched: list[UnmatchedTrace] = Field(default_factory=list)
    judge: dict[str, Any] | None = None
    """Judge requests, cache hits, tokens and cost, when judges ran."""
    baseline: BaselineResult | None = None
    """With `--baseline REF`: the comparison with REF (the command also fails when `baseline.regressed`)."""

    def to_json(self) -> str:
        """The report as indented JSON text."""
        return self.model_dump_json(indent=2) + "\n"

    def header_json(self) -> bytes:
        """`model_dump_json(exclude={"entries"})`, the scorer list copied from its rows' JSON (`ScorerList.json`)."""
        head = self.model_dump_json(include=_BEFORE_SCORERS).encode()
        tail = self.model_dump_json(include=_AFTER_SCORERS).encode()
        return head[:-1] + b',"scorers":' + self.scorers.json() + b"," + tail[1:]


_FIELDS = list(Report.model_fields)
_BEFORE_SCORERS = set(_FIELDS[: _FIELDS.index("scorers")]) - {"entries"}
_AFTER_SCORERS = set(_FIELDS[_FIELDS.index("scorers") + 1 :])


def evaluate_gate(entries: list[EntryResult], confidence: float) -> Gate:
    """Compare the entries' pass rate with `confidence`.

    Args:
        entries: the scored entries.
        confidence: minimum pass rate in [0, 1].

    Returns:
        The verdict; it fails when no entry is applicable (nothing was checked).
    """
    return gate_from_rates([e.pass_rate for e in entries if e.pass_rate is not None], confidence)


def gate_from_rates(rates: Sequence[float], confidence: float) -> Gate:
    """`evaluate_gate` from the applicable entries' pass rates, in entry order."""
    if not rates:
        reason = "no entry had a scorer that applies: nothing was checked"
        return Gate(passed=False, pass_rate=None, confidence=confidence, reason=reason)
    pass_rate = sum(rates) / len(rates)
    passed = pass_rate + _EPSILON >= confidence
    relation = ">=" if passed else "<"
    reason = f"pass rate {pass_rate:.1%} ({_tally(rates)}) {relation} confidence {confidence:.1%}"
    return Gate(passed=passed, pass_rate=pass_rate, confidence=confidence, reason=reason)


def _tally(rates: Sequence[float]) -> str:
    whole = sum(1 for rate in rates if rate == 1.0)
    if all(rate in (0.0, 1.0) for rate in rates):
        return f"{whole}/{len(rates)}"
    # Repeated cases under the `mean` rule count their share of passing samples, while an entry only
    # counts as passed when every sample passed: say so, or "0 passed" beside a passing gate puzzles.
    return f"mean of {len(rates)} entries' sample pass rates; {whole}/{len(rates)} passed in every sample"


def load_report(path: str | Path) -> Report:
    """Read a report written by `write_report` (for comparisons and tests)."""
    return Report.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
