"""The spill parks results on disk and gives a group's back by start time, then trace id, then arrival."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from evaltrace.evaluators.engine._spill import Spill

T0 = datetime(2026, 1, 1, tzinfo=UTC)
_ROWS = st.lists(
    st.tuples(st.sampled_from(["a", "b", ""]), st.none() | st.integers(0, 3), st.sampled_from(["t1", "t2", None])),
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(rows=_ROWS)
def test_records_are_the_groups_results_in_report_order(rows: list[tuple[str, int | None, str | None]]) -> None:
    with Spill() as spill:
        expected: dict[str, list[tuple[datetime, str, int, bytes]]] = {}
        for arrival, (group, second, trace_id) in enumerate(rows):
            start = None if second is None else T0 + timedelta(seconds=second)
            payload = f'{{"n":{arrival}}}'.encode()
            spill.add_rows([(group, start, trace_id, payload, arrival % 3)])
            key = (start or datetime.max.replace(tzinfo=UTC), trace_id or "", arrival, payload)
            expected.setdefault(group, []).append(key)
        for group in ("a", "b", "", "never"):
            wanted = [payload for *_, payload in sorted(expected.get(group, []))]
            assert [payload for _, payload in spill.ordered(group)] == wanted
            assert [tag for *_, tag in spill.parked(group).at] == [tag for tag, _ in spill.ordered(group)]
            assert spill.count(group) == len(wanted)
        # Reading leaves the file ready for more results.
        spill.add_rows([("a", T0 - timedelta(days=1), "t0", b'{"late":true}', 0)])
        assert next(spill.ordered("a"))[1] == b'{"late":true}'
