from __future__ import annotations

import json

from cli_process import evaltrace
from rule_scorer_names import RULE_SCORERS


def test_scorers_json_lists_every_rule_scorer_with_options() -> None:
    result = evaltrace("scorers", "--json")
    assert result.returncode == 0, result.stderr
    listing = {s["name"]: s for s in json.loads(result.stdout)["scorers"]}
    assert set(RULE_SCORERS) <= set(listing)
    trajectory = {o["name"]: o for o in listing["trajectory"]["options"]}
    assert listing["trajectory"]["kind"] == "rule"
    assert (
        trajectory["mode"]["type"]
        == '"strict" | "in_order" | "any_order" | "superset" | "subset" | "precision" | "recall"'
    )
    assert trajectory["mode"]["default"] == "in_order"
    assert trajectory["threshold"] == {
        "name": "threshold",
        "type": "float",
        "required": False,
        "default": 1.0,
        "description": "Minimum value to pass in the graded modes (in_order, any_order, precision, recall).",
    }
    assert trajectory["arguments"]["default"] == {"mode": "subset", "trim": False, "casefold": False, "per_tool": {}}
    assert trajectory["expected"]["type"] == "list[ExpectedCall] | null"
    tool_errors = {o["name"]: o for o in listing["tool_errors"]["options"]}
    assert tool_errors["max_errors"]["default"] == 0
    assert listing["outcome"]["summary"] == "The run ended the expected way: success, failure, error or timeout."


def test_scorers_text_listing() -> None:
    result = evaltrace("scorers")
    assert result.returncode == 0, result.stderr
    assert "tool_efficiency (rule): No redundant tool calls" in result.stdout
    assert (
        "  max_redundant: int (default 0)\n      Largest number of redundant calls that still passes." in result.stdout
    )
    assert '  unknown_model: "skip" | "fail" (default "skip")' in result.stdout
