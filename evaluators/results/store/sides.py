"""A scored sample's values for the scores table, packed when the sample is parked.

The engine parks each sample's JSON until the end of the run (`engine/_spill.py`); beside it goes
this side part (`report.writer.park`), so the score store makes its rows from the values the
sample had when it was scored, without parsing the JSON back into models. `marshal` packs plain
values only (no code, no objects): times travel as microseconds since the epoch, the scorer's
details as the JSON text the store keeps. A result's columns are packed in the row's order, its
scorer's version and configuration hash included (paired in the process that scored the sample,
so a sharded run hashes the scorers in its workers), so the store only prefixes the entry's columns.
"""

from __future__ import annotations

import json
import marshal
from collections.abc import Sequence
from typing import Any, NamedTuple

from evaltrace.collector.arrow_arrays import micros
from evaltrace.evaluators.results.report.sample_row import SampleRow
from evaltrace.evaluators.results.store.identities import ScorerIdentity

RESULT_COLUMNS = ("trace_id", "turn", "scorer", "scorer_version", "config_hash", "passed", "value", "reason", "error")
"""A result's columns of the scores table as `SampleSide.results` holds them, followed by `details`."""
ERROR_AT = RESULT_COLUMNS.index("error")


class SampleSide(NamedTuple):
    """One sample's values for the scores table, as its rows hold them."""

    values: tuple[str | int | float | None, ...]
    """The sample's columns after `sample_index`: conversation id, start time (microseconds since
    the epoch, UTC), duration, input and output tokens, cost."""
    trace_id: str | None
    """The sample's trace: the trace id of the one row of a sample without results."""
    results: tuple[tuple[Any, ...], ...]
    """Per scorer result, its columns (`RESULT_COLUMNS`, then the details as JSON text)."""


_DETAILS = json.JSONEncoder(ensure_ascii=False, default=str)
"""What `json.dumps(details, ensure_ascii=False, default=str)` gives, without making an encoder per call.

(Calling `json.encoder.c_make_encoder` once would save ~4 us a row more: a private CPython API, and a
shared cycle-check memo, for ~0.05 s of 10,000 rows, which no warm run measured.)"""


def details_text(details: dict[str, Any] | None) -> str | None:
    """The scorer's details as the store keeps them (JSON text; objects JSON lacks as their `str`)."""
    return None if details is None else _DETAILS.encode(details)


def pack_sides(
    samples: Sequence[SampleRow],
    identities: Sequence[Sequence[ScorerIdentity | None]],
    unpacked: list[SampleSide] | None = None,
) -> list[bytes]:
    """Each sample's values for its rows, packed; empty for one that cannot be (the store then parses its JSON).

    Args:
        samples: the scored samples.
        identities: per sample, the scorer of each of its results (`ScorerPairing.identities`).
        unpacked: given, each sample's values are also added to it, as they were packed.
    """
    made: _Made = {}  # alive while packing: marshal's bytes for a value depend on whether it is shared
    packed = []
    for sample, paired in zip(samples, identities, strict=True):
        side = _side(sample, paired, made)
        try:
            packed.append(marshal.dumps(tuple(side)))  # marshal takes no tuple subclass
        except ValueError:  # a value marshal does not take (a plugin's str subclass), details with a cycle
            packed.append(b"")
        if unpacked is not None:
            unpacked.append(side)
    return packed


def unpack_side(data: bytes) -> SampleSide:
    """A side packed by `pack_sides`."""
    return SampleSide(*marshal.loads(data))


def sample_side(sample: SampleRow, identities: Sequence[ScorerIdentity | None]) -> SampleSide:
    """A sample's values for its rows (what `pack_sides` packs); `identities` as for one sample of `pack_sides`."""
    return _side(sample, identities, {})


_Made = dict[int, tuple[Any, ...]]
"""A result's own values by `ScoreRow` object, made once for a call (every sample is alive during it)."""


def _side(sample: SampleRow, identities: Sequence[ScorerIdentity | None], made: _Made) -> SampleSide:
    values = (sample.conversation_id, micros(sample.start_time), sample.duration_seconds, sample.input_tokens)
    trace_id, trace_ids = sample.trace_id, sample.trace_ids
    results = []
    for score, identity in zip(sample.scores, identities, strict=True):
        own = made.get(id(score))
        if own is None:  # the warm path shares a `ScoreRow` between rows: its details' text is made once
            own = made[id(score)] = (score.passed, score.value, score.reason, score.error, details_text(score.details))
        scorer = (identity.version, identity.config_hash) if identity is not None else (None, None)
        results.append((_trace_of(trace_id, trace_ids, score.turn), score.turn, score.scorer, *scorer, *own))
    return SampleSide((*values, sample.output_tokens, sample.cost_usd), trace_id, tuple(results))


def _trace_of(trace_id: str | None, trace_ids: Sequence[str], turn: int | None) -> str | None:
    """The trace a result was computed on: a turn's own trace in a conversation, else the sample's."""
    if turn is None or not trace_ids:
        return trace_id
    return trace_ids[turn - 1] if turn <= len(trace_ids) else None
