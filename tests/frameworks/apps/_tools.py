"""The tools every framework app offers, and the log of what they really did.

Imported by the apps in this folder (a script's folder is first on its `sys.path`). Each call is
appended to the JSON-lines file named by `TOOL_LOG`, so the test knows the truth to compare the
rebuilt trace with: which tool ran, with which arguments, and what it returned or raised.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

PROMPTS = {
    "sequential": "What's the weather in Paris and in Lyon?",
    "parallel": "What's the weather in Paris and in Rome?",
    "failing_tool": "Look up the code X1.",
    "no_tool": "Say hello.",
}
"""The user's message of each scenario; the scripted model decides which tools are called."""


def _log(name: str, arguments: dict[str, Any], result: str | None, error: str | None) -> None:
    entry = {"name": name, "arguments": arguments, "result": result, "error": error}
    with open(os.environ["TOOL_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")


def get_weather(city: str) -> str:
    """Current weather in a city."""
    result = f"18C and sunny in {city}"
    _log("get_weather", {"city": city}, result, None)
    return result


def lookup(code: str) -> str:
    """Look a code up (always fails: the failing-tool scenario)."""
    error = f"unknown code {code}"
    _log("lookup", {"code": code}, None, error)
    raise KeyError(error)


def scenario() -> tuple[str, str]:
    """The scenario named on the command line and its prompt."""
    name = sys.argv[1]
    return name, PROMPTS[name]
