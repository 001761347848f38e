"""Where scored samples go: one entry per trace without a spec, to the matching cases with one.

A router turns each trace into scoring jobs (`route`, then `finish` once the input has ended),
parks each finished sample on the run's `Spill` (`keep`), and at the end sends the entries in
report order to an `EntrySink` while counting what the report's header needs (`emit`).
Matching rules: see `evaluators/engine/scoring.py`.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from operator import attrgetter
from typing import Any, Protocol, get_args

import pyarrow as pa
import pyarrow.compute as pc

from evaltrace.collector.arrow_arrays import column
from evaltrace.collector.traces.records import Trace
from evaltrace.evaluators.engine._aggregate import (
    CaseTally,
    Decided,
    ScorerTally,
    decide_case_json,
    passing_entry_json,
    trace_entry,
)
from evaltrace.evaluators.engine._spill import Added, Spill
from evaltrace.evaluators.engine.sample import RunStats, score_conversation, score_trace
from evaltrace.evaluators.results.report.model import (
    EntryResult,
    EntryStatus,
    SampleResult,
    SampleStatus,
    UnmatchedTrace,
)
from evaltrace.evaluators.results.report.sample_row import SampleRow, sample_jsons
from evaltrace.evaluators.results.report.terminal import FailureDigest
from evaltrace.evaluators.results.report.writer import EntryFields, EntrySink, ReportEntry, park
from evaltrace.evaluators.results.store.identities import ScorerIdentity
from evaltrace.evaluators.results.store.rows import ScorerIndex, entry_rows
from evaltrace.evaluators.results.store.sides import SampleSide, pack_sides
from evaltrace.evaluators.results.store.writer import store_writer
from evaltrace.evaluators.scoring.scorers.base import Scorer
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec
from evaltrace.evaluators.scoring.spec.model import Case, RepeatPolicy, normalize_input
from evaltrace.evaluators.scoring.spec.scorer_infos import ScorerList, distinct, scorer_row

_UNMATCHED_INPUT_CHARS = 200
_SAMPLE_STATUSES: tuple[SampleStatus, ...] = get_args(SampleStatus)
_NAMED = attrgetter("scorer", "turn")
"""What pairs a result with its case's scorer (`ScorerPairing.identities`)."""
_LISTED = frozenset({"failed", "missing"})
"""The entries `FailureDigest` keeps."""

Job = Coroutine[Any, Any, tuple[str | None, SampleResult]]


class SampleSpill(Protocol):
    """Where a router parks scored samples: a `Spill`, or a worker's pipe to its parent's spill."""

    def add_rows(self, rows: Iterable[Added]) -> None:
        """Park results' JSON, each under its group, in order: a call's at once (see `Spill.add_rows`)."""


@dataclass
class RouterState:
    """What a router holds besides parked samples: a worker hands it to its parent at the end."""

    conversations: dict[str, list[Trace]] = field(default_factory=dict)
    """Traces held for multi-turn cases, by conversation key; complete only once all input is read."""
    unmatched: list[UnmatchedTrace] = field(default_factory=list)
    tallies: dict[str, CaseTally] = field(default_factory=dict)
    """Per case, what deciding it needs from its parked samples (so they are not read back for it)."""
    scorer_tally: ScorerTally = field(default_factory=ScorerTally)
    """Per scorer, its verdicts so far (the summary's scorer table)."""
    decided: dict[str, Decided] = field(default_factory=dict)
    """Cases decided from their tally by a worker when it handed this state over (`hand_over`), in
    parallel with the other workers; kept only while no other part of the run adds to the case
    (`merge` with another worker's samples of it, or a conversation scored later)."""
    whole: dict[str, EntryFields] = field(default_factory=dict)
    """Cases whose first sample was parked as their whole entry (`SpecRouter.keep_rows`), without a tally:
    only where the spill is the emitting process's own (never handed over, never merged)."""
    stored: list[pa.RecordBatch] = field(default_factory=list)
    """The score store's rows of those entries (`rows.entry_rows`)."""

    def merge(self, other: RouterState) -> None:
        """Take over `other`'s conversations (joined by key), unmatched traces (after ours) and tallies."""
        for key, traces in other.conversations.items():
            self.conversations.setdefault(key, []).extend(traces)
        self.unmatched.extend(other.unmatched)
        self.scorer_tally.merge(other.scorer_tally)
        for case_id, tally in other.tallies.items():
            if case_id in self.tallies:
                self.tallies[case_id].merge(tally)
                self.decided.pop(case_id, None)  # decided on a part of its samples
            else:
                self.tallies[case_id] = tally
                if case_id in other.decided:
                    self.decided[case_id] = other.decided[case_id]


class Totals:
    """What the report's header and the summary need from the entries, added in report order."""

    def __init__(self) -> None:
        self.statuses: Counter[str] = Counter()
        self.rates: array[float] = array("d")
        self.digest = FailureDigest()

    @property
    def entries(self) -> int:
        return sum(self.statuses.values())

    def add(self, status: EntryStatus, pass_rate: float | None) -> None:
        self.statuses[status] += 1
        if pass_rate is not None:
            self.rates.append(pass_rate)


class TraceRouter:
    """Without a spec: every trace is scored by the defaults and is its own entry."""

    def __init__(self, scorers: tuple[Scorer, ...]) -> None:
        self._scorers = scorers
        self.state = RouterState()

    @property
    def unmatched(self) -> list[UnmatchedTrace]:
        return self.state.unmatched

    def scorers(self) -> list[Scorer]:
        return list(self._scorers)

    def scorer_infos(self) -> ScorerList:
        """The report's scorer list."""
        return distinct(scorer_row(scorer) for scorer in self._scorers)

    def route(self, trace: Trace, stats: RunStats) -> list[Job]:
        return [_keyed(trace.case_id, score_trace(trace, None, self._scorers, stats))]

    def hand_over(self) -> RouterState:
        """What a worker gives its parent when its input has ended: every entry is already built."""
        return self.state

    def finish(self, stats: RunStats) -> list[Job]:
        return []

    def keep(self, spill: SampleSpill, case_id: str | None, sample: SampleResult) -> None:
        # The entry is built now (it needs only its sample) and parked whole; its status rides in the tag.
        self.state.scorer_tally.add(sample.scores)
        built = trace_entry(sample, case_id)
        payload = built.model_dump_json().encode()
        spill.add_rows([("", sample.start_time, sample.trace_id, payload, _SAMPLE_STATUSES.index(built.status))])

    def emit(self, spill: Spill, totals: Totals, sink: EntrySink | None) -> None:
        for tag, payload in spill.ordered(""):
            status = _SAMPLE_STATUSES[tag]
            totals.add(status, None if status == "not_applicable" else float(status == "passed"))
            if status == "failed" and totals.digest.full:
                totals.digest.add_omitted()
            elif status == "failed":
                totals.digest.add(EntryResult.model_validate_json(payload), 1)
            if sink is not None:
                sink.add(ReportEntry.from_json(payload))


class SpecRouter:
    """With a spec: traces go to the cases they match; conversations wait for the input to end."""

    def __init__(self, spec: LoadedSpec, selected: list[Case], *, pack_sides: bool = True) -> None:
        self.spec = spec
        self._pack_sides = pack_sides
        """Park each sample with its score-store values (`pack_sides`); off when no store reads them."""
        self.selected = selected
        self.selected_ids = {case.id for case in selected}
        cases = spec.spec.cases
        self._by_id = {case.id: case for case in cases}
        self._by_input = spec.by_input  # made when the spec was compiled
        self.has_multi_turn = any(case.turns is not None for case in cases)
        self._policies: dict[str, RepeatPolicy] = {}
        self._pairing = ScorerIndex(spec)
        self._positions = {case.id: position for position, case in enumerate(selected)}
        self.state = RouterState()

    @property
    def unmatched(self) -> list[UnmatchedTrace]:
        return self.state.unmatched

    def scorers(self) -> list[Scorer]:
        return [s for case in self.selected for turn in self.spec.case_scorers[case.id] for s in turn]

    def scorer_infos(self) -> ScorerList:
        """The report's scorer list, from the rows the spec made when it was compiled."""
        return self.spec.scorer_infos(self.selected)

    def route(self, trace: Trace, stats: RunStats) -> list[Job]:
        cases = self._cases_for(trace)
        single = [case for case in cases if case.turns is None]
        if single:
            return [self._job(case, trace, stats) for case in single if case.id in self.selected_ids]
        if self.has_multi_turn and (cases or trace.conversation_id is not None):
            # Maybe a turn of a conversation: decided once all its traces are in (see finish).
            self.state.conversations.setdefault(trace.conversation_id or f"trace:{trace.trace_id}", []).append(trace)
            return []
        self.add_unmatched(trace.trace_id, trace.input)
        return []

    def _cases_for(self, trace: Trace) -> list[Case]:
        return self.cases_for(trace.case_id, trace.input)

    def cases_for(self, case_id: str | None, text: str | None) -> list[Case]:
        """The cases a trace with this case id and input matches (selected or not)."""
        if case_id is not None and case_id in self._by_id:
            return [self._by_id[case_id]]
        return self._by_input.get(normalize_input(text) or "", [])

    def _job(self, case: Case, trace: Trace, stats: RunStats) -> Job:
        return _keyed(case.id, score_trace(trace, case, self.spec.case_scorers[case.id][0], stats))

    def add_unmatched(self, trace_id: str, text: str | None) -> None:
        """Note a trace that matches no case (its input cut short)."""
        short = text[:_UNMATCHED_INPUT_CHARS] if text is not None else None
        self.unmatched.append(UnmatchedTrace(trace_id=trace_id, input=short))

    def finish(self, stats: RunStats) -> list[Job]:
        jobs: list[Job] = []
        for traces in self.state.conversations.values():
            traces.sort(key=lambda t: (t.start_time or datetime.max.replace(tzinfo=UTC), t.trace_id))
            case = self._conversation_case(traces)
            if case is None:
                for trace in traces:
                    self.add_unmatched(trace.trace_id, trace.input)
            elif case.id in self.selected_ids:
                turn_scorers = self.spec.case_scorers[case.id]
                jobs.append(_keyed(case.id, score_conversation(traces, case, turn_scorers, stats)))
        self.state.conversations.clear()
        return jobs

    def _conversation_case(self, traces: list[Trace]) -> Case | None:
        for trace in traces:
            case = self._by_id.get(trace.case_id or "")
            if case is not None and case.turns is not None:
                return case
        candidates = self._by_input.get(normalize_input(traces[0].input) or "", [])
        return next((case for case in candidates if case.turns is not None), None)

    def keep(self, spill: SampleSpill, case_id: str | None, sample: SampleResult) -> None:
        if case_id is not None:
            self.keep_rows(spill, [(case_id, SampleRow.of(sample))])

    def keep_rows(self, spill: SampleSpill, rows: Sequence[tuple[str, SampleRow]], *, whole: bool = False) -> None:
        """Keep samples, each of its case, given as values (the warm path keeps a batch's at once, from columns).

        `whole`: a passing sample, so far its case's only one, is parked as the case's whole entry
        (`_keep_whole`): the in-process warm path's (a row's scores are its case's scorers', in order),
        whose `emit` reads them back.
        """
        state = self.state
        state.scorer_tally.add(*(sample.scores for _, sample in rows))  # in the rows' order: the table's first-seen
        jsons = sample_jsons([sample for _, sample in rows])
        if whole:
            rows, jsons = self._keep_whole(spill, rows, jsons)
        samples = [sample for _, sample in rows]
        by_case: dict[str, list[SampleRow]] = {}
        for case_id, sample in rows:
            by_case.setdefault(case_id, []).append(sample)
        for case_id, kept in by_case.items():
            state.decided.pop(case_id, None)  # a sample scored after the hand-over (a conversation)
            tally = state.tallies.get(case_id)
            if tally is None:
                tally = state.tallies[case_id] = CaseTally.for_policy(self._policy(self._by_id[case_id]))
            tally.add(*kept)
        # Parked with the values the score store needs, so it never parses the JSON back.
        # The scorers are paired (and hashed) here: in a sharded run, by the worker that scored the sample.
        sides = pack_sides(samples, self._identities(rows)) if self._pack_sides else [b""] * len(rows)
        spill.add_rows(
            (case_id, sample.start_time, sample.trace_id, park(payload, side), 0)
            for (case_id, sample), (payload, _), side in zip(rows, jsons, sides, strict=True)
        )

    def _identities(self, rows: Sequence[tuple[str, SampleRow]]) -> list[list[ScorerIdentity | None]]:
        """Each sample's scorers (`ScorerPairing.identities`), paired once per case and scorer names."""
        paired: dict[tuple[str, tuple[Any, ...]], list[ScorerIdentity | None]] = {}
        found = []
        for case_id, sample in rows:
            key = (case_id, tuple(map(_NAMED, sample.scores)))
            if (identities := paired.get(key)) is None:
                identities = paired[key] = self._pairing.identities(case_id, sample.scores)
            found.append(identities)
        return found

    def _keep_whole(
        self, spill: SampleSpill, rows: Sequence[tuple[str, SampleRow]], jsons: list[tuple[bytes, bytes]]
    ) -> tuple[list[tuple[str, SampleRow]], list[tuple[bytes, bytes]]]:
        """Park each passing sample that is so far its case's only one as the case's whole entry; returns the others.

        The entry's JSON is the one `decide_case_json` gives a case of that one sample (`passing_entry_json`),
        parked with the sample's (and its store values, `pack_sides`), its head's length as the record's tag;
        its store rows are made per batch, from the samples' values (`entry_rows`). A case that gets another
        sample is tallied at the end (`_unfold`), its record read as any other sample's (its head left out, `Parked`).
        """
        state, left, samples, paired = self.state, [], [], []
        entries: list[tuple[int, EntryFields, int]] = []  # what `entry_rows` takes of each, but its values
        parked: list[tuple[str, bytes, int]] = []  # case, the entry's JSON to its sample's end, its head's length
        for row, found in zip(rows, jsons, strict=True):
            case_id, sample = row
            case, policy = self._by_id[case_id], self._policy(self._by_id[case_id])
            taken = case_id in state.whole or case_id in state.tallies
            if taken or sample.status != "passed" or policy.min_samples > 1:
                left.append((row, found))
                continue
            fields, head = passing_entry_json(case, policy, sample, found[1])
            state.whole[case_id] = fields
            entries.append((self._positions[case_id], fields, policy.min_samples))
            samples.append(sample)
            paired.append([self._pairing.identity(scorer) for scorer in self.spec.case_scorers[case_id][0]])
            parked.append((case_id, head + found[0], len(head)))
        sides: list[SampleSide] = []
        packed = pack_sides(samples, paired, sides) if self._pack_sides else [b""] * len(samples)
        spill.add_rows(
            (case_id, sample.start_time, sample.trace_id, park(json, side), tag)
            for (case_id, json, tag), sample, side in zip(parked, samples, packed, strict=True)
        )
        if entries and self._pack_sides:
            state.stored.append(entry_rows([(*entry, side) for entry, side in zip(entries, sides, strict=True)]))
        return [row for row, _ in left], [found for _, found in left]

    def _policy(self, case: Case) -> RepeatPolicy:
        policy = self._policies.get(case.id)
        if policy is None:
            policy = self._policies[case.id] = self.spec.spec.repeat_for(case)
        return policy

    def emit(self, spill: Spill, totals: Totals, sink: EntrySink | None) -> None:
        unfolded, store = self._unfold(spill), store_writer(sink)
        taken = column([self._positions[case_id] for case_id in unfolded], pa.int32())
        for rows in self.state.stored:  # given first: the store sorts them in
            kept = rows.filter(pc.invert(pc.is_in(rows.column("entry_index"), taken)))
            if store is not None and kept.num_rows:  # none: the store streams its rows as they come
                store.add_rows(kept)
        for case in self.selected:
            whole, known = self.state.whole.get(case.id), self.state.decided.get(case.id)
            if whole is not None:
                totals.add(whole.status, whole.pass_rate)
                if sink is not None:  # its JSON and store rows made when it was kept
                    ((_, json),) = spill.parked(case.id).samples()  # its head included
                    sink.add(ReportEntry.from_json(json + b"]}", stored=self._pack_sides))
                continue
            fields, head = known if known is not None else self._decide(case.id, self._tally(case))
            totals.add(fields.status, fields.pass_rate)
            if fields.status in _LISTED and totals.digest.full:
                totals.digest.add_omitted()
            elif fields.status in _LISTED:  # the summary lists these, failing scores and all
                totals.digest.add(EntryResult.model_validate_json(head + b"]}"), spill.count(case.id))
            if sink is not None:  # the samples' JSON is only copied to the sink
                sink.add(ReportEntry.decided(head, fields, partial(spill.parked, case.id)))

    def _unfold(self, spill: Spill) -> set[str]:
        """Tally the cases parked whole that got more samples (decided as any other, heads left out); returns them."""
        state, unfolded = self.state, set()
        for case_id in [case_id for case_id in state.whole if case_id in state.tallies or spill.count(case_id) > 1]:
            tally = state.tallies.setdefault(case_id, self._tally(self._by_id[case_id]))
            for head, json in spill.parked(case_id).samples():
                if head:
                    tally.add(SampleRow.of(SampleResult.model_validate_json(json[head:])))
            del state.whole[case_id]
            state.decided.pop(case_id, None)
            unfolded.add(case_id)
        return unfolded

    def _tally(self, case: Case) -> CaseTally:
        return self.state.tallies.get(case.id) or CaseTally.for_policy(self._policy(case))

    def _decide(self, case_id: str, tally: CaseTally) -> Decided:
        """Decide a case from the tally kept as its samples were scored (no sample is read back)."""
        case = self._by_id[case_id]
        return decide_case_json(case, self._policy(case), tally)

    def hand_over(self) -> RouterState:
        """What a worker gives its parent when its input has ended: the state, its cases decided.

        Deciding here spreads the work over the workers; the parent keeps a decision only while no
        other part of the run adds samples to its case (see `RouterState.decided`).
        """
        state = self.state
        state.decided = {case_id: self._decide(case_id, tally) for case_id, tally in state.tallies.items()}
        return state


async def _keyed(key: str | None, job: Coroutine[Any, Any, SampleResult]) -> tuple[str | None, SampleResult]:
    return key, await job
