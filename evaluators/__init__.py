"""Score stored traces with rule and judge scorers, and gate on the result."""

from evaltrace.evaluators.base import Score, Scorer, run_scorer
from evaltrace.evaluators.engine import ScoreOptions, score_traces
from evaltrace.evaluators.registry import create_scorer, register, scorer_names
from evaltrace.evaluators.report import EntryResult, Report, ScoreResult, evaluate_gate, write_report
from evaltrace.evaluators.runner import CallRecord, RunOptions, RunResult, load_agent, run_agent
from evaltrace.evaluators.spec import Case, Expect, RepeatPolicy, Spec, Turn
from evaltrace.evaluators.spec_loader import LoadedSpec, load_spec

__all__ = [
    "CallRecord",
    "Case",
    "EntryResult",
    "Expect",
    "LoadedSpec",
    "RepeatPolicy",
    "Report",
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
    "score_traces",
    "scorer_names",
    "write_report",
]
