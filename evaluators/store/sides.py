"""A scored sample's values for the scores table, packed when the sample is parked.

The engine parks each sample's JSON until the end of the run (`engine/_spill.py`); beside it goes
this side part (`report.writer.park`), so the score store makes its rows from the values the
sample had when it was scored, without parsing the JSON back into models. `marshal` packs plain
values only (no code, no objects): times travel as microseconds since the epoch, the scorer's
details as the JSON text the store keeps.
"""

from __future__ import annotations

import json
import marshal
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from evaltrace.evaluators.report.model import SampleResult

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class SideScore(NamedTuple):
    """One scorer result as the scores table stores it."""

    turn: int | None
    scorer: str
    passed: bool | None
    value: float | None
    reason: str | None
    error: str | None
    details: str | None
    """The details as JSON text."""


class SampleSide(NamedTuple):
    """One sample's values for the scores table."""

    start_time: int | None
    """Microseconds since the epoch (UTC)."""
    conversation_id: str | None
    duration_seconds: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    trace_id: str | None
    trace_ids: tuple[str, ...]
    scores: tuple[SideScore, ...]


def micros(moment: datetime | None) -> int | None:
    """`moment` as microseconds since the epoch, as Arrow stores a UTC timestamp (a naive time is UTC)."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


_DETAILS = json.JSONEncoder(ensure_ascii=False, default=str)
"""What `json.dumps(details, ensure_ascii=False, default=str)` gives, without making an encoder per call."""


def details_text(details: dict[str, Any] | None) -> str | None:
    """The scorer's details as the store keeps them (JSON text; objects JSON lacks as their `str`)."""
    return None if details is None else _DETAILS.encode(details)


def pack_side(sample: SampleResult) -> bytes:
    """A sample's values for its rows, packed; empty when one cannot be packed (the store then parses the JSON)."""
    usage = sample.usage
    scores = tuple(
        (score.turn, score.scorer, score.passed, score.value, score.reason, score.error, details_text(score.details))
        for score in sample.scores
    )
    values = (micros(sample.start_time), sample.conversation_id, sample.duration_seconds, usage.input_tokens)
    try:
        return marshal.dumps(
            (*values, usage.output_tokens, sample.cost_usd, sample.trace_id, tuple(sample.trace_ids), scores)
        )
    except ValueError:  # a value of a type marshal does not take (a plugin's str subclass, say)
        return b""


def unpack_side(data: bytes) -> SampleSide:
    """A side packed by `pack_side`."""
    start, conversation, duration, tokens_in, tokens_out, cost, trace_id, trace_ids, scores = marshal.loads(data)
    found = tuple(SideScore(*score) for score in scores)
    return SampleSide(start, conversation, duration, tokens_in, tokens_out, cost, trace_id, trace_ids, found)


def sample_side(sample: SampleResult) -> SampleSide:
    """A sample's values for its rows (what `pack_side` packs)."""
    usage = sample.usage
    return SampleSide(
        micros(sample.start_time),
        sample.conversation_id,
        sample.duration_seconds,
        usage.input_tokens,
        usage.output_tokens,
        sample.cost_usd,
        sample.trace_id,
        tuple(sample.trace_ids),
        tuple(
            SideScore(s.turn, s.scorer, s.passed, s.value, s.reason, s.error, details_text(s.details))
            for s in sample.scores
        ),
    )
