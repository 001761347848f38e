"""Reading the score store: the scoring runs it holds, and one run's scores.

Runs are listed from the runs files only, so an interrupted scoring (a scores file without its
run row) is never seen. A run is named by its id, or by a prefix of it that only one run has
(ids are case-insensitive, as Crockford base32 is).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.store.schema import RUNS_FOLDER, STORE_SCHEMA_VERSION, TABLE_KEY, VERSION_KEY

LISTED_IDS = 5
"""How many of the latest run ids an "unknown run" error lists."""


class StoredScorer(BaseModel):
    """A scorer that ran in a stored scoring run."""

    name: str
    version: int
    config_hash: str
    config: dict[str, Any] = Field(default_factory=dict)


class StoredRun(BaseModel):
    """One row of the runs table (the columns are documented in `schema.py`)."""

    model_config = ConfigDict(extra="ignore")

    run_id: str
    started_at: datetime
    finished_at: datetime
    spec: str | None
    spec_sha256: str | None
    inputs: list[str]
    tiers: list[str]
    tags: list[str]
    cases: list[str]
    evaltrace_version: str
    report_schema_version: int
    gate_passed: bool
    gate_pass_rate: float | None
    gate_confidence: float
    gate_reason: str
    entries: int
    entries_passed: int
    entries_failed: int
    entries_missing: int
    entries_not_applicable: int
    traces: int
    traces_unmatched: int
    score_rows: int
    scorer_errors: int
    scorers: list[StoredScorer]
    latency_p50_seconds: float | None
    latency_p95_seconds: float | None
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    scores_file: str


def list_runs(store: str | Path) -> list[StoredRun]:
    """The complete scoring runs in `store`, oldest first (an empty list for an empty store).

    Raises:
        InputError: `store` is not a folder, or one of its runs files is unreadable or newer than
            this evaltrace reads.
    """
    folder = _store(store)
    runs_folder = folder / RUNS_FOLDER
    files = sorted(runs_folder.glob("*.parquet")) if runs_folder.is_dir() else []
    return sorted((run for file in files for run in _runs_of(file)), key=lambda run: run.run_id)


def find_run(store: str | Path, run_id: str) -> StoredRun:
    """The run `run_id` names: its id, or a prefix of it no other run has.

    Raises:
        InputError: no run (or several) matches; the message lists the latest run ids.
    """
    runs = list_runs(store)
    wanted = run_id.strip().upper()
    exact = [run for run in runs if run.run_id == wanted]
    matches = exact or ([run for run in runs if run.run_id.startswith(wanted)] if wanted else [])
    if len(matches) == 1:
        return matches[0]
    if not runs:
        raise InputError(f"{store}: no scoring run is stored here yet (looked for {run_id!r})")
    if matches:
        listed = ", ".join(run.run_id for run in matches[-LISTED_IDS:])
        raise InputError(f"{store}: {run_id!r} names {len(matches)} scoring runs ({listed}); give more of the id")
    latest = ", ".join(run.run_id for run in reversed(runs[-LISTED_IDS:]))
    raise InputError(f"{store}: no scoring run {run_id!r} (latest: {latest})")


def read_scores(store: str | Path, run_id: str) -> pa.Table:
    """The scores table of the run `run_id` names (see `find_run`), in report order.

    Raises:
        InputError: the run is unknown, or its scores file is missing or unreadable.
    """
    run = find_run(store, run_id)
    return _read(Path(store) / run.scores_file, "scores")


def read_run_scores(store: str | Path, run: StoredRun, columns: Sequence[str] | None = None) -> pa.Table:
    """The scores table of `run` (as `list_runs` returned it), only `columns` when given.

    For readers of many runs (history): it does not list the store again, as `read_scores` does.

    Raises:
        InputError: the run's scores file is missing or unreadable.
    """
    return _read(Path(store) / run.scores_file, "scores", columns)


def read_table(file: Path, table: str) -> pa.Table:
    """One store file of `table` (any of the store's tables), checked like the runs and scores files.

    Raises:
        InputError: the file is unreadable, not of `table`, or of a newer schema version.
    """
    return _read(file, table)


def _store(store: str | Path) -> Path:
    folder = Path(store)
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise InputError(f"{folder}: no score store here: the folder {what} (score with --store {folder} first)")
    return folder


def _runs_of(file: Path) -> list[StoredRun]:
    rows = _read(file, "runs").to_pylist()
    for row in rows:
        row["scorers"] = [{**s, "config": json.loads(s["config"] or "{}")} for s in row["scorers"] or []]
    return [StoredRun.model_validate(row) for row in rows]


def _read(file: Path, table: str, columns: Sequence[str] | None = None) -> pa.Table:
    """A store file of `table` (only `columns`, when given), checked to be one and of a version this evaltrace reads."""
    try:
        data = pq.read_table(file, columns=None if columns is None else list(columns))
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{file}: cannot read the score store file: {exc}") from None
    metadata = data.schema.metadata or {}
    if metadata.get(TABLE_KEY) != table.encode():
        raise InputError(f"{file}: not a {table} file of a score store (no evaltrace.store.table = {table})")
    version = metadata.get(VERSION_KEY, b"")
    if not version.isdigit() or int(version) > STORE_SCHEMA_VERSION:
        raise InputError(
            f"{file}: store schema version {version.decode(errors='replace')!r}; this evaltrace reads "
            f"up to {STORE_SCHEMA_VERSION} (upgrade evaltrace)"
        )
    return data


def spec_sha256(path: str) -> str | None:
    """The hash of the spec file's bytes (the store's `spec_sha256`); `None` if it cannot be read now."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
