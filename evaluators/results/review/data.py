"""What the review app shows: scoring runs and their entries from the store, traces from run folders.

A *source* is a stored scoring run (`run:<id>`) or the PATH arguments (`paths`: traces without
scores, one entry per trace). Entries are read from the run's scores table; a trace is found again
in the span files the run scored (its `inputs`, as named then), else among the PATH arguments'
traces, through the traces cache, and kept in memory once read. Every text leaves here as JSON
data (the page sets it as DOM text) except the trace tree, which is the HTML report's inert tree
(`report/trees.py`: every recorded text escaped).
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaltrace.collector import Trace
from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.review.calibration import is_judge
from evaltrace.evaluators.results.store.labels import Label, read_labels
from evaltrace.evaluators.results.store.reader import StoredRun, find_run, list_runs, read_run_scores

PATHS_SOURCE = "paths"
_FAILED = frozenset({"failed", "missing"})
_ENTRY_COLUMNS = ("entry_index", "case_id", "trace_id", "sample_index", "scorer", "passed", "value", "reason")
_MORE_COLUMNS = ("error", "tier", "entry_status", "sample_duration_seconds")


@dataclass(frozen=True)
class Filters:
    """The entry list's filters: failed only, a scorer, a case id glob, a tier."""

    failed: bool = False
    scorer: str = ""
    case: str = ""
    tier: str = ""


@dataclass
class ReviewData:
    """The store and the PATH arguments the app reviews; traces read once are kept."""

    store: Path
    paths: Sequence[str] = ()
    _traces: dict[str, Trace] = field(default_factory=dict)
    _path_traces: list[Trace] | None = None

    def sources(self) -> list[dict[str, Any]]:
        """The stored scoring runs (newest first), then the PATH arguments when given."""
        runs = list_runs(self.store) if self.store.is_dir() else []
        listed: list[dict[str, Any]] = [
            {
                "id": f"run:{run.run_id}",
                "title": f"{run.run_id} · {run.spec or 'defaults'} · {run.entries_passed}/{run.entries} passed",
                "gate_passed": run.gate_passed,
            }
            for run in reversed(runs)
        ]
        if self.paths:
            listed.append({"id": PATHS_SOURCE, "title": "traces in " + ", ".join(self.paths), "gate_passed": None})
        return listed

    def entries(self, source: str, filters: Filters) -> list[dict[str, Any]]:
        """The source's entries that pass `filters`, in report order."""
        return [entry for entry in self._entries(source) if _keep(entry, filters)]

    def entry(self, source: str, index: int) -> dict[str, Any]:
        """One entry whole: its samples' scores and trace trees, and the labels given so far.

        Raises:
            InputError: no such entry.
        """
        from evaltrace.evaluators.results.report.trees import trace_tree

        found = next((e for e in self._entries(source, whole=True) if e["index"] == index), None)
        if found is None:
            raise InputError(f"{source}: no entry {index}")
        run = None if source == PATHS_SOURCE else self._run(source)
        self._load_traces(run, [s["trace_id"] for s in found["samples"]])
        labels = {label.key: label for label in read_labels(self.store)} if self.store.is_dir() else {}
        for sample in found["samples"]:
            trace = self._traces.get(sample["trace_id"])
            sample["tree"] = None if trace is None else trace_tree(trace)
            keys = [(found["case_id"], sample["trace_id"], s) for s in ["", *(x["scorer"] for x in sample["scores"])]]
            sample["labels"] = {key[2]: labels[key].model_dump(mode="json") for key in keys if key in labels}
        found["run_id"] = None if run is None else run.run_id
        return found

    def check_label(self, label: Label) -> None:
        """Refuse a label of something this app does not show (its run's or the PATHs' entries).

        Raises:
            InputError: no entry of the label's run (or, without one, of the PATHs) has its case, trace
                and scorer.
        """
        source = PATHS_SOURCE if label.run_id is None else f"run:{label.run_id}"
        for entry in self._entries(source):
            if entry["case_id"] != label.case_id or (label.scorer and label.scorer not in entry["scorers"]):
                continue
            if any(sample["trace_id"] == label.trace_id for sample in entry["samples"]):
                return
        raise InputError(
            f"label: no entry of {source} has case {label.case_id!r}, trace {label.trace_id!r}"
            f" and scorer {label.scorer!r}"
        )

    def _run(self, source: str) -> StoredRun:
        if not source.startswith("run:"):
            raise InputError(f"unknown source {source!r}")
        return find_run(self.store, source.removeprefix("run:"))

    def _entries(self, source: str, *, whole: bool = False) -> list[dict[str, Any]]:
        if source == PATHS_SOURCE:
            return [_trace_entry(i, trace) for i, trace in enumerate(self._all_path_traces())]
        run = self._run(source)
        columns = _ENTRY_COLUMNS + _MORE_COLUMNS
        return _group_rows(read_run_scores(self.store, run, columns).to_pylist(), whole=whole)

    def _all_path_traces(self) -> list[Trace]:
        from evaltrace.collector.otlp.files.inputs import resolve_paths
        from evaltrace.collector.traces.cache import traces_of

        if self._path_traces is None:
            self._path_traces = list(traces_of(resolve_paths(self.paths), histories=False, cache=True))
            self._traces.update((t.trace_id, t) for t in self._path_traces)
        return self._path_traces

    def _load_traces(self, run: StoredRun | None, trace_ids: list[str]) -> None:
        from evaltrace.collector.otlp.files.inputs import resolve_paths
        from evaltrace.evaluators.results.report.trees import find_traces

        wanted = {t: i for i, t in enumerate(trace_ids) if t and t not in self._traces}
        if run is None or not wanted:
            return
        with contextlib.suppress(InputError, OSError):  # the span files moved, or the run's relative paths name nothing
            self._traces.update((t.trace_id, t) for t in find_traces(resolve_paths(run.inputs), wanted, cache=True))
        if self.paths and any(t not in self._traces for t in wanted):
            self._all_path_traces()  # the PATH arguments: where the user says the traces are now


def _entry(index: int, case_id: str | None, tier: str | None, status: str, failed: bool) -> dict[str, Any]:
    """An entry as the page reads it, its scorers and samples still to add."""
    entry = {"index": index, "case_id": case_id or "", "tier": tier or "", "status": status, "failed": failed}
    return {**entry, "scorers": [], "fails": [], "samples": []}


def _sample(trace_id: str, index: int, duration: float | None) -> dict[str, Any]:
    return {"trace_id": trace_id, "sample_index": index, "duration_seconds": duration, "scores": []}


def _trace_entry(index: int, trace: Trace) -> dict[str, Any]:
    entry = _entry(index, trace.case_id, None, trace.status, trace.status == "error")
    entry["samples"].append(_sample(trace.trace_id, 0, trace.duration_seconds))
    return entry


def _group_rows(rows: list[dict[str, Any]], *, whole: bool) -> list[dict[str, Any]]:
    """The scores rows of one run as entries (each with its samples and their scores)."""
    entries: dict[int, dict[str, Any]] = {}
    for row in rows:
        index, status = row["entry_index"], row["entry_status"]
        entry = entries.get(index)
        if entry is None:
            entry = entries[index] = _entry(index, row["case_id"], row["tier"], status, status in _FAILED)
        _add_row(entry, row, whole=whole)
    return list(entries.values())


def _add_row(entry: dict[str, Any], row: dict[str, Any], *, whole: bool) -> None:
    scorer = row["scorer"]
    if scorer is not None and scorer not in entry["scorers"]:
        entry["scorers"].append(scorer)
    if scorer is not None and row["passed"] is False and scorer not in entry["fails"]:
        entry["fails"].append(scorer)
    if row["trace_id"] is None:
        return
    samples = entry["samples"]
    if not samples or samples[-1]["sample_index"] != row["sample_index"]:
        samples.append(_sample(row["trace_id"], row["sample_index"], row["sample_duration_seconds"]))
    if whole and scorer is not None:
        score = {k: row[k] for k in ("scorer", "passed", "value", "reason", "error")}
        samples[-1]["scores"].append({**score, "judge": is_judge(scorer)})


def _keep(entry: dict[str, Any], filters: Filters) -> bool:
    if filters.failed and not entry["failed"]:
        return False
    if filters.tier and entry["tier"] != filters.tier:
        return False
    if (
        filters.case
        and not fnmatch.fnmatchcase(entry["case_id"], filters.case)
        and filters.case not in entry["case_id"]
    ):
        return False
    if filters.scorer:
        return filters.scorer in (entry["fails"] if filters.failed else entry["scorers"])
    return True
