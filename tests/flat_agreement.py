"""The flat GenAI shortcut checked against the converter, its reference (`collector/traces/_flat_genai.py`)."""

from __future__ import annotations

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._flat_genai import flat_trace
from evaltrace.collector.traces._tree import build_tree
from evaltrace.collector.traces.rebuild import _convert_tree
from evaltrace.collector.traces.table import to_table


def flat_agrees(spans: list[Span]) -> bool:
    """Assert the shortcut gives the converter's trace and table rows where it gives one; whether it did."""
    flat = flat_trace(spans)
    if flat is None:
        return False
    reference = _convert_tree(build_tree(spans), False)
    assert [flat] == reference
    assert to_table([flat]).to_pylist() == to_table(reference).to_pylist()
    return True
