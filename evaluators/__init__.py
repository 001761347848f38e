"""Score stored traces with rule and judge scorers, and gate on the result.

The rooms: `spec/` (the spec file), `scorers/` (the scorer interface, registry and built-in
families), `judge/` (the LLM judge), `engine/` (traces to cases, scoring, repeats, the gate),
`report/` (the report and its writers) and `runner/` (running an agent; the pytest plugin's parts).

The names below are the package's public ones, listed once: type checkers read the
`TYPE_CHECKING` imports, and at run time `lazy_package` turns the same lines into `__all__` and a
PEP 562 `__getattr__` that imports each module on first use. Importing the records or the pytest
plugin must not pay for pyarrow and the OTel SDK until something actually reads or writes spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaltrace.collector.lazy import lazy_package

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoredRun as ScoredRun
    from evaltrace.evaluators.engine.scoring import ScoreOptions as ScoreOptions
    from evaltrace.evaluators.engine.scoring import ascore as ascore
    from evaltrace.evaluators.engine.scoring import score as score
    from evaltrace.evaluators.results.report.json_writer import ReportWriter as ReportWriter
    from evaltrace.evaluators.results.report.json_writer import write_report as write_report
    from evaltrace.evaluators.results.report.model import EntryResult as EntryResult
    from evaltrace.evaluators.results.report.model import Report as Report
    from evaltrace.evaluators.results.report.model import ScoreResult as ScoreResult
    from evaltrace.evaluators.results.report.model import evaluate_gate as evaluate_gate
    from evaltrace.evaluators.runner.agent import CallRecord as CallRecord
    from evaltrace.evaluators.runner.agent import RunOptions as RunOptions
    from evaltrace.evaluators.runner.agent import RunResult as RunResult
    from evaltrace.evaluators.runner.agent import load_agent as load_agent
    from evaltrace.evaluators.runner.agent import run_agent as run_agent
    from evaltrace.evaluators.scoring.scorers.base import Score as Score
    from evaltrace.evaluators.scoring.scorers.base import Scorer as Scorer
    from evaltrace.evaluators.scoring.scorers.base import run_scorer as run_scorer
    from evaltrace.evaluators.scoring.scorers.registry import create_scorer as create_scorer
    from evaltrace.evaluators.scoring.scorers.registry import register as register
    from evaltrace.evaluators.scoring.scorers.registry import scorer_names as scorer_names
    from evaltrace.evaluators.scoring.spec.loader import LoadedSpec as LoadedSpec
    from evaltrace.evaluators.scoring.spec.loader import load_spec as load_spec
    from evaltrace.evaluators.scoring.spec.model import Case as Case
    from evaltrace.evaluators.scoring.spec.model import Expect as Expect
    from evaltrace.evaluators.scoring.spec.model import RepeatPolicy as RepeatPolicy
    from evaltrace.evaluators.scoring.spec.model import Spec as Spec
    from evaltrace.evaluators.scoring.spec.model import Turn as Turn

__getattr__, __dir__, __all__ = lazy_package(__name__)
