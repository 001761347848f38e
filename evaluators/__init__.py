"""Score stored traces with rule and judge scorers, and gate on the result."""

from evaltrace.evaluators.base import Score, Scorer, run_scorer
from evaltrace.evaluators.registry import create_scorer, register, scorer_names

__all__ = ["Score", "Scorer", "create_scorer", "register", "run_scorer", "scorer_names"]
