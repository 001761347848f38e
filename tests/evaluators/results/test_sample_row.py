"""A sample's JSON made from its values (`sample_jsons`) is pydantic's dump of its `SampleResult`, byte for byte.

The warm path parks passing samples' JSON made this way, and the per-trace path its samples' too;
the report is compared with reports written before, so escaping (recorded content is untrusted:
quotes, backslashes, control characters, U+2028), number formats and field order must be the model's.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import PydanticSerializationError

from evaltrace.evaluators.engine._aggregate import sample_status, score_result, score_row
from evaltrace.evaluators.engine._score_merger import SCORES
from evaltrace.evaluators.results.report.model import SampleResult, ScoreResult, TokenUsage
from evaltrace.evaluators.results.report.sample_row import SampleRow, sample_jsons, scores_json
from evaltrace.evaluators.scoring.scorers.base import Score

TRICKY = [
    '"',
    "\\",
    "\u2028",
    "\u2029",
    "\x00",
    "\x1f",
    "\x7f",
    "\u00e9",
    "\U0001f600",
    "\ufeff",
    "</script>",
    "\r\n\t\b\f",
    '","',
    '\\",',
    ",",
    "\u202e",
    "\u2066",
]
_text = st.one_of(st.none(), st.text(max_size=12), st.lists(st.sampled_from(TRICKY), max_size=4).map("".join))
_floats = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([3.061671, 1e-07, 0.1 + 0.2, 1e300, 5e-324, -0.0, 0.0, 0.00843, 1e16]),
)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)),
    max_leaves=8,
)
_scores = st.lists(
    st.builds(
        Score,
        scorer=st.sampled_from(["trajectory", "output", "tool_call_validity"]),
        passed=st.sampled_from([True, False, None]),
        value=_floats,
        reason=_text,
        error=st.sampled_from([None, "ValueError: \u2028boom\x00"]),
        details=st.one_of(st.none(), st.dictionaries(st.text(max_size=6), _json, max_size=3)),
    ),
    max_size=3,
)
_tokens = st.one_of(st.integers(0, 2**63 - 1), st.sampled_from([0, 2160, 2**62]))


@st.composite
def samples(draw: st.DrawFn) -> SampleRow:
    """A sample's values as the warm path makes them (floats as floats), its scores from `Score`s."""
    trace_id = draw(st.text(alphabet="0123456789abcdef", min_size=1, max_size=32))
    found = [score_row(score) for score in draw(_scores)]
    status = sample_status(found)
    start = draw(st.one_of(st.none(), st.integers(0, 2**52)))
    return SampleRow(
        trace_id=trace_id,
        trace_ids=[trace_id],
        root_span_ids=[draw(st.one_of(st.none(), st.just("ee9d96b7e0189e96")))],
        conversation_id=draw(_text),
        status=status,
        passed=None if status == "not_applicable" else status == "passed",
        scores=found,
        input=draw(_text),
        output=draw(_text),
        error=draw(_text),
        start_time=None if start is None else datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=start),
        duration_seconds=draw(_floats),
        input_tokens=draw(_tokens),
        output_tokens=draw(_tokens),
        cost_usd=draw(_floats),
    )


def _json(row: SampleRow) -> bytes:
    return sample_jsons([row])[0][0]


def _model(row: SampleRow) -> SampleResult:
    """The `SampleResult` the per-trace path makes of the same values."""
    fields: dict[str, Any] = row._asdict()
    fields["scores"] = [ScoreResult(**score._asdict()) for score in row.scores]
    fields["usage"] = TokenUsage(input_tokens=fields.pop("input_tokens"), output_tokens=fields.pop("output_tokens"))
    return SampleResult(**fields)


@settings(max_examples=400, deadline=None)
@given(row=samples())
def test_a_samples_json_from_its_values_is_the_models_dump(row: SampleRow) -> None:
    model = _model(row)
    assert _json(row) == model.model_dump_json().encode()
    assert _json(SampleRow.of(model)) == _json(row)  # the per-trace path's samples go the same way
    assert scores_json(row.scores) == SCORES.dump_json(model.scores)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(samples(), max_size=6), data=st.data())
def test_a_batchs_jsons_assembled_by_field_are_each_models_dump(rows: list[SampleRow], data: st.DataObject) -> None:
    """The warm path keeps a batch's rows at once (`sample_jsons`), their `ScoreRow`s shared between rows."""
    shared = [score for row in rows for score in row.scores]
    if shared:  # rows whose scores are objects another row has too, as `score_rows` shares them
        picked = data.draw(st.lists(st.sampled_from(shared), max_size=3))
        rows += [row._replace(scores=picked, status=sample_status(picked)) for row in rows[:2]]
    models = [_model(row) for row in rows]
    made = [(model.model_dump_json().encode(), SCORES.dump_json(model.scores)) for model in models]
    assert sample_jsons(rows) == made


def test_a_batch_of_texts_like_json_boundaries_is_each_models_dump() -> None:
    # An escaped quote before a comma (`\\",`) looks like the `","` between two strings (it broke a split).
    texts = ['",', '",', '","', '\\","', "\\", '"', "", ",", '"],["', "\x00\u2028\u202e\ufeff"]
    rows = [
        SampleRow(text, [text, "t"], [text, None], text, "passed", True, [], text, None, text, None, 1e-07, 0, 1, None)
        for text in texts
    ]
    assert [made for made, _ in sample_jsons(rows)] == [_model(row).model_dump_json().encode() for row in rows]


def test_untrusted_text_is_escaped_as_pydantic_escapes_it() -> None:
    text = 'a"b\\c\u2028d\x00e\x1ff\u00e9\U0001f600'
    score = score_row(Score(scorer="output", passed=True, value=1, reason=text, details={"k\x00": [text, 2**70]}))
    row = SampleRow("t", ["t"], [None], text, "passed", True, [score], text, text, None, None, None, 0, 0, 0.0)
    dumped = _json(row)
    assert dumped == _model(row).model_dump_json().encode()
    # Quotes, backslashes and control characters escaped; U+2028 and the rest as UTF-8, as pydantic writes them.
    assert b'a\\"b\\\\c\xe2\x80\xa8d\\u0000e\\u001ff\xc3\xa9\xf0\x9f\x98\x80' in dumped
    assert b'"value":1.0' in dumped and b'"cost_usd":0.0' in dumped and b"1180591620717411303424" in dumped


def test_numbers_are_written_as_the_model_writes_them() -> None:
    row = SampleRow("t", [], [], None, "passed", True, [], None, None, None, None, 1e-07, 2**62, 1, math.nan)
    assert _json(row) == _model(row).model_dump_json().encode()
    assert b'"duration_seconds":1e-7' in _json(row) and b'"cost_usd":null' in _json(row)
    no_cost = row._replace(duration_seconds=3.061671, cost_usd=None)
    assert (
        b'"duration_seconds":3.061671' in _json(no_cost)
        and _json(no_cost) == _model(no_cost).model_dump_json().encode()
    )


def test_a_lone_surrogate_fails_as_the_model_fails() -> None:
    row = SampleRow("t", [], [], None, "passed", True, [], "\ud800", None, None, None, None, 0, 0, None)
    with pytest.raises(PydanticSerializationError):
        _model(row).model_dump_json()
    with pytest.raises(PydanticSerializationError):
        _json(row)
    with pytest.raises(PydanticSerializationError):  # with other rows: the batch fails as the model would
        sample_jsons([row._replace(input="a"), row])


def test_an_error_score_reports_failed() -> None:
    row = score_row(Score(scorer="x", passed=True, error="boom"))
    assert row.passed is False and ScoreResult(**row._asdict()) == score_result(
        Score(scorer="x", passed=True, error="boom")
    )
