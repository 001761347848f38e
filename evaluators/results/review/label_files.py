"""Labels as files: `evaltrace labels export FILE` and `labels import FILE`, CSV or JSON lines by extension.

A row is `case_id, trace_id, scorer, label, note, run_id, author, labelled_at` (`scorer` empty for
the entry's outcome, `label` pass or fail, `labelled_at` ISO 8601). On import only `trace_id` and
`label` are required; a missing author or time is stamped as the import's.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.results.store.labels import Label, check_label

COLUMNS = ("case_id", "trace_id", "scorer", "label", "note", "run_id", "author", "labelled_at")
_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def file_format(path: str | Path) -> str:
    """`csv` or `jsonl`, by the file's extension.

    Raises:
        InputError: another extension; the message lists the valid ones.
    """
    kind = _FORMATS.get(Path(path).suffix.lower())
    if kind is None:
        raise InputError(f"{path}: unknown labels file type (valid extensions: {', '.join(_FORMATS)})")
    return kind


def _row(label: Label) -> dict[str, Any]:
    data = label.model_dump(mode="json")
    return {name: data.get(name) for name in COLUMNS}


def dump_labels(labels: Iterable[Label], kind: str) -> str:
    """The labels as the text of a `kind` file (`csv` with a header row, or `jsonl`)."""
    if kind == "jsonl":
        return "".join(json.dumps(_row(label), ensure_ascii=False) + "\n" for label in labels)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for label in labels:
        writer.writerow({k: "" if v is None else v for k, v in _row(label).items()})
    return out.getvalue()


def load_labels(path: Path) -> list[Label]:
    """The labels of a CSV or JSON lines file.

    Raises:
        InputError: the file cannot be read, or a row is malformed; the message names the file and line.
    """
    kind = file_format(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the labels file: {exc}") from None
    rows = _csv_rows(path, text) if kind == "csv" else _jsonl_rows(path, text)
    return [_label(path, line, row) for line, row in rows]


def _csv_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text))
    missing = {"trace_id", "label"} - set(reader.fieldnames or ())
    if missing:
        raise InputError(f"{path}: line 1: the header has no {', '.join(sorted(missing))} column")
    return [(reader.line_num, dict(row)) for row in reader]


def _jsonl_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {number}: not JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}: line {number}: a row is a JSON object")
        rows.append((number, row))
    return rows


def _label(path: Path, line: int, row: dict[str, Any]) -> Label:
    where = f"{path}: line {line}"
    values = {key: row.get(key) for key in COLUMNS if row.get(key) not in (None, "")}
    if "trace_id" not in values:
        raise InputError(f"{where}: trace_id is empty")
    values["label"] = check_label(str(values.get("label", "")), where)
    if "labelled_at" in values:
        values["labelled_at"] = _time(str(values["labelled_at"]), where)
    try:
        return Label.model_validate({k: v if k == "labelled_at" else str(v) for k, v in values.items()})
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise InputError(f"{where}: {'.'.join(map(str, problem['loc']))}: {problem['msg']}") from None


def _time(value: str, where: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InputError(f"{where}: labelled_at {value!r} is not an ISO 8601 time") from None
    if moment.tzinfo is None:
        raise InputError(f"{where}: labelled_at {value!r} has no time zone (add Z or +00:00)")
    return moment
