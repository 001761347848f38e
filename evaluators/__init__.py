"""Score stored traces with rule and judge scorers, and gate on the result.

Names are imported on first use (PEP 562): importing the records or the pytest plugin must not
pay for pyarrow and the OTel SDK until something actually reads or writes spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaltrace.collector._lazy import lazy_exports

if TYPE_CHECKING:
    from evaltrace.evaluators.engine.scoring import ScoreOptions, score_paths_to, score_traces, score_traces_to
    from evaltrace.evaluators.report.model import (
        EntryResult,
        Report,
        ReportWriter,
        ScoreResult,
        evaluate_gate,
        write_report,
    )
    from evaltrace.evaluators.runner.agent import CallRecord, RunOptions, RunResult, load_agent, run_agent
    from evaltrace.evaluators.scorers.base import Score, Scorer, run_scorer
    from evaltrace.evaluators.scorers.registry import create_scorer, register, scorer_names
    from evaltrace.evaluators.spec.loader import LoadedSpec, load_spec
    from evaltrace.evaluators.spec.model import Case, Expect, RepeatPolicy, Spec, Turn

_EXPORTS: dict[str, str] = {
    "CallRecord": "evaltrace.evaluators.runner.agent",
    "Case": "evaltrace.evaluators.spec.model",
    "EntryResult": "evaltrace.evaluators.report.model",
    "Expect": "evaltrace.evaluators.spec.model",
    "LoadedSpec": "evaltrace.evaluators.spec.loader",
    "RepeatPolicy": "evaltrace.evaluators.spec.model",
    "Report": "evaltrace.evaluators.report.model",
    "ReportWriter": "evaltrace.evaluators.report.model",
    "RunOptions": "evaltrace.evaluators.runner.agent",
    "RunResult": "evaltrace.evaluators.runner.agent",
    "Score": "evaltrace.evaluators.scorers.base",
    "ScoreOptions": "evaltrace.evaluators.engine.scoring",
    "ScoreResult": "evaltrace.evaluators.report.model",
    "Scorer": "evaltrace.evaluators.scorers.base",
    "Spec": "evaltrace.evaluators.spec.model",
    "Turn": "evaltrace.evaluators.spec.model",
    "create_scorer": "evaltrace.evaluators.scorers.registry",
    "evaluate_gate": "evaltrace.evaluators.report.model",
    "load_agent": "evaltrace.evaluators.runner.agent",
    "load_spec": "evaltrace.evaluators.spec.loader",
    "register": "evaltrace.evaluators.scorers.registry",
    "run_agent": "evaltrace.evaluators.runner.agent",
    "run_scorer": "evaltrace.evaluators.scorers.base",
    "score_paths_to": "evaltrace.evaluators.engine.scoring",
    "score_traces": "evaltrace.evaluators.engine.scoring",
    "score_traces_to": "evaltrace.evaluators.engine.scoring",
    "scorer_names": "evaltrace.evaluators.scorers.registry",
    "write_report": "evaltrace.evaluators.report.model",
}

__all__ = [
    "CallRecord",
    "Case",
    "EntryResult",
    "Expect",
    "LoadedSpec",
    "RepeatPolicy",
    "Report",
    "ReportWriter",
    "RunOptions",
    "RunResult",
    "Score",
    "ScoreOptions",
    "ScoreResult",
    "Scorer",
    "Spec",
    "Turn",
    "create_scorer",
    "evaluate_gate",
    "load_agent",
    "load_spec",
    "register",
    "run_agent",
    "run_scorer",
    "score_paths_to",
    "score_traces",
    "score_traces_to",
    "scorer_names",
    "write_report",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
