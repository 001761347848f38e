"""The values of `Trace` records as the traces table holds them: JSON texts (`table.py` documents the columns).

`_table_columns.py` lays them out as the table's columns.
"""

from __future__ import annotations

import json
import json.encoder
import threading
from collections.abc import Callable
from typing import Any, Final

from evaltrace.collector.traces.records import Trace

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


def _table_encoder(*, allow_nan: bool) -> Callable[[Any], str]:
    """How the traces table writes JSON values: compact, text as it is (the columnar forms compare it).

    `JSONEncoder(...).encode`'s text and errors from a C encoder made once per thread: `encode` makes
    one (and a circular-check dict) per value, three quarters of the time of a small object's text.
    Per thread, not per process: scorers compare texts on the time limit's helper thread, and a call
    past its limit is abandoned still running; sharing its circular-check dict, a value the next call
    meets again would be taken for a cycle.
    """
    plain = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=allow_nan)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # a Python built without the C accelerator
        return plain.encode
    local = threading.local()

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return json.encoder.encode_basestring(value)
        try:
            made = local.made
        except AttributeError:  # this thread's first value
            markers: dict[int, Any] = {}
            string = json.encoder.encode_basestring
            made = local.made = (markers, make(markers, plain.default, string, None, ":", ",", False, False, allow_nan))
        try:
            return "".join(made[1](value, 0))
        except BaseException:
            made[0].clear()  # the containers open when it failed: kept alive there, and circular if met again
            raise

    return encode


_encode: Final[Callable[[Any], str]] = _table_encoder(allow_nan=True)
comparable_text: Final[Callable[[Any], str]] = _table_encoder(allow_nan=False)
"""The text the traces table holds for a JSON value, to compare values by their text: equal text is an
equal value. Raises ValueError on not-a-number values (never equal to themselves, so their equal
texts must not pass) and TypeError on what is not a JSON value."""


class _Shared:
    """`to_json` for the traces of one batch, each value object encoded once.

    The converter shares objects: the tool schemas' parameters are the same objects in every trace
    that declares the same tools, and with histories an iteration's input messages are the earlier
    iterations' messages again. Objects are remembered by `id` with a reference to each, so no id
    is reused while remembered; a trace is not changed once the converter made it. Cleared with each
    batch taken, so memory holds one batch's values.
    """

    def __init__(self) -> None:
        self._texts: dict[int, tuple[Any, str]] = {}

    def json(self, value: Any) -> str | None:
        """`to_json(value)`."""
        if value is None:
            return None
        known = self._texts.get(id(value))
        if known is not None:
            return known[1]
        text = _encode(value)
        self._texts[id(value)] = (value, text)
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
