"""The built-in rule scorers, pinned: a scorer that disappears or is renamed fails the tests."""

RULE_SCORERS = [
    "tool_call_validity",
    "tool_correctness",
    "trajectory",
    "tool_errors",
    "tool_efficiency",
    "budget",
    "tool_name_reliability",
    "tool_description_reliability",
    "output",
    "steps",
    "outcome",
    "groundedness",
    "correctness",
    "completeness",
    "answer_quality",
    "usage",
    "latency",
    "cost",
]
