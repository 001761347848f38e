"""Writing one scoring run into the score store: a `ReportFormat` fed the entries as they come.

Both files of the run are opened under hidden temporary names when the writer is made (so a store
that cannot be written is reported before any scoring work). Entries become rows of the scores
table, written to Parquet a row group at a time, so memory stays bounded by one batch. `finish`
renames the scores file into place, then writes and renames the run's row: the run is listed
only once complete. Nothing already in the store is ever rewritten, and two scorings at once
write different files.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from evaltrace.collector.arrow_arrays import column, micros
from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.report.model import REPORT_SCHEMA_VERSION, Report
from evaltrace.evaluators.results.report.writer import ReportEntry
from evaltrace.evaluators.results.store.location import new_run_id, store_error
from evaltrace.evaluators.results.store.reader import spec_sha256
from evaltrace.evaluators.results.store.rows import RunContext, ScorerIndex, ScoreRows
from evaltrace.evaluators.results.store.schema import RUNS_FOLDER, RUNS_SCHEMA, SCORES_FOLDER, SCORES_SCHEMA
from evaltrace.evaluators.scoring.scorers.registry import default_scorers
from evaltrace.evaluators.scoring.spec.loader import LoadedSpec

_COMPRESSION = "zstd"


class _TempFile:
    """A hidden file beside `destination`, renamed to it by `publish` (removed by `discard`)."""

    def __init__(self, destination: Path, store: Path) -> None:
        self.destination = destination
        self._store = store
        self.path = destination.with_name(f".{destination.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            # Mode 0o666 less the umask, as a plainly written file gets (a temp file would be 0o600).
            self.handle: IO[bytes] | None = os.fdopen(
                os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb"
            )
        except OSError as exc:
            raise store_error(store, exc) from None

    def publish(self) -> None:
        """Close the file and rename it into place."""
        try:
            if self.handle is not None:
                self.handle.close()
                self.handle = None
            os.replace(self.path, self.destination)
        except OSError as exc:
            raise store_error(self._store, exc) from None

    def discard(self) -> None:
        """Remove the unfinished file."""
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        self.path.unlink(missing_ok=True)


def publish_table(store: Path, destination: Path, table: pa.Table) -> None:
    """Write `table` as the new file `destination` in `store`: under a hidden name, then renamed into place.

    Raises:
        InputError: the store cannot be written.
    """
    file = _TempFile(destination, store)
    try:
        pq.write_table(table, file.handle, compression=_COMPRESSION)
    except OSError as exc:
        file.discard()
        raise store_error(store, exc) from None
    file.publish()


@dataclass(frozen=True)
class StoreParts:
    """A run's scores table written in parts by an engine's tasks (`StoreWriter.in_parts`), named in report order."""

    folder: Path
    """The hidden folder the parts go to; published as the run's scores folder."""
    run: RunContext
    """What every row of the run repeats."""

    def write(self, name: str, batches: Iterable[pa.RecordBatch]) -> None:
        """Write the part `name` (parts are read back in the order of their names), whole or not at all.

        A task Ray runs again writes the same part anew: under a name of its own, then renamed over it.
        """
        hidden = self.folder / f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        with pq.ParquetWriter(hidden, SCORES_SCHEMA, compression=_COMPRESSION) as writer:
            for batch in batches:
                writer.write_batch(batch)
        os.replace(hidden, self.folder / name)


def open_store(folder: Path, spec: LoadedSpec | None, *, batch_rows: int = 8192) -> StoreWriter:
    """A writer of one scoring run with `spec` (or, without one, the reference-free defaults) into `folder`.

    Raises:
        InputError: the store cannot be written.
    """
    index = ScorerIndex(spec, default_scorers() if spec is None else ())
    return StoreWriter(folder, index, spec_file=spec.path if spec is not None else None, batch_rows=batch_rows)


class StoreWriter:
    """Streams one scoring run into the store at `folder` (see the module docstring)."""

    def __init__(
        self, folder: Path, index: ScorerIndex, *, spec_file: str | None = None, batch_rows: int = 8192
    ) -> None:
        """Open the run's two files.

        Args:
            folder: the store.
            index: the scorers of each entry (for versions and configuration hashes).
            spec_file: the spec file scored with (its bytes are hashed into the run's row).
            batch_rows: rows per Parquet row group (what memory holds at most).

        Raises:
            InputError: the store cannot be written (a file in the way, permissions, ...).
        """
        self.folder = folder
        self.run_id = new_run_id()
        self._started = datetime.now(UTC)
        self._spec_sha256 = spec_sha256(spec_file) if spec_file is not None else None
        self._scores = _TempFile(folder / SCORES_FOLDER / f"{self.run_id}.parquet", folder)
        try:
            self._run = _TempFile(folder / RUNS_FOLDER / f"{self.run_id}.parquet", folder)
        except InputError:
            self._scores.discard()
            raise
        self._rows = ScoreRows(RunContext(self.run_id, self._started), index, batch_rows)
        self._batch_rows = batch_rows
        self._parquet: pq.ParquetWriter | None = None
        self._held: list[pa.RecordBatch] | None = None
        """With rows given by `add_rows`: every row, held for one sort by entry before it is written."""
        self._entries = 0
        self._parts: StoreParts | None = None
        self.published = False

    def in_parts(self) -> StoreParts:
        """Have the scores table written in parts (`StoreParts.write`) by the engine's tasks, not by `add`.

        `add` then only counts the entries, and `parts_written` adds the parts' row counts.
        """
        if self._parts is None:
            folder = self._scores.path.with_suffix(".parts")
            try:
                folder.mkdir()
            except OSError as exc:
                raise store_error(self.folder, exc) from None
            self._parts = StoreParts(folder, RunContext(self.run_id, self._started))
        return self._parts

    def parts_written(self, rows: int, errors: int) -> None:
        """Count rows (of which `errors` scorer errors) the parts hold."""
        self._rows.total += rows
        self._rows.errors += errors

    def add_rows(self, batch: pa.RecordBatch) -> None:
        """Rows of entries the engine made as it decided them (`rows.entry_rows`, the run's columns left out).

        Their entries come `stored`.

        Given before the entries; the run's rows are then held in memory (as Arrow columns) and
        written sorted by entry index (stably: each entry's rows come from one place, in order).
        """
        assert self._parquet is None and self._parts is None, "rows are given before any entry"
        count = batch.num_rows
        started = column([micros(self._started)] * count, SCORES_SCHEMA.field("run_started_at").type)
        run = [column([self.run_id] * count, pa.string()), started]
        self._held = self._held or []
        self._held.append(pa.RecordBatch.from_arrays([*run, *batch.columns], schema=SCORES_SCHEMA))
        self._rows.total += count
        self._rows.errors += count - batch.column("error").null_count

    def add(self, entry: ReportEntry) -> None:
        """Turn the entry into rows; write a row group whenever a batch is full."""
        if self._parts is not None or entry.stored:
            self._entries += 1  # its rows are in a part, or were given to `add_rows`, already
            return
        for batch in self._rows.add_report_entry(self._entries, entry):
            self._write(batch)
        self._entries += 1

    def finish(self, report: Report) -> None:
        """Write the last rows, publish the scores file (or folder of parts), then the run's row."""
        if self._parts is not None:
            self._publish_parts()
        else:
            self._publish_scores()
        row = self._run_row(report)
        columns = [column([row[field.name]], field.type) for field in RUNS_SCHEMA]
        table = pa.Table.from_arrays(columns, schema=RUNS_SCHEMA)
        self._write_file(table, self._run)
        self._run.publish()
        self.published = True

    def _publish_parts(self) -> None:
        assert self._parts is not None
        self._scores.discard()
        try:
            os.replace(self._parts.folder, self._scores.destination.with_suffix(""))
        except OSError as exc:
            raise store_error(self.folder, exc) from None

    def _publish_scores(self) -> None:
        self._write(self._rows.flush())  # opens the Parquet writer too, when no row group was written yet
        if self._held is not None:
            table = pa.Table.from_batches(self._held, schema=SCORES_SCHEMA)
            self._held = None
            self._write_rows(table.take(pc.sort_indices(table, [("entry_index", "ascending")])))
        assert self._parquet is not None
        try:
            self._parquet.close()
        except OSError as exc:
            raise store_error(self.folder, exc) from None
        self._parquet = None
        self._scores.publish()

    def abort(self) -> None:
        """Drop the unfinished run: neither file is left."""
        if self.published:
            return
        if self._parquet is not None:
            self._parquet.close()
            self._parquet = None
        self._scores.discard()
        self._run.discard()
        if self._parts is not None:
            shutil.rmtree(self._parts.folder, ignore_errors=True)

    def _write(self, batch: pa.RecordBatch | None) -> None:
        if self._held is not None:
            self._held.extend([batch] if batch is not None else [])
        else:
            self._write_rows(batch)

    def _write_rows(self, rows: pa.RecordBatch | pa.Table | None) -> None:
        try:
            if self._parquet is None:
                self._parquet = pq.ParquetWriter(self._scores.handle, SCORES_SCHEMA, compression=_COMPRESSION)
            if isinstance(rows, pa.Table):
                self._parquet.write_table(rows, row_group_size=self._batch_rows)
            elif rows is not None:
                self._parquet.write_batch(rows)
        except OSError as exc:
            raise store_error(self.folder, exc) from None

    def _write_file(self, table: pa.Table, file: _TempFile) -> None:
        try:
            pq.write_table(table, file.handle, compression=_COMPRESSION)
        except OSError as exc:
            raise store_error(self.folder, exc) from None

    def _run_row(self, report: Report) -> dict[str, Any]:
        counts, inputs = report.counts, report.inputs
        return {
            "run_id": self.run_id,
            "started_at": self._started,
            "finished_at": report.created_at,
            "spec": inputs.spec,
            "spec_sha256": self._spec_sha256,
            "inputs": inputs.paths,
            "tiers": inputs.tiers,
            "tags": inputs.tags,
            "cases": inputs.cases,
            "evaltrace_version": report.evaltrace_version,
            "report_schema_version": REPORT_SCHEMA_VERSION,
            "gate_passed": report.passed,
            "gate_pass_rate": report.pass_rate,
            "gate_confidence": report.confidence,
            "gate_reason": report.gate_reason,
            "entries": counts.entries,
            "entries_passed": counts.passed,
            "entries_failed": counts.failed,
            "entries_missing": counts.missing,
            "entries_not_applicable": counts.not_applicable,
            "traces": counts.traces,
            "traces_unmatched": counts.unmatched,
            "score_rows": self._rows.total,
            "scorer_errors": self._rows.errors,
            "scorers": [
                {"name": name, "version": version, "config_hash": digest, "config": text}
                for name, version, digest, text in report.scorers.configs()
            ],
            "latency_p50_seconds": report.latency.p50_seconds,
            "latency_p95_seconds": report.latency.p95_seconds,
            "input_tokens": report.usage.input_tokens,
            "output_tokens": report.usage.output_tokens,
            "cost_usd": report.cost.estimated_usd,
            # A folder of parts when the engine's tasks wrote them (`in_parts`): read back as one table.
            "scores_file": f"{SCORES_FOLDER}/{self.run_id}" + ("" if self._parts is not None else ".parquet"),
        }


def store_writer(sink: object) -> StoreWriter | None:
    """The score store's writer among `sink`'s writers (a `FanOut` holds them in `writers`), if any."""
    if isinstance(sink, StoreWriter):
        return sink
    for writer in getattr(sink, "writers", ()):
        found = store_writer(writer)
        if found is not None:
            return found
    return None
