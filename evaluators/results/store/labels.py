"""The score store's labels table: people's pass/fail verdicts on entries and on judge scores.

`labels/<id>.parquet` files in the store, one per write (a label clicked in `evaltrace review`, or
one `evaltrace labels import`): only ever added, under a hidden temporary name renamed into place,
like the scores and runs tables (`schema.py`). A label is about a trace, not a scoring run: its key
is (case_id, trace_id, scorer), where `scorer` is empty for the entry's outcome and names one
scorer (a judge) otherwise. Reading takes, per key, the label written last (by `labelled_at`, then
file order), so a person changes their mind by labelling again; the older rows stay as history.

Columns (each also in the Arrow field's `description`): `case_id`, `trace_id`, `scorer`,
`label` (`pass` or `fail`), `note`, `run_id` (the scoring run the person was looking at, if any),
`author`, `labelled_at` (UTC). Version: the store's `STORE_SCHEMA_VERSION`.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pyarrow as pa
from pydantic import BaseModel, Field

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.store.location import new_run_id
from evaltrace.evaluators.results.store.reader import read_table
from evaltrace.evaluators.results.store.schema import STORE_SCHEMA_VERSION, TABLE_KEY, VERSION_KEY
from evaltrace.evaluators.results.store.writer import publish_table

LABELS_FOLDER = "labels"

_TIME = pa.timestamp("us", tz="UTC")


def _field(name: str, kind: pa.DataType, description: str, *, nullable: bool = True) -> pa.Field:
    return pa.field(name, kind, nullable=nullable, metadata={"description": description})


LABELS_SCHEMA = pa.schema(
    [
        _field("case_id", pa.string(), "The spec case labelled (empty: none, a trace scored without a spec case)."),
        _field("trace_id", pa.string(), "The trace labelled.", nullable=False),
        _field(
            "scorer",
            pa.string(),
            "The scorer whose verdict is labelled; empty for the entry's outcome.",
            nullable=False,
        ),
        _field("label", pa.string(), "The person's verdict: pass or fail.", nullable=False),
        _field("note", pa.string(), "The person's note (free text).", nullable=False),
        _field("run_id", pa.string(), "The scoring run shown when labelling (null: a trace outside any run)."),
        _field("author", pa.string(), "Who labelled (--author, else the OS user).", nullable=False),
        _field("labelled_at", _TIME, "When (UTC).", nullable=False),
    ],
    metadata={VERSION_KEY: str(STORE_SCHEMA_VERSION).encode(), TABLE_KEY: b"labels"},
)
"""One row per label written (append-only; the latest per key counts)."""


class Label(BaseModel):
    """One person's verdict on an entry's outcome (`scorer` empty) or on one scorer's verdict."""

    case_id: str = ""
    trace_id: str = Field(min_length=1)
    scorer: str = ""
    label: Literal["pass", "fail"]
    note: str = ""
    run_id: str | None = None
    author: str = ""
    labelled_at: datetime | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """What one label is about: (case_id, trace_id, scorer)."""
        return (self.case_id, self.trace_id, self.scorer)

    @property
    def passed(self) -> bool:
        """The label as a verdict."""
        return self.label == "pass"


def default_author() -> str:
    """The OS user's name (labels name who made them)."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"


def write_labels(store: Path, labels: Iterable[Label], *, author: str | None = None) -> Path | None:
    """Add `labels` to the store as one new labels file (stamped with `author` and now where unset).

    Returns the file written (`None` when there was nothing to write).

    Raises:
        InputError: the store cannot be written.
    """
    now = datetime.now(UTC)
    who = author or default_author()
    rows = [
        {**label.model_dump(), "author": label.author or who, "labelled_at": label.labelled_at or now}
        for label in labels
    ]
    if not rows:
        return None
    table = pa.Table.from_pylist(rows, schema=LABELS_SCHEMA)
    destination = store / LABELS_FOLDER / f"{new_run_id()}.parquet"
    publish_table(store, destination, table)
    return destination


def read_labels(store: str | Path, *, history: bool = False) -> list[Label]:
    """The store's labels: the latest per key (every row written, oldest first, with `history`).

    An empty list when the store has no labels yet.

    Raises:
        InputError: a labels file is unreadable or of a newer schema version.
    """
    folder = Path(store) / LABELS_FOLDER
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    rows = [Label.model_validate(row) for file in files for row in read_table(file, "labels").to_pylist()]
    rows.sort(key=lambda label: label.labelled_at or datetime.min.replace(tzinfo=UTC))  # stable: file order
    if history:
        return rows
    latest = {label.key: label for label in rows}
    return list(latest.values())


def check_label(value: str, where: str) -> Literal["pass", "fail"]:
    """`value` as a label (case and spaces ignored).

    Raises:
        InputError: it is neither pass nor fail; the message names `where`.
    """
    cleaned = value.strip().lower()
    if cleaned == "pass":
        return "pass"
    if cleaned == "fail":
        return "fail"
    raise InputError(f"{where}: label {value!r} is not one of: pass, fail")
