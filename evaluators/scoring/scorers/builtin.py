"""Imports every module that registers built-in scorers."""

from evaltrace.evaluators.scoring.scorers import (  # noqa: F401 - imported for their @register side effects
    answer,
    calls,
    judges,
    limits,
    output,
    reliability,
    tools,
    trajectory,
)
