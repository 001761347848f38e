"""A custom scorer for the sample travel agent: the answer names every city it looked up.

Load it for a run with `--plugin samples/scorers.py` and name it in a spec like a built-in scorer
(globally under `scorers:`, or per case under `expect:`):

    evaltrace score samples/runs --spec samples/evals-custom.yaml --plugin samples/scorers.py

An installed package offers its scorers to every run instead, with an entry point:

    [project.entry-points."evaltrace.scorers"]
    cities_named = "my_package.scorers:CitiesNamed"
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from evaltrace.collector import Trace
from evaltrace.evaluators import Score, Scorer, register


@register
class CitiesNamed(Scorer):
    """The answer names every place the agent looked up (an argument of its tool calls)."""

    name: ClassVar[str] = "cities_named"
    reads_histories: ClassVar[bool] = False  # reads the answer and the tool calls: prompts may stay unread

    argument: str = "city"
    """The tool-call argument that holds a place name."""

    def score(self, trace: Trace, case: Any | None = None) -> Score:
        """Look for each looked-up place in the final answer, as a whole word, ignoring case."""
        places = [
            value
            for call in trace.tool_calls
            if isinstance(call.arguments, dict) and isinstance(value := call.arguments.get(self.argument), str)
        ]
        places = list(dict.fromkeys(places))  # once each, in the order looked up
        if not places:
            return self.result(None, reason=f"No tool call has a {self.argument!r} argument.")
        answer = trace.output or ""
        missing = [p for p in places if not re.search(rf"(?<!\w){re.escape(p)}(?!\w)", answer, re.IGNORECASE)]
        value = 1 - len(missing) / len(places)
        if missing:
            return self.result(False, value, f"The answer does not name {', '.join(missing)}.", missing=missing)
        return self.result(True, value, f"The answer names {', '.join(places)}.")
