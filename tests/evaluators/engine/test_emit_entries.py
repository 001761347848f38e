"""Entries emitted with their scores left as JSON: the same report entry as the decided, typed one.

The engine decides each case with its scores as the JSON the tally kept (`decide_case_json`) and the
JSON report splices them in; these tests hold that entry, byte for byte and parsed, to the typed one.
"""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_aggregate_tally import CASE, POLICIES, _rows, _sample

from evaltrace.evaluators.engine._aggregate import (
    CaseTally,
    decide_case,
    decide_case_json,
    sample_order,
    scores_from_json,
)
from evaltrace.evaluators.engine._routers import Decided, RouterState, SpecRouter
from evaltrace.evaluators.results.report.model import EntryResult, SampleResult
from evaltrace.evaluators.results.report.writer import EntryFields, ReportEntry, head_json, park
from evaltrace.evaluators.scoring.spec.loader import compile_spec, validate_strictly


def _parked(samples: list[SampleResult]) -> list[bytes]:
    return [park(sample.model_dump_json().encode(), b"") for sample in sorted(samples, key=sample_order)]


@settings(max_examples=120, deadline=None)
@given(
    samples=st.lists(st.tuples(_rows, st.booleans()), max_size=5).map(
        lambda drawn: [_sample(i, rows, late) for i, (rows, late) in enumerate(drawn)]
    )
)
def test_an_entry_with_its_scores_as_json_is_the_decided_entry(samples: list[SampleResult]) -> None:
    for policy in POLICIES:
        tally = CaseTally.for_policy(policy)
        for sample in samples:
            tally.add(sample)
        typed = decide_case(CASE, policy, tally)
        head, scores = decide_case_json(CASE, policy, tally)
        assert head.scores == [] and head.model_copy(update={"scores": scores_from_json(scores)}) == typed
        spliced = ReportEntry.decided(head_json(head, scores), EntryFields.of(head), lambda: _parked(samples))
        plain = ReportEntry.decided(head_json(typed), EntryFields.of(typed), lambda: _parked(samples))
        whole = typed.model_copy(update={"samples": sorted(samples, key=sample_order)})
        # Spliced scores or typed ones: the same bytes, and the typed entry's JSON (samples placed last).
        assert spliced.json_bytes() == plain.json_bytes()
        assert json.loads(spliced.json_bytes()) == json.loads(whole.model_dump_json())
        assert spliced.fields() == plain.fields() == EntryFields.of(typed)
        assert spliced.result() == plain.result() == whole


def test_scores_text_in_a_reason_does_not_move_the_splice() -> None:
    # A reason quoting the key itself: inside a JSON string its quotes are escaped.
    samples = [_sample(0, [("a", False, None, None)], late=False)]
    tally = CaseTally.for_policy(POLICIES[0])
    tally.add(samples[0])
    head, scores = decide_case_json(CASE, POLICIES[0], tally)
    tricky = head.model_copy(update={"reason": 'x,"scores":[],"y', "case_id": '"scores":[],'})
    entry = ReportEntry.decided(head_json(tricky, scores), EntryFields.of(tricky), lambda: _parked(samples))
    parsed = EntryResult.model_validate_json(entry.json_bytes())
    assert parsed.reason == 'x,"scores":[],"y' and parsed.case_id == '"scores":[],'
    assert parsed.scores == scores_from_json(scores) and len(parsed.scores) == 1


def test_an_entry_given_scores_twice_is_refused() -> None:
    scores = _sample(0, [("a", True, 1.0, None)], False).scores
    typed = EntryResult(case_id="c", trace_id=None, status="passed", passed=True, pass_rate=1.0, scores=scores)
    with pytest.raises(ValueError, match="scores empty"):
        head_json(typed, b"[]")


def _tally(samples: int) -> CaseTally:
    tally = CaseTally.for_policy(POLICIES[0])
    for index in range(samples):
        tally.add(_sample(index, [("a", True, 1.0, None)], late=False))
    return tally


def _spec_router() -> SpecRouter:
    spec = compile_spec(validate_strictly({"cases": [{"id": "x", "input": "q"}, {"id": "y", "input": "r"}]}), "spec")
    return SpecRouter(spec, spec.cases)


def test_a_router_hands_over_its_cases_decided_as_the_parent_would_decide_them() -> None:
    router = _spec_router()
    router.state.tallies = {"x": _tally(1), "y": _tally(2)}
    state = router.hand_over()
    assert sorted(state.decided) == ["x", "y"]
    for case_id in ("x", "y"):
        # The parent deciding the same tally itself gives the same entry, byte for byte.
        assert state.decided[case_id] == _spec_router()._decide(case_id, state.tallies[case_id])
    # Handed over by pickling (to the parent process): the decisions travel with the state.
    assert pickle.loads(pickle.dumps(state)).decided == state.decided


def _decided(case_id: str, tally: CaseTally) -> Decided:
    fields = EntryFields(case_id, None, (), "mean", "passed", True, 1.0)
    return fields, f"{case_id}:{tally.samples}".encode()


def test_a_merge_keeps_only_the_cases_decided_on_all_their_samples() -> None:
    first = RouterState(tallies={"x": _tally(1), "y": _tally(2)})
    second = RouterState(tallies={"x": _tally(3), "z": _tally(1)})
    for state in (first, second):
        state.decided = {case_id: _decided(case_id, tally) for case_id, tally in state.tallies.items()}
    parent = RouterState()
    parent.merge(first)
    parent.merge(second)
    # "x" has samples in both: decided on a part of them, it is decided again by the parent.
    assert sorted(parent.decided) == ["y", "z"] and parent.tallies["x"].samples == 4
