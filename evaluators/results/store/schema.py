"""The score store's two tables: their Arrow schemas, column meanings and version.

A store is a folder (`--store DIR`, default `.evaltrace/store`; see `location.py`) holding

- `scores/<run id>.parquet`: the **scores** table of one scoring run, one row per
  (entry, sample, scorer result): an entry is a spec case (or, without a spec, a trace), a
  sample one scored trace or conversation of it, in report order. An entry without samples (a
  missing case) has one row whose `sample_index` and `scorer` are null; so has a sample without
  results. The engine's verdict for the entry rides along on each of its rows (`entry_*`).
- `runs/<run id>.parquet`: the **runs** table, one row: when, what was scored (spec and its
  hash, inputs, selection), the evaltrace version, the gate, the counts, and each scorer's
  version and configuration hash.
- `labels/<id>.parquet`: the **labels** table, people's pass/fail verdicts on entries and judge
  scores (`evaltrace review`, `labels import`): its schema and meaning are in `labels.py`.

Files are only ever added: each scoring run writes one file of each, under hidden temporary names
renamed into place, the runs file last. A run is complete, and listed, once its runs file exists;
a scores file without one is an interrupted run and is not listed. Run ids are ULIDs, so sorting
them sorts runs by start time. Each column's meaning is also kept in the Arrow field's
`description` metadata; each file's key-value metadata holds `evaltrace.store.schema_version`
and `evaltrace.store.table`.

Version 1. A change to a column's name, type or meaning bumps `STORE_SCHEMA_VERSION`; readers
refuse files of a newer version than they know.
"""

from __future__ import annotations

import pyarrow as pa

STORE_SCHEMA_VERSION = 1
"""Bumped when a column of either table changes name, type or meaning."""
VERSION_KEY = b"evaltrace.store.schema_version"
TABLE_KEY = b"evaltrace.store.table"
SCORES_FOLDER = "scores"
RUNS_FOLDER = "runs"

_TIME = pa.timestamp("us", tz="UTC")


def _field(name: str, kind: pa.DataType, description: str, *, nullable: bool = True) -> pa.Field:
    return pa.field(name, kind, nullable=nullable, metadata={"description": description})


def _schema(table: str, fields: list[pa.Field]) -> pa.Schema:
    return pa.schema(fields, metadata={VERSION_KEY: str(STORE_SCHEMA_VERSION).encode(), TABLE_KEY: table.encode()})


SCORES_SCHEMA = _schema(
    "scores",
    [
        _field("run_id", pa.string(), "The scoring run (a ULID; the runs table's key).", nullable=False),
        _field("run_started_at", _TIME, "When the scoring run started (UTC).", nullable=False),
        _field("entry_index", pa.int32(), "The entry's position in the report, from 0.", nullable=False),
        _field("case_id", pa.string(), "The spec case (without a spec: the trace's evaltrace.case_id, if any)."),
        _field("trace_id", pa.string(), "The trace the result was computed on (a turn's own trace in a conversation)."),
        _field("conversation_id", pa.string(), "The sample's conversation id, when recorded."),
        _field("sample_index", pa.int32(), "The sample's position in its entry (start-time order), from 0."),
        _field("turn", pa.int32(), "The turn, from 1, in a multi-turn case; null otherwise."),
        _field("scorer", pa.string(), "The scorer's registered name."),
        _field("scorer_version", pa.int32(), "The scorer's version (null for results no scorer made)."),
        _field("config_hash", pa.string(), "The hash of the scorer's configuration, as the report lists it."),
        _field("passed", pa.bool_(), "The verdict: null when the scorer did not apply; false on an error."),
        _field("value", pa.float64(), "The scorer's value, if it gives one."),
        _field("reason", pa.string(), "Why, as the scorer said it (recorded content: untrusted text)."),
        _field("error", pa.string(), "Set when the scorer could not run (the result then fails)."),
        _field("details", pa.string(), "The scorer's details as JSON text."),
        _field("tier", pa.string(), "The case's tier."),
        _field("tags", pa.list_(pa.string()), "The case's tags.", nullable=False),
        _field("rule", pa.string(), "The case's repeat rule as the report names it (mean, all, majority, pass@K)."),
        _field("min_samples", pa.int32(), "Fewer samples than this fail the case (null without a spec)."),
        _field(
            "entry_status",
            pa.string(),
            "The engine's verdict: passed, failed, missing, not_applicable.",
            nullable=False,
        ),
        _field("entry_passed", pa.bool_(), "The engine's verdict as a boolean (null: nothing applied)."),
        _field("entry_pass_rate", pa.float64(), "What the entry contributed to the gate's pass rate (null: left out)."),
        _field("sample_start_time", _TIME, "When the sample's (first) trace started."),
        _field("sample_duration_seconds", pa.float64(), "The sample's duration."),
        _field("sample_input_tokens", pa.int64(), "The sample's model input tokens."),
        _field("sample_output_tokens", pa.int64(), "The sample's model output tokens."),
        _field("sample_cost_usd", pa.float64(), "The sample's estimated cost (null when a model was not priced)."),
    ],
)
"""One row per (entry, sample, scorer result) of one scoring run."""

SCORER_TYPE = pa.struct(
    [
        pa.field("name", pa.string()),
        pa.field("version", pa.int32()),
        pa.field("config_hash", pa.string()),
        pa.field("config", pa.string()),
    ]
)
"""A scorer that ran: name, version, configuration hash, and the configuration as JSON text."""

_COUNT = pa.int64()

RUNS_SCHEMA = _schema(
    "runs",
    [
        _field("run_id", pa.string(), "The scoring run (a ULID: sorts by start time).", nullable=False),
        _field("started_at", _TIME, "When scoring started (UTC).", nullable=False),
        _field("finished_at", _TIME, "When the report was made (UTC).", nullable=False),
        _field("spec", pa.string(), "The spec file as named (FILE or FILE::CASE_ID); null: the defaults."),
        _field("spec_sha256", pa.string(), "SHA-256 of the spec file's bytes."),
        _field("inputs", pa.list_(pa.string()), "The PATH arguments scored.", nullable=False),
        _field("tiers", pa.list_(pa.string()), "The --tier selection.", nullable=False),
        _field("tags", pa.list_(pa.string()), "The --tag selection.", nullable=False),
        _field("cases", pa.list_(pa.string()), "The --case globs.", nullable=False),
        _field("evaltrace_version", pa.string(), "The evaltrace that scored.", nullable=False),
        _field("report_schema_version", pa.int32(), "The JSON report's schema version.", nullable=False),
        _field("gate_passed", pa.bool_(), "The gate.", nullable=False),
        _field("gate_pass_rate", pa.float64(), "The entries' pass rate (null: nothing applied)."),
        _field("gate_confidence", pa.float64(), "The threshold the pass rate was held against.", nullable=False),
        _field("gate_reason", pa.string(), "The gate's reason, as the summary prints it.", nullable=False),
        _field("entries", _COUNT, "Entries scored.", nullable=False),
        _field("entries_passed", _COUNT, "Entries passed.", nullable=False),
        _field("entries_failed", _COUNT, "Entries failed.", nullable=False),
        _field("entries_missing", _COUNT, "Cases no trace matched.", nullable=False),
        _field("entries_not_applicable", _COUNT, "Entries nothing applied to.", nullable=False),
        _field("traces", _COUNT, "Traces read.", nullable=False),
        _field("traces_unmatched", _COUNT, "Traces that matched no case.", nullable=False),
        _field("score_rows", _COUNT, "Rows of this run in the scores table.", nullable=False),
        _field("scorer_errors", _COUNT, "Results where a scorer could not run.", nullable=False),
        _field("scorers", pa.list_(SCORER_TYPE), "Every scorer that ran.", nullable=False),
        _field("latency_p50_seconds", pa.float64(), "Median trace duration."),
        _field("latency_p95_seconds", pa.float64(), "95th percentile trace duration."),
        _field("input_tokens", _COUNT, "Model input tokens over the scored traces.", nullable=False),
        _field("output_tokens", _COUNT, "Model output tokens over the scored traces.", nullable=False),
        _field("cost_usd", pa.float64(), "Estimated agent cost (null when no model call was priced)."),
        _field("scores_file", pa.string(), "The run's scores file, relative to the store.", nullable=False),
    ],
)
"""One row per scoring run."""
