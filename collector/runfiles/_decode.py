"""Decode record batches of span files into `Span` objects, column by column.

Reading a million spans is dominated by per-span Python work, so every step works on whole
columns: one `to_pylist` per column, one `json.loads` per batch for all attribute objects
(the texts joined into one JSON array), and `Span` objects built by `map` over the columns.
Attributes moved to the `large_attributes` map are merged back into each span's dict.

Malformed JSON inside a row (attributes, events, links, resource) is an `InputError` naming the
file, span and row: the writer always produces valid JSON, so bad text means a damaged or
foreign file, and a lenient fallback would silently change what the scorers see. Hostile text
ends the same way: JSON nested past the recursion limit, integers too long to convert, bare
`NaN`, and text columns that are not valid UTF-8 (span files are untrusted input).

The `resource` dict is decoded once per distinct text and shared by the spans of a file, like
the SDK shares one `Resource` among a process's spans: treat it as read-only.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from evaltrace.collector.errors import InputError
from evaltrace.collector.gc_policy import collections_paused
from evaltrace.collector.runfiles.jsonvalue import STRICT_DECODER, loads_attributes
from evaltrace.collector.runfiles.runfiles import Location, column_values, iter_batches, not_utf8
from evaltrace.collector.runfiles.schema import BASE_COLUMNS
from evaltrace.collector.runfiles.shard import RowFilter
from evaltrace.collector.runfiles.spans import Span, SpanEvent, SpanLink

# Columns given to `Span` positionally, in its field order (checked below). Promoted columns and
# `duration_ns` are copies of what `attributes` and the timestamps hold, so they are not read.
_HEAD = BASE_COLUMNS[: BASE_COLUMNS.index("duration_ns")]  # ids, name, kind, status, times
_TAIL = ("service_name", "run_id", "scope_name", "scope_version")
_COUNTS = ("dropped_attributes_count", "dropped_events_count", "dropped_links_count")
SPAN_COLUMNS = (*_HEAD, "attributes", "large_attributes", "events", "links", "resource", *_TAIL, *_COUNTS)
_SPAN_FIELDS = (
    *_HEAD[:7],
    "start_time_ns",
    "end_time_ns",
    "attributes",
    "events",
    "links",
    "resource",
    *_TAIL,
    *_COUNTS,
)
_MARKER = '"$float"'  # present in any text holding a non-finite float (see `jsonvalue.py`)

# (trace ids, span ids, spans) of one record batch.
SpanBatch = tuple[list[str], list[str], list[Span]]


def _check_field_order() -> None:
    # Positional construction is several times faster than keywords; fail loudly if the
    # dataclasses change their field order.
    for cls, names in ((Span, _SPAN_FIELDS), (SpanEvent, ("name", "time_ns")), (SpanLink, ("trace_id", "span_id"))):
        actual = tuple(f.name for f in dataclasses.fields(cls))
        if actual[: len(names)] != names:
            raise RuntimeError(f"{cls.__name__} fields changed: update evaltrace.collector.runfiles._decode")


_check_field_order()


def read_span_batches(path: Path, only: RowFilter | None = None) -> Iterator[SpanBatch]:
    """Yield the spans of a file (the rows `only` keeps, if given), one `SpanBatch` per record batch."""
    resources: dict[str | None, dict[str, Any]] = {None: {}, "": {}}
    for batch in iter_batches(path, SPAN_COLUMNS, only):
        yield decode_batch(path, batch, resources)


def decode_batch(path: Location, batch: pa.RecordBatch, resources: dict[str | None, dict[str, Any]]) -> SpanBatch:
    """Decode one record batch of `SPAN_COLUMNS`; `resources` caches decoded resource texts."""
    # Decoding allocates a few container objects per span, all of which outlive the batch, so
    # the cyclic GC's collections during it free nothing; pausing it saves ~20% of read time.
    try:
        with collections_paused():
            return _decode_batch(path, batch, resources)
    except UnicodeDecodeError as exc:  # pyarrow checks UTF-8 only when a value becomes a `str`
        raise not_utf8(path, exc) from None


def _decode_batch(path: Location, batch: pa.RecordBatch, resources: dict[str | None, dict[str, Any]]) -> SpanBatch:
    head = [column_values(batch.column(name)) for name in _HEAD]
    span_ids: list[str] = head[1]

    def where(row: int) -> str:
        return f"{path}: span {span_ids[row]} (row {row})"

    attributes = load_objects(batch.column("attributes").to_pylist(), where)
    _merge_large(attributes, batch.column("large_attributes"))
    events = _nested(batch.column("events"), where, lambda f, a: list(map(SpanEvent, f[1], f[0], a)))
    links = _nested(batch.column("links"), where, lambda f, a: list(map(SpanLink, f[0], f[1], a)))
    resource = _resources(batch.column("resource").to_pylist(), resources, where)
    tail = [batch.column(name).to_pylist() for name in _TAIL]
    counts = [_counts(batch.column(name)) for name in _COUNTS]
    spans = list(map(Span, *head, attributes, events, links, resource, *tail, *counts))
    return head[0], span_ids, spans


def _counts(column: pa.Array) -> list[int]:
    """A count column's values, 0 where null.

    Not `pc.fill_null(column, 0)`: converting its Python `0` makes pyarrow import pandas, ~0.2 s
    of a cold one-process scoring's CPU when nothing else needs it.
    """
    values: list[Any] = column.to_pylist()
    return [0 if value is None else value for value in values] if column.null_count else values


def load_objects(texts: list[str | None], where: Callable[[int], str]) -> list[dict[str, Any]]:
    """Decode attribute JSON object texts (None or empty gives `{}`).

    Raises:
        InputError: a text is not a JSON object; `where(index)` names its file and span.
    """
    joined = "[" + ",".join([t or "{}" for t in texts]) + "]"
    try:
        values = STRICT_DECODER.decode(joined)
    except (ValueError, RecursionError):
        values = None
    # A text that is not one object (bad JSON, `1, 2`) breaks the one-to-one match: decode row by
    # row then, which also pinpoints the bad row.
    if not isinstance(values, list) or len(values) != len(texts) or not all(type(v) is dict for v in values):
        return [_load_one(t, index, where) for index, t in enumerate(texts)]
    if _MARKER in joined:
        for index, text in enumerate(texts):
            if text and _MARKER in text:
                values[index] = _load_one(text, index, where)
    return values


def _load_one(text: str | None, index: int, where: Callable[[int], str]) -> dict[str, Any]:
    try:
        return loads_attributes(text)
    except RecursionError:
        raise InputError(f"{where(index)}: attribute JSON nested too deeply to read") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{where(index)}: malformed attribute JSON ({_short(str(exc))})") from None


def _short(detail: str, limit: int = 200) -> str:
    # One line, and bounded: the detail of a hostile value can be as long as the value.
    text = " ".join(detail.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _offsets(column: pa.Array) -> tuple[list[int], int, int]:
    offsets: list[int] = column.offsets.to_pylist()
    return offsets, offsets[0], offsets[-1]


def _merge_large(attributes: list[dict[str, Any]], column: pa.MapArray) -> None:
    """Put each row's `large_attributes` pairs back into its attribute dict."""
    offsets, first, last = _offsets(column)
    if last == first:
        return
    # `keys`/`items` are the whole child arrays; the offsets index into them.
    keys = column.keys.slice(first, last - first).to_pylist()
    items = column.items.slice(first, last - first).to_pylist()
    pairs = list(zip(keys, items, strict=True))  # one slice a row, not two and a zip (~1% of a cold scoring)
    for attrs, start, end in zip(attributes, offsets, offsets[1:], strict=False):
        if end > start:
            attrs.update(pairs[start - first : end - first])


def _nested(
    column: pa.ListArray,
    where: Callable[[int], str],
    build: Callable[[list[list[Any]], list[dict[str, Any]]], list[Any]],
) -> list[list[Any]]:
    """Decode a list<struct<a, b, attributes JSON>> column into one list of objects per row.

    `build` receives the struct's first two fields as Python lists and the decoded attributes.
    """
    offsets, first, last = _offsets(column)
    if last == first:
        return [[] for _ in range(len(column))]
    fields = column.values.slice(first, last - first).flatten()
    plain = [column_values(fields[0]), column_values(fields[1])]

    def parent(index: int) -> str:
        return where(bisect.bisect_right(offsets, index + first) - 1)

    items = build(plain, load_objects(fields[2].to_pylist(), parent))
    return [items[a - first : b - first] for a, b in zip(offsets, offsets[1:], strict=False)]


def _resources(
    texts: list[str | None], cache: dict[str | None, dict[str, Any]], where: Callable[[int], str]
) -> list[dict[str, Any]]:
    for text in set(texts) - cache.keys():
        cache[text] = _load_one(text, texts.index(text), where)
    return [cache[text] for text in texts]
