"""Rebuild agent traces (`Trace` records) from recorded spans, whatever instrumentation wrote them.

Each span is classified by the first extractor in `conventions.CONVENTIONS` that recognises it (the
convention is detected from the attributes present, never from a library name), the spans of a
trace are arranged into a tree (children may arrive before parents, in any file), and `Trace`
records are assembled from the tree by `_assemble.py` (its module docstring states what counts as
an iteration, a tool call and a nested agent).

Typical use::

    from evaltrace.collector import read_traces, resolve_paths

    for trace in read_traces(resolve_paths(["runs/"])):
        print(trace.input, [c.name for c in trace.tool_calls], trace.output)
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from evaltrace.collector.gc_policy import collections_paused
from evaltrace.collector.runfiles.spans import Span
from evaltrace.collector.traces._assemble import Assembler
from evaltrace.collector.traces._normalized import NormalizedSpan
from evaltrace.collector.traces._spanutil import span_error, span_label
from evaltrace.collector.traces._tree import SpanTree, build_tree
from evaltrace.collector.traces.conventions import CONVENTIONS, Extractor
from evaltrace.collector.traces.records import Conversation, Trace
from evaltrace.collector.traces.version import CONVERTER_VERSION as CONVERTER_VERSION  # defined there, bumped there

if TYPE_CHECKING:
    from pathlib import Path

    import pyarrow as pa

    from evaltrace.collector.runfiles.runfiles import Location
    from evaltrace.collector.runfiles.shard import Shard

logger = logging.getLogger(__name__)


def _label(extract: Extractor) -> str:
    return f"{extract.__module__}:{extract.__name__}"


def classify(span: Span) -> NormalizedSpan:
    """What `span` is, per the first extractor that recognises it; `other` when none does."""
    for extract in CONVENTIONS.values():
        try:
            found = extract(span)
        except Exception as exc:  # one malformed span must not make a whole run unreadable
            logger.warning("extractor %s failed on %s", _label(extract), span_label(span), exc_info=True)
            fallback = NormalizedSpan(span=span, role="other", convention="none", error=span_error(span))
            fallback.warnings.append(
                f"{span_label(span)}: {_label(extract)} failed ({type(exc).__name__}: {exc}); span ignored"
            )
            return fallback
        if found is not None:
            return found
    return NormalizedSpan(span=span, role="other", convention="none", error=span_error(span))


def convert_trace(spans: list[Span], *, histories: bool = True) -> list[Trace]:
    """Rebuild the traces of one OTel trace.

    Args:
        spans: All spans of one trace id, in any order (duplicates are ignored).
        histories: Fill in each iteration's prompt (`Iteration.input_messages`). With `False`
            they stay `None`, which saves up to a quarter of the work, since every model call
            resends the conversation so far; tool results and the input still come from them.

    Returns:
        One `Trace` per root span (normally exactly one); empty for no spans.
    """
    if not spans:
        return []
    # Rebuilding allocates many small objects and no garbage cycles (temporaries go with their
    # last reference): the cyclic GC's collections during it free nothing. Paused per trace, it
    # cost ~10% of a cold rebuild. What the trace keeps is settled (moved to the oldest generation
    # unscanned): left young, the next collections scanned it again and again while scoring held
    # the traces (a first scoring of 10,000 peer traces, one process: 200 young collections took
    # 3.8 s and 18 middle ones 0.8 s; settled, 0.19 s and 0.14 s).
    with collections_paused(settle=True):
        return _convert_tree(build_tree(spans), histories)


def _convert_tree(tree: SpanTree, histories: bool) -> list[Trace]:
    classified = {span_id: classify(span) for span_id, span in tree.spans.items()}
    if histories:
        # Every model span's prompt, iteration or not, so each one reports its own parse warnings.
        for normalized in classified.values():
            if normalized.llm is not None:
                normalized.llm.inputs()
    return Assembler(tree, classified, histories=histories).traces()


def convert_spans(spans: Iterable[Span], *, histories: bool = True) -> list[Trace]:
    """Rebuild the traces of spans from any number of trace ids, ordered by start time.

    `histories` as for `convert_trace`.
    """
    by_trace: dict[str, list[Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, []).append(span)
    traces = [trace for group in by_trace.values() for trace in convert_trace(group, histories=histories)]
    return sorted(traces, key=_start_key)


def read_traces(
    files: Sequence[Path],
    shard: Shard | None = None,
    *,
    histories: bool = True,
    trace_ids: Iterable[str] | None = None,
) -> Iterator[Trace]:
    """Read run files and yield their traces, one recorded trace at a time.

    Args:
        files: The run files, as `resolve_paths` returns them (PATH arguments resolved once).
        shard: Only the recorded traces of this shard (see `reader.Shard`); all when `None`.
        histories: Fill in the iterations' prompts (see `convert_trace`).
        trace_ids: Only the recorded traces with these ids (exact); only their rows are decoded.

    Raises:
        InputError: A file is unreadable or not an evaltrace span file.
    """
    from evaltrace.collector.runfiles.reader import iter_traces

    for spans in iter_traces(files, shard, trace_ids=trace_ids):
        yield from convert_trace(spans, histories=histories)


def table_batches_of(spans: Iterable[list[Span]], *, histories: bool, rows: int) -> Iterator[pa.RecordBatch]:
    """The traces table of `spans` (each trace's, as `iter_traces` yields them), in batches of about `rows` rows.

    What `to_table` of their converted traces holds: a flat GenAI trace's row is made straight from
    its spans (`_flat_columns.py`), every other trace's by the converter and the encoder, in order.

    Raises:
        InputError: as `read_traces` does. TypeError, ValueError, ArrowException, OverflowError: a
            converted trace holds a value the table cannot (see `TableEncoder`).
    """
    from evaltrace.collector.traces._flat_columns import flat_row
    from evaltrace.collector.traces.table import TableEncoder

    encoder = TableEncoder()
    for group in spans:
        with collections_paused():  # the row's values are plain, acyclic: collections would find nothing
            flat = None if histories else flat_row(group)
            if flat is not None:
                encoder.add_row(flat.append)
        if flat is None:
            for trace in convert_trace(group, histories=histories):
                encoder.add(trace)
        if encoder.pending >= rows:
            yield encoder.take()
    if encoder.pending:
        yield encoder.take()


def convert_span_rows(
    parts: Sequence[tuple[Location, Sequence[pa.RecordBatch]]], *, histories: bool = True
) -> Iterator[Trace]:
    """`read_traces` over span rows already read, file by file (see `reader.span_groups_of_rows`).

    Raises:
        InputError: a row is malformed (named with its file).
    """
    from evaltrace.collector.runfiles.reader import span_groups_of_rows

    for spans in span_groups_of_rows(parts):
        yield from convert_trace(spans, histories=histories)


def group_conversations(traces: Iterable[Trace]) -> list[Conversation]:
    """Group traces into conversations by `conversation_id`, ordered by start time.

    A trace without a conversation id forms a conversation of its own, keyed by its trace id.
    Traces inside a conversation, and the conversations themselves, are ordered by start time.
    """
    groups: dict[str, list[Trace]] = {}
    for trace in traces:
        groups.setdefault(trace.conversation_id or trace.trace_id, []).append(trace)
    conversations = [
        Conversation(conversation_id=key, traces=sorted(members, key=_start_key)) for key, members in groups.items()
    ]
    return sorted(conversations, key=lambda c: _start_key(c.traces[0]))


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def _start_key(trace: Trace) -> tuple[datetime, str, str]:
    return trace.start_time or _EARLIEST, trace.trace_id, trace.root_span_id or ""
