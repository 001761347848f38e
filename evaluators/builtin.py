"""Imports every module that registers built-in scorers."""

from evaltrace.evaluators import (  # noqa: F401 - imported for their @register side effects
    judges,
    rules_answer,
    rules_calls,
    rules_limits,
    rules_output,
    rules_reliability,
    rules_tools,
    rules_trajectory,
)
