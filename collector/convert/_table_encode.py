"""The values of `Trace` records as the traces table holds them: JSON texts (`table.py` documents the columns).

`_table_columns.py` lays them out as the table's columns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final

from evaltrace.collector.convert.records import Trace

ChildRow = Callable[[Trace], int]
"""Numbers a nested agent's trace (the same trace, the same row) and queues it to be written."""


def to_json(value: Any) -> str | None:
    """JSON text of a record's `Any` value; `None` (not recorded) stays `None`.

    Raises:
        TypeError: `value` is not a JSON value.
    """
    if value is None:
        return None
    return _encode(value)


# One encoder for every value: `json.dumps` with options builds a new `JSONEncoder` on each call,
# a third of its cost on the small values a trace holds.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_Chunks = Callable[[Any, int], Iterable[str]]


def _encode(value: Any) -> str:
    """`_ENCODER.encode(value)`, with the C encoder made once rather than on each call (a third of its cost)."""
    if isinstance(value, str):
        return json.encoder.encode_basestring(value)
    return "".join(_iterencode(value, 0))


def _c_iterencode() -> _Chunks:
    """What `_ENCODER.iterencode(value, _one_shot=True)` makes (the C encoder, if this Python has it).

    Without cycle markers: a shared markers dict would be state between calls (and threads), and a
    cyclic value, which JSON text cannot make, still fails (`RecursionError`, not `ValueError`).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator: the encoder's own method
        return lambda value, _level: _ENCODER.iterencode(value, _one_shot=True)
    encoder = _ENCODER
    return make(  # type: ignore[no-any-return]
        None,
        encoder.default,
        json.encoder.encode_basestring,
        encoder.indent,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )


_iterencode: Final[_Chunks] = _c_iterencode()


class _Shared:
    """`to_json` for one top-level trace (and its nested agents), each value object encoded once.

    The converter shares objects: an iteration's input messages are the earlier iterations'
    messages again (the same parts and argument dicts), and a call's arguments are its message
    part's. Objects are remembered by `id`, which is sound while the trace is being encoded: it
    holds every value, so no id is reused meanwhile, and a trace is not changed once the converter
    made it.
    """

    def __init__(self) -> None:
        self._texts: dict[int, str | None] = {}

    def json(self, value: Any) -> str | None:
        """`to_json(value)`."""
        if value is None:
            return None
        key = id(value)
        texts = self._texts
        if key in texts:
            return texts[key]
        text = texts[key] = _encode(value)
        return text


_TRACE_SCALARS = (
    "trace_id",
    "root_span_id",
    "name",
    "agent_name",
    "case_id",
    "conversation_id",
    "run_id",
    "service_name",
    "convention",
    "status",
    "input",
    "output",
    "error",
    "start_time",
    "end_time",
    "span_count",
)
