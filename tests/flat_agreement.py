"""The flat GenAI row builder and shortcut checked against the converter, their reference.

`_flat_columns.flat_row` makes a flat trace's traces-table row straight from its spans (a first
scoring's table); `_flat_genai.flat_trace` builds its `Trace` (the per-trace path). Wherever either
builds, its row must be the row the encoder writes for the converter's trace.
"""

from __future__ import annotations

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._flat_columns import flat_row
from evaltrace.collector.traces._flat_genai import flat_trace
from evaltrace.collector.traces._tree import build_tree
from evaltrace.collector.traces.rebuild import _convert_tree
from evaltrace.collector.traces.table import TableEncoder, to_table


def flat_agrees(spans: list[Span]) -> bool:
    """Assert the builder and the shortcut give the converter's rows where they give one; whether the builder did."""
    reference = _convert_tree(build_tree(spans), False)
    rows = to_table(reference).to_pylist()
    flat = flat_trace(spans)
    if flat is not None:
        assert [flat] == reference
        assert to_table([flat]).to_pylist() == rows
    row = flat_row(spans)
    assert (row is None) == (flat is None), "the row builder and the shortcut take different traces"
    if row is None:
        return False
    encoder = TableEncoder()
    encoder.add_row(row.append)
    assert encoder.take().to_pylist() == rows
    return True
