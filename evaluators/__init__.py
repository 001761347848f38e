"""Score stored traces with rule and judge scorers, and gate on the result.

Names are imported on first use (PEP 562): importing the records or the pytest plugin must not
pay for pyarrow and the OTel SDK until something actually reads or writes spans.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaltrace.collector._lazy import lazy_exports

if TYPE_CHECKING:
    from evaltrace.evaluators.base import Score, Scorer, run_scorer
    from evaltrace.evaluators.engine import ScoreOptions, score_paths_to, score_traces, score_traces_to
    from evaltrace.evaluators.registry import create_scorer, register, scorer_names
    from evaltrace.evaluators.report import EntryResult, Report, ReportWriter, ScoreResult, evaluate_gate, write_report
    from evaltrace.evaluators.runner import CallRecord, RunOptions, RunResult, load_agent, run_agent
    from evaltrace.evaluators.spec import Case, Expect, RepeatPolicy, Spec, Turn
    from evaltrace.evaluators.spec_loader import LoadedSpec, load_spec

_EXPORTS: dict[str, str] = {
    "CallRecord": "evaltrace.evaluators.runner",
    "Case": "evaltrace.evaluators.spec",
    "EntryResult": "evaltrace.evaluators.report",
    "Expect": "evaltrace.evaluators.spec",
    "LoadedSpec": "evaltrace.evaluators.spec_loader",
    "RepeatPolicy": "evaltrace.evaluators.spec",
    "Report": "evaltrace.evaluators.report",
    "ReportWriter": "evaltrace.evaluators.report",
    "RunOptions": "evaltrace.evaluators.runner",
    "RunResult": "evaltrace.evaluators.runner",
    "Score": "evaltrace.evaluators.base",
    "ScoreOptions": "evaltrace.evaluators.engine",
    "ScoreResult": "evaltrace.evaluators.report",
    "Scorer": "evaltrace.evaluators.base",
    "Spec": "evaltrace.evaluators.spec",
    "Turn": "evaltrace.evaluators.spec",
    "create_scorer": "evaltrace.evaluators.registry",
    "evaluate_gate": "evaltrace.evaluators.report",
    "load_agent": "evaltrace.evaluators.runner",
    "load_spec": "evaltrace.evaluators.spec_loader",
    "register": "evaltrace.evaluators.registry",
    "run_agent": "evaltrace.evaluators.runner",
    "run_scorer": "evaltrace.evaluators.base",
    "score_paths_to": "evaltrace.evaluators.engine",
    "score_traces": "evaltrace.evaluators.engine",
    "score_traces_to": "evaltrace.evaluators.engine",
    "scorer_names": "evaltrace.evaluators.registry",
    "write_report": "evaltrace.evaluators.report",
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
