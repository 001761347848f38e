"""`collector/arrow_arrays.py`, the one pandas-free packer: every column type of the score store and
the traces table is built as `pa.array` builds it."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaltrace.collector.arrow_arrays import bitmap, column
from evaltrace.collector.traces.table import SCHEMA as TRACES_SCHEMA
from evaltrace.evaluators.results.store.schema import RUNS_SCHEMA, SCORES_SCHEMA

UTC_ZONE: tzinfo = UTC

_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=12)
_TIMES = st.datetimes(
    timezones=st.sampled_from([None, UTC_ZONE]), min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)
)
_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_FLOATS = st.floats(allow_nan=False) | st.integers(-(2**52), 2**52)


def values_of(kind: pa.DataType) -> st.SearchStrategy[object]:
    """Values `pa.array` takes for a column of type `kind`, and nulls."""
    if pa.types.is_list(kind):
        return st.none() | st.lists(values_of(kind.value_type).filter(lambda v: v is not None), max_size=3)
    if pa.types.is_struct(kind):
        return st.none() | st.fixed_dictionaries({field.name: values_of(field.type) for field in kind})
    plain = {
        pa.string(): _TEXT,
        pa.int32(): _INT32,
        pa.int64(): _INT64,
        pa.float64(): _FLOATS,
        pa.bool_(): st.booleans(),
    }
    return st.none() | (plain[kind] if kind in plain else _TIMES)


COLUMN_TYPES = sorted({str(f.type): f.type for f in [*SCORES_SCHEMA, *RUNS_SCHEMA, *TRACES_SCHEMA]}.items())


@pytest.mark.parametrize("kind", [kind for _, kind in COLUMN_TYPES], ids=[name for name, _ in COLUMN_TYPES])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_column_type_is_built_as_pa_array_builds_it(kind: pa.DataType, data: st.DataObject) -> None:
    values = data.draw(st.lists(values_of(kind), max_size=20))
    built = column(values, kind)
    built.validate(full=True)
    assert built.equals(pa.array(values, type=kind))


@given(st.lists(st.booleans(), max_size=70))
def test_a_bitmap_sets_bit_i_for_flag_i(flags: list[bool]) -> None:
    packed = bitmap(flags)
    assert len(packed) == (len(flags) + 7) // 8
    assert [bool(packed[i // 8] >> (i % 8) & 1) for i in range(len(flags))] == flags


def test_values_that_do_not_fit_a_column_raise() -> None:
    with pytest.raises(OverflowError):
        column([2**31], pa.int32())
    with pytest.raises(TypeError):
        column(["yes"], pa.bool_())
    with pytest.raises(TypeError):
        column([1], pa.list_(pa.int8()))
