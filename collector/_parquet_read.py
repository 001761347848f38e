"""Opening and checking span files written under schema version 1 (the pyarrow side of `reader.py`).

Every file is opened through `open_span_file`, which checks its metadata and schema against
`_parquet.SCHEMA` and turns every pyarrow failure into a one-line `InputError` naming the file.
Values come out column by column (`to_pylist` per column, never per-row pyarrow scalars).
`_parquet_decode.py` turns the span columns into `Span` objects.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from evaltrace.collector._parquet import SCHEMA
from evaltrace.collector._schema import METADATA_SCHEMA_VERSION, SCHEMA_VERSION
from evaltrace.collector._shard import RowFilter
from evaltrace.collector.errors import InputError

# Rows per decoded batch: large enough to amortise pyarrow calls, small enough to keep the
# decoded Python objects of one batch cheap next to the traces held in flight.
BATCH_ROWS = 16_384


def _fail(path: Path, exc: BaseException) -> InputError:
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return InputError(f"{path}: not a readable Parquet file ({detail}). It may be truncated, corrupt or not Parquet.")


def open_span_file(path: Path) -> pq.ParquetFile:
    """Open `path` and check it is an evaltrace span file this version can read.

    Raises:
        InputError: the file is missing, unreadable, not Parquet, foreign, or of another schema.
    """
    try:
        handle = pq.ParquetFile(path)
        schema = handle.schema_arrow
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pa.ArrowException, OSError) as exc:
        raise _fail(path, exc) from None
    _check_version(path, schema.metadata or {})
    _check_columns(path, schema)
    return handle


def _check_version(path: Path, metadata: dict[bytes, bytes]) -> None:
    raw = metadata.get(METADATA_SCHEMA_VERSION)
    if raw is None:
        raise InputError(
            f"{path}: not an evaltrace span file (no {METADATA_SCHEMA_VERSION.decode()} metadata). "
            "Was it written by evaltrace?"
        )
    try:
        version = int(raw.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise InputError(f"{path}: unreadable {METADATA_SCHEMA_VERSION.decode()} {raw!r}") from None
    if version > SCHEMA_VERSION:
        raise InputError(
            f"{path}: written with span schema v{version}, newer than this evaltrace reads "
            f"(v{SCHEMA_VERSION}). Upgrade evaltrace: pip install -U evaltrace"
        )
    if version < SCHEMA_VERSION:
        raise InputError(f"{path}: span schema v{version} is not supported (this evaltrace reads v{SCHEMA_VERSION})")


def _check_columns(path: Path, schema: pa.Schema) -> None:
    names = set(schema.names)
    for expected in SCHEMA:
        if expected.name not in names:
            raise InputError(
                f"{path}: missing column {expected.name!r} (schema v{SCHEMA_VERSION}). Was it written by evaltrace?"
            )
        actual = schema.field(expected.name).type
        if not actual.equals(expected.type):
            raise InputError(
                f"{path}: column {expected.name!r} has type {actual}, expected {expected.type} "
                f"(schema v{SCHEMA_VERSION}). Was it written by evaltrace?"
            )


def iter_batches(path: Path, columns: Sequence[str], only: RowFilter | None = None) -> Iterator[pa.RecordBatch]:
    """Yield record batches of `columns`, turning read failures into `InputError`.

    With `only`, just the rows it keeps (`columns` must then include `trace_id`).
    """
    handle = open_span_file(path)
    try:
        for batch in handle.iter_batches(batch_size=BATCH_ROWS, columns=list(columns), use_threads=False):
            yield batch if only is None else only.keep(batch)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (was it removed while reading?)") from None
    except (pa.ArrowException, OSError) as exc:
        raise _fail(path, exc) from None
    finally:
        handle.close()


def read_trace_ids(path: Path, only: RowFilter | None = None) -> list[str]:
    """Return the distinct trace ids of a file (those `only` keeps, if given), in order of first appearance."""
    seen: dict[str, None] = {}
    for batch in iter_batches(path, ["trace_id"], only):
        seen.update(dict.fromkeys(batch.column(0).unique().to_pylist()))
    return list(seen)


def read_columns(path: Path, columns: Sequence[str]) -> Iterator[dict[str, list[Any]]]:
    """Yield each batch as plain Python lists per column (timestamps as int ns)."""
    for batch in iter_batches(path, columns):
        yield {name: column_values(batch.column(name)) for name in columns}


def column_values(column: pa.Array) -> list[Any]:
    if pa.types.is_timestamp(column.type):
        # Python datetimes would drop nanoseconds; the int64 view keeps them and is faster.
        return column.view(pa.int64()).to_pylist()  # type: ignore[no-any-return]
    return column.to_pylist()  # type: ignore[no-any-return]
