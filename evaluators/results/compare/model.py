"""What `evaltrace compare` finds, as `--json` writes it: pass-rate rows, case changes, stat deltas, the verdict.

Every difference is NEW minus BASE. A row is the entries' outcome (`scorer` is `None`) or one
scorer's outcome per entry: an entry's scorer outcome fails when any of its results (any sample,
any turn) failed or errored, passes when one passed and none failed, and does not apply otherwise,
as the report's entry-level scores merge them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

COMPARISON_SCHEMA_VERSION = 1

MatchedBy = Literal["case_id", "trace_id"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RateRow(_Model):
    """The pass rates of one row in BASE and NEW, with the test of their difference."""

    scorer: str | None
    """`None`: the entries' outcome (what the gate counts)."""
    test: Literal["mcnemar-exact", "two-proportion-z"]
    paired: bool
    n_base: int
    """Outcomes counted in BASE (pairs, when paired)."""
    n_new: int
    base_rate: float | None
    new_rate: float | None
    delta: float | None
    p_value: float
    ci_low: float | None
    ci_high: float | None
    regressions: int = 0
    """Pairs that passed in BASE and failed in NEW (paired rows only)."""
    fixes: int = 0
    unchanged: int = 0
    significant_regression: bool = False
    """The rate fell and `p_value` < alpha."""


class CaseChange(_Model):
    """One case whose outcome (or one of whose scorers) went from passed to failed, or back."""

    key: str
    """The case id, or the trace id when matched by trace."""
    scorer: str | None
    """`None`: the entry's outcome changed."""
    reason: str | None = None
    """NEW's reason (recorded content: untrusted text)."""


class StatDelta(_Model):
    """One of the runs' statistics in BASE and NEW."""

    name: Literal["latency_p50_seconds", "latency_p95_seconds", "input_tokens", "output_tokens", "cost_usd"]
    base: float | None
    new: float | None
    delta: float | None
    relative: float | None
    """`delta / base`; `None` when either is missing or BASE is 0."""


class ScorerChange(_Model):
    """A scorer whose version or configuration differs between the two runs."""

    scorer: str
    base: list[str]
    """`v<version> <config hash>` of each configuration BASE used."""
    new: list[str]


class Comparison(_Model):
    """BASE against NEW."""

    schema_version: int = COMPARISON_SCHEMA_VERSION
    base: str
    new: str
    matched_by: MatchedBy
    alpha: float
    confidence_level: float
    """Of the intervals: 1 - alpha."""
    strict: bool
    rows: list[RateRow]
    regressions: list[CaseChange] = Field(default_factory=list)
    regressed_cases: list[str] = Field(default_factory=list)
    """The keys of the cases with a regression (their outcome or any scorer's), each once, in BASE's order."""
    fixes: list[CaseChange] = Field(default_factory=list)
    new_cases: list[str] = Field(default_factory=list)
    """In NEW only."""
    missing_cases: list[str] = Field(default_factory=list)
    """In BASE only."""
    stats: list[StatDelta] = Field(default_factory=list)
    changed_scorers: list[ScorerChange] = Field(default_factory=list)
    added_scorers: list[str] = Field(default_factory=list)
    removed_scorers: list[str] = Field(default_factory=list)
    regressed: bool
    """The verdict: a significant regression (or, with `strict`, any regressed case). A case can regress while
    this is false (not significant): `regressed_cases` says so, and no rendering then shows success."""
    verdict: str

    def to_json(self) -> str:
        """The comparison as indented JSON text."""
        return self.model_dump_json(indent=2) + "\n"
