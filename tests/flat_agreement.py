"""The flat GenAI row builder checked against the converter, its reference.

`_flat_columns.flat_row` makes a flat trace's traces-table row straight from its spans (a first
scoring's table, or a `--no-cache` run's). Wherever it builds, its row must be the row the encoder
writes for the converter's trace.
"""

from __future__ import annotations

from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._flat_columns import flat_row
from evaltrace.collector.traces._tree import build_tree
from evaltrace.collector.traces.rebuild import _convert_tree
from evaltrace.collector.traces.table import TableEncoder, to_table


def flat_agrees(spans: list[Span]) -> bool:
    """Assert the builder gives the converter's row where it gives one; whether it did."""
    row = flat_row(spans)
    if row is None:
        return False
    encoder = TableEncoder()
    encoder.add_row(row.append)
    assert encoder.take().to_pylist() == to_table(_convert_tree(build_tree(spans), False)).to_pylist()
    return True
