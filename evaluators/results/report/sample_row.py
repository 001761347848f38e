"""A scored sample as plain values, and its report JSON made from them without a model.

Every kept sample goes through a `SampleRow`: the warm path makes one straight from a table row's
columns and its forms' scores, the per-trace path from its `SampleResult` (`SampleRow.of`). Its JSON
(`sample_jsons`) is byte for byte the sample's `SampleResult.model_dump_json()` (pydantic's serializer,
fed the fields in the model's order, so escaping and number formats are the model's own), and the
engine's tally and the score store's side part read the same values.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from pydantic_core import to_json

from evaltrace.evaluators.results.report.model import SampleResult, SampleStatus, ScoreResult
from evaltrace.evaluators.results.report.writer import with_scores


class ScoreRow(NamedTuple):
    """One scorer's verdict on a sample, as `ScoreResult` holds it (an error's `passed` already `False`)."""

    scorer: str
    passed: bool | None
    value: float | None
    reason: str | None
    error: str | None
    turn: int | None
    details: dict[str, Any] | None

    @classmethod
    def of(cls, score: ScoreResult) -> ScoreRow:
        """`score`'s values."""
        return cls(**vars(score))  # the same fields


class SampleRow(NamedTuple):
    """A `SampleResult`'s values, in its fields' order (usage as its two token counts)."""

    trace_id: str | None
    trace_ids: Sequence[str]
    root_span_ids: Sequence[str | None]
    conversation_id: str | None
    status: SampleStatus
    passed: bool | None
    scores: Sequence[ScoreRow]
    input: str | None
    output: str | None
    error: str | None
    start_time: datetime | None
    duration_seconds: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None

    @classmethod
    def of(cls, sample: SampleResult) -> SampleRow:
        """`sample`'s values."""
        fields = {**vars(sample), "scores": [ScoreRow.of(score) for score in sample.scores]}
        usage = fields.pop("usage")
        return cls(**fields, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)


def sample_jsons(samples: Sequence[SampleRow]) -> list[tuple[bytes, bytes]]:
    """Each sample's `SampleResult.model_dump_json()` (its fields dumped, then its scores spliced in), and its scores'.

    A score's JSON is made once per `ScoreRow` object: the warm path keeps a batch's rows at once,
    rows alike sharing their `ScoreRow`s (details and all). The scores' JSON (`scores_json`) is the
    case tally's, for an entry of one sample.
    """
    made: dict[int, bytes] = {}  # a score's JSON by object: every sample is alive during the call
    found = []
    for sample in samples:
        fields = sample._asdict()
        fields["scores"] = []
        fields["usage"] = {"input_tokens": fields.pop("input_tokens"), "output_tokens": fields.pop("output_tokens")}
        fields["cost_usd"] = fields.pop("cost_usd")  # after usage, as in the model
        # A model's float fields hold floats, and it writes NaN and infinities as null (`ser_json_inf_nan`).
        scores = _scores_json(sample.scores, made)
        found.append((with_scores(to_json(fields, inf_nan_mode="null"), scores), scores))
    return found


def _scores_json(scores: Sequence[ScoreRow], made: dict[int, bytes]) -> bytes:
    parts = []
    for score in scores:
        if (text := made.get(id(score))) is None:
            text = made[id(score)] = to_json(score._asdict(), inf_nan_mode="null")
        parts.append(text)
    return b"[" + b",".join(parts) + b"]"


def scores_json(scores: Sequence[ScoreRow]) -> bytes:
    """A JSON list of `scores`, as a list of `ScoreResult` dumps to it."""
    return _scores_json(scores, {})
