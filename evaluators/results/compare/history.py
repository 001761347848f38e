"""`evaltrace history`: each scorer's pass rate, and the gate's, across the scoring runs in the score store.

Runs are taken oldest first (run ids are ULIDs, so their order is the runs table's start time).
A scorer's pass rate in a run is its results that passed over those that applied (passed or
failed; an error fails), as the report's scorer counts and the DuckDB query of docs/reports.md counts them.
A point is marked `changed` when the scorer's set of (version, configuration hash) differs from
the previous run it ran in (for the gate: when the spec file's hash differs from the previous
run's), so a series split by a spec edit or a scorer upgrade is never read as a trend.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.store.reader import StoredRun, list_runs, read_run_scores, spec_sha256

HISTORY_SCHEMA_VERSION = 1
"""Bumped when a field of the `--json` output changes name, type or meaning."""
DEFAULT_LAST = 20
"""Runs shown without `--last`."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScorerConfig(_Model):
    """One configuration of a scorer in a run (a scorer runs once per distinct configuration of a spec)."""

    version: int
    config_hash: str


class ScorerPoint(_Model):
    """One scorer in one run: its results' counts and pass rate."""

    run_id: str
    passed: int = 0
    failed: int = 0
    """Failures and errors (an error fails its entry as a failure does)."""
    errors: int = 0
    """Of `failed`, the results where the scorer could not run."""
    not_applied: int = 0
    pass_rate: float | None = None
    """`passed / (passed + failed)`; `None` when the scorer did not run or nothing applied."""
    configs: list[ScorerConfig] = Field(default_factory=list)
    """The scorer's versions and configuration hashes in the run (empty: it did not run)."""
    changed: bool = False
    """The configurations differ from the previous run the scorer ran in."""


class ScorerSeries(_Model):
    """One scorer's points, one per run of `History.runs`, in the same order."""

    scorer: str
    points: list[ScorerPoint]


class RunPoint(_Model):
    """One scoring run and its gate."""

    run_id: str
    started_at: datetime
    spec: str | None
    spec_sha256: str | None
    gate_passed: bool
    gate_pass_rate: float | None
    entries: int
    entries_passed: int
    entries_failed: int
    spec_changed: bool = False
    """The spec file's hash differs from the previous run's (the gate's series is split there)."""


class History(_Model):
    """What `--json` writes: the runs oldest first, and each scorer's series over them."""

    schema_version: int = HISTORY_SCHEMA_VERSION
    store: str
    spec: str | None = None
    """The `--spec` the runs were selected by, if any."""
    runs_in_store: int
    """Runs the store holds (before `--spec` and `--last`)."""
    runs: list[RunPoint]
    scorers: list[ScorerSeries]


class HistoryOptions(_Model):
    """Which runs and scorers `evaltrace history` shows."""

    last: int = Field(DEFAULT_LAST, ge=1)
    """The newest runs kept."""
    scorers: list[str] = Field(default_factory=list)
    """Only these scorers (empty: every scorer that ran in the runs kept)."""
    spec: str | None = None
    """Only runs scored with this spec file (by path as the runs table names it, or by content hash)."""


def load_history(store: str | Path, options: HistoryOptions) -> History:
    """Each scorer's pass rate and the gate's across the store's runs (see the module docstring).

    Raises:
        InputError: no store, no run (or none of `--spec`), or a `--scorer` no kept run has.
    """
    stored = list_runs(store)
    if not stored:
        raise InputError(f"{store}: the score store holds no scoring run yet (score with --store {store} first)")
    selected = _runs_of_spec(stored, options.spec) if options.spec is not None else stored
    names = _scorer_names(selected)
    _check_scorers(options.scorers, names)
    configs = [_configs_by_scorer(run) for run in selected]
    window = range(max(0, len(selected) - options.last), len(selected))
    shown = options.scorers or [n for n in names if any(n in configs[i] for i in window)]
    counts = {i: _scorer_counts(store, selected[i]) for i in window}
    series = [
        ScorerSeries(scorer=name, points=[_point(selected, configs, counts, i, name) for i in window]) for name in shown
    ]
    runs = [_run_point(selected[i], selected[i - 1] if i > 0 else None) for i in window]
    return History(store=str(store), spec=options.spec, runs_in_store=len(stored), runs=runs, scorers=series)


def _runs_of_spec(runs: list[StoredRun], spec: str) -> list[StoredRun]:
    """The runs scored with `spec`: the same path (as named, or the same file) or the same bytes."""
    digest = spec_sha256(spec)  # None when the file is gone: runs can still match by the path they recorded
    kept = [run for run in runs if (digest is not None and run.spec_sha256 == digest) or _same_path(run.spec, spec)]
    if not kept:
        named = sorted({run.spec or "(no spec)" for run in runs})
        listed = ", ".join(named[:10]) + (", ..." if len(named) > 10 else "")
        raise InputError(f"--spec {spec}: no stored scoring run used this spec (specs in the store: {listed})")
    return kept


def _same_path(stored: str | None, spec: str) -> bool:
    if stored is None:
        return False
    path = stored.split("::", 1)[0]  # FILE::CASE_ID scored one case of FILE
    if os.path.normpath(path) == os.path.normpath(spec):
        return True
    try:
        return os.path.samefile(path, spec)
    except OSError:  # either file is gone, or the run named it relative to another folder
        return False


def _scorer_names(runs: Iterable[StoredRun]) -> list[str]:
    """Every scorer that ran, in the order first seen (oldest run first, then the run's own order)."""
    return list(dict.fromkeys(scorer.name for run in runs for scorer in run.scorers))


def _check_scorers(wanted: Sequence[str], names: Sequence[str]) -> None:
    for name in wanted:
        if name not in names:
            valid = ", ".join(sorted(names)) or "none"
            raise InputError(f"--scorer {name}: no such scorer in the stored runs (scorers: {valid})")


def _configs_by_scorer(run: StoredRun) -> dict[str, list[ScorerConfig]]:
    found: dict[str, set[tuple[int, str]]] = {}
    for scorer in run.scorers:
        found.setdefault(scorer.name, set()).add((scorer.version, scorer.config_hash))
    return {name: [ScorerConfig(version=v, config_hash=h) for v, h in sorted(pairs)] for name, pairs in found.items()}


def _point(
    runs: list[StoredRun],
    configs: list[dict[str, list[ScorerConfig]]],
    counts: dict[int, dict[str, ScorerPoint]],
    index: int,
    name: str,
) -> ScorerPoint:
    point = counts[index].get(name, ScorerPoint(run_id=runs[index].run_id))
    point.configs = configs[index].get(name, [])
    earlier = next((c[name] for c in reversed(configs[:index]) if name in c), None)
    point.changed = bool(point.configs) and earlier is not None and earlier != point.configs
    return point


def _scorer_counts(store: str | Path, run: StoredRun) -> dict[str, ScorerPoint]:
    """Per scorer, its results in the run's scores table counted (rows without a scorer left out)."""
    table = read_run_scores(store, run, ["scorer", "passed", "error"])
    table = table.filter(pc.is_valid(table["scorer"]))
    table = table.append_column("passed_int", pc.cast(table["passed"], pa.int64()))
    grouped = table.group_by("scorer").aggregate(
        [("passed_int", "sum"), ("passed", "count"), ("error", "count"), ([], "count_all")]
    )
    points: dict[str, ScorerPoint] = {}
    for row in grouped.to_pylist():
        passed, applied = row["passed_int_sum"] or 0, row["passed_count"]
        points[row["scorer"]] = ScorerPoint(
            run_id=run.run_id,
            passed=passed,
            failed=applied - passed,
            errors=row["error_count"],
            not_applied=row["count_all"] - applied,
            pass_rate=passed / applied if applied else None,
        )
    return points


def _run_point(run: StoredRun, previous: StoredRun | None) -> RunPoint:
    shown = run.model_dump(include=RunPoint.model_fields.keys() - {"spec_changed"})
    return RunPoint(**shown, spec_changed=previous is not None and previous.spec_sha256 != run.spec_sha256)
