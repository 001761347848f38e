"""One side of a comparison (BASE or NEW), read from a JSON report or from a scoring run in the score store.

A REF naming an existing file is a JSON report (`evaltrace score --json`); anything else is a
scoring-run id (or a unique prefix of one) looked up in the store. Both become a `Side`: per
entry its outcome and each scorer's outcome, the scorers' versions and configuration hashes, and
the run's latency, token and cost figures.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.report.model import EntryResult, Report, ScoreResult


@dataclass
class Outcome:
    """Passed, failed or (`None`) did not apply, with the reason of a failure."""

    passed: bool | None
    reason: str | None = None

    def merge(self, passed: bool | None, reason: str | None) -> None:
        """Fold in one more result: any failure fails, a pass counts only while nothing failed."""
        if passed is False and self.passed is not False:
            self.passed, self.reason = False, reason
        elif passed and self.passed is None:
            self.passed = True


@dataclass
class SideEntry:
    """One entry of a run: a spec case, or a trace scored without a spec."""

    case_id: str | None
    trace_id: str | None
    outcome: Outcome
    scorers: dict[str, Outcome] = field(default_factory=dict)


@dataclass(frozen=True)
class RunStats:
    """The run's latency, tokens and cost (`None` where the run has no figure)."""

    latency_p50_seconds: float | None = None
    latency_p95_seconds: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None
    cost_usd: float | None = None


@dataclass
class Side:
    """A scoring run as compared: its label (the REF), entries, scorers and statistics."""

    label: str
    entries: list[SideEntry]
    scorers: set[tuple[str, int, str]]
    """`(name, version, config hash)` of every scorer configuration that ran."""
    stats: RunStats


def load_side(ref: str, store: str | Path | None) -> Side:
    """The run REF names: a JSON report file, else a scoring run in `store`.

    Raises:
        InputError: REF is neither a readable report nor a stored run (the message names it).
    """
    path = Path(ref)
    if path.is_file():
        return side_from_report(ref, _read_report(path))
    if path.exists():
        raise InputError(f"{ref}: not a file (give a JSON report or a scoring-run id)")
    if store is None or not Path(store).is_dir():
        raise InputError(f"{ref}: no such report file, and no score store to look the run id up in ({store})")
    try:
        return _side_from_store(ref, store)
    except InputError as exc:
        raise InputError(f"{ref}: no such report file; {exc}") from None


def side_from_report(label: str, report: Report, entries: list[SideEntry] | None = None) -> Side:
    """A `Side` from a report held in memory: its own entries, or `entries` kept as they streamed past."""
    stats = RunStats(
        latency_p50_seconds=report.latency.p50_seconds,
        latency_p95_seconds=report.latency.p95_seconds,
        input_tokens=report.usage.input_tokens,
        output_tokens=report.usage.output_tokens,
        cost_usd=report.cost.estimated_usd,
    )
    scorers = {(s.name, s.version, s.config_hash) for s in report.scorers}
    if entries is None:
        entries = [report_entry(entry) for entry in report.entries]
    return Side(label, entries, scorers, stats)


def _read_report(path: Path) -> Report:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a JSON report of evaltrace score ({_short(exc)})") from None
    if not isinstance(data, dict) or "entries" not in data or "schema_version" not in data:
        raise InputError(f"{path}: not a JSON report of evaltrace score (no schema_version and entries)")
    try:
        return Report.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(f"{path}: not a valid evaltrace report: {where}: {first['msg']}") from None


def report_entry(entry: EntryResult) -> SideEntry:
    """What a comparison keeps of a report's entry: its outcome and each scorer's, not its samples."""
    scorers: dict[str, Outcome] = {}
    _merge_scores(scorers, entry.scores)
    if not entry.scores:  # an entry written without entry-level scores: its samples decide
        for sample in entry.samples:
            _merge_scores(scorers, sample.scores)
    return SideEntry(entry.case_id, entry.trace_id, Outcome(entry.passed, entry.reason), scorers)


def _merge_scores(scorers: dict[str, Outcome], scores: Iterable[ScoreResult]) -> None:
    for score in scores:
        passed = False if score.error is not None else score.passed
        scorers.setdefault(score.scorer, Outcome(None)).merge(passed, score.error or score.reason)


def _side_from_store(ref: str, store: str | Path) -> Side:
    # Imported here: reading a JSON report needs neither the store nor pyarrow.
    from evaltrace.evaluators.results.store.reader import find_run, read_scores

    run = find_run(store, ref)
    stats = RunStats(**run.model_dump(include={f.name for f in fields(RunStats)}))  # the runs table's columns
    scorers = {(s.name, s.version, s.config_hash) for s in run.scorers}
    rows = read_scores(store, run.run_id).to_pylist()
    return Side(run.run_id, _stored_entries(rows), scorers, stats)


def _stored_entries(rows: Iterable[dict[str, Any]]) -> list[SideEntry]:
    """Entries from the scores table's rows (one per entry, sample and scorer result, in report order)."""
    entries: dict[int, SideEntry] = {}
    for row in rows:
        entry = entries.get(row["entry_index"])
        if entry is None:
            outcome = Outcome(row["entry_passed"])
            entry = entries[row["entry_index"]] = SideEntry(row["case_id"], row["trace_id"], outcome)
        if row["scorer"] is None:
            continue
        reason = row["error"] or row["reason"]
        entry.scorers.setdefault(row["scorer"], Outcome(None)).merge(row["passed"], reason)
        if row["passed"] is False and entry.outcome.reason is None:
            entry.outcome.reason = f"{row['scorer']}: {reason}"
    return list(entries.values())


def _short(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]
