"""Evaluation groups of the pytest plugin: marker config, per-case results, the gate item, the summary."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

_EPSILON = 1e-9  # a mean of fractions may land a hair under a threshold it equals


class MarkerConfig(BaseModel):
    """The arguments of `@pytest.mark.evaltrace(confidence=..., repeat=...)`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    confidence: float = Field(default=1.0, ge=0, le=1)
    """Minimum pass rate of the group's cases."""
    repeat: int = Field(default=1, ge=1)
    """Runs of each case."""

    @classmethod
    def from_marker(cls, where: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> MarkerConfig:
        """Validate the marker's arguments (`confidence` may be given positionally).

        Raises:
            pytest.UsageError: naming the test and the bad argument.
        """
        if len(args) > 1:
            raise pytest.UsageError(f"{where}: @pytest.mark.evaltrace takes confidence positionally, nothing else")
        values = dict(kwargs)
        if args:
            values["confidence"] = args[0]
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise pytest.UsageError(f"{where}: @pytest.mark.evaltrace: {problems}") from None


@dataclass(frozen=True)
class CaseResult:
    """The runs of one case (one parametrized item)."""

    nodeid: str
    label: str
    passed_runs: int
    runs: int
    failures: list[str]

    @property
    def pass_rate(self) -> float:
        """Passed runs / runs."""
        return self.passed_runs / self.runs

    @property
    def passed(self) -> bool:
        """Every run passed."""
        return self.passed_runs == self.runs

    def describe(self) -> str:
        """One line: the case, its runs and its first failure."""
        status = "passed" if self.passed else "FAILED"
        first = f": {self.failures[0]}" if self.failures else ""
        return f"{status} {self.label} ({self.passed_runs}/{self.runs} runs){first}"


@dataclass(frozen=True)
class Verdict:
    """A group's outcome."""

    passed: bool
    pass_rate: float
    message: str


@dataclass
class EvalGroup:
    """The cases of one marked test function and their results."""

    key: str
    config: MarkerConfig
    case_ids: list[str] = field(default_factory=list)
    results: dict[str, CaseResult] = field(default_factory=dict)

    def record(self, nodeid: str, label: str, passed_runs: int, runs: int, failures: list[str]) -> CaseResult:
        """Store a case's runs."""
        result = CaseResult(nodeid=nodeid, label=label, passed_runs=passed_runs, runs=runs, failures=failures)
        self.results[nodeid] = result
        return result

    def verdict(self) -> Verdict:
        """The group's pass rate (mean of its cases' pass rates) against the confidence."""
        cases = list(self.results.values())
        rate = sum(c.pass_rate for c in cases) / len(cases) if cases else 0.0
        passed = bool(cases) and rate + _EPSILON >= self.config.confidence
        relation = ">=" if passed else "<"
        fully = sum(1 for c in cases if c.passed)
        message = (
            f"{self.key}: evaluation {'PASSED' if passed else 'FAILED'}: pass rate {rate:.1%} "
            f"({fully}/{len(cases)} cases passed every run) {relation} confidence {self.config.confidence:.1%}"
        )
        if self.config.repeat > 1:
            message += f", {self.config.repeat} runs per case"
        not_run = len(self.case_ids) - len(cases)
        if not_run:
            message += f"; {not_run} case(s) did not run here (skipped, errored, or run in another process)"
        return Verdict(passed=passed, pass_rate=rate, message=message)


class GateFailedError(Exception):
    """The group's pass rate is below its confidence."""


class GateItem(pytest.Item):
    """`<test>[evaltrace]`: passes or fails with its group's verdict; runs after the group's cases."""

    def __init__(self, *, group: EvalGroup, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group = group

    @classmethod
    def for_group(cls, anchor: pytest.Item, group: EvalGroup) -> GateItem:
        """The gate item of `group`, a sibling of its case item `anchor`."""
        name = f"{getattr(anchor, 'originalname', anchor.name)}[evaltrace]"
        parent = anchor.parent
        assert parent is not None  # a collected test item always has a parent collector
        item: GateItem = cls.from_parent(parent, name=name, group=group)
        return item

    def runtest(self) -> None:
        """Fail when the group's pass rate is below its confidence."""
        if not self.group.results:
            pytest.skip(f"{self.group.key}: no case of this evaluation ran")
        verdict = self.group.verdict()
        if not verdict.passed:
            failed = [c.describe() for c in self.group.results.values() if not c.passed]
            raise GateFailedError("\n".join([verdict.message, *(f"  {line}" for line in failed)]))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        """The verdict text, without a traceback."""
        if isinstance(excinfo.value, GateFailedError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        """Where the gate is reported: the test's file."""
        return self.path, None, self.name


def group_key(item: pytest.Item) -> str:
    """The id of an item's group: its test function's node id without parameters."""
    name = getattr(item, "originalname", item.name)
    parent = item.parent.nodeid if item.parent is not None else ""
    return f"{parent}::{name}" if parent else name


def render_summary(groups: Iterable[EvalGroup]) -> list[str]:
    """The terminal summary lines: each group's verdict, then each case."""
    lines: list[str] = []
    for group in groups:
        lines.append(group.verdict().message)
        lines += [f"  {case.describe()}" for case in group.results.values()]
    return lines
