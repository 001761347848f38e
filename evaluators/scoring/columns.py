"""The traces table's columns for the rule scorers: batches, rows, and each scorer's columnar form.

The per-trace `Scorer.score` of every scorer stays the reference (and the only path of plugin
scorers). A built-in rule scorer may have a columnar form, written beside it in its module: from
rows of the traces table it returns, per row, the reference's exact `Score` where it is sure of it (a
pass; a failure only as the reference's own code grades it, as `trajectory`'s), else `None` (the
reference then scores the entry). A form answers only for its exact class: a subclass may score
differently. A form is registered when its scorer's module is imported, so a run imports only
the forms of its scorers: `@columnar_form(ScorerClass)` for a form of one row (`Form`), or
`columnar_forms(ScorerClass, many, plan)` for one of a batch's rows at once (`Forms`), each row
with its own scorer object (its case's configuration), whose one-row form is derived from it.
`plan` makes what a form needs from its scorer's configuration alone; it is made when the spec is
compiled (`prepare`) and kept with the scorer, so in the compiled-spec cache too.

The engine asks each scorer class's form once per batch, on the rows of every case it scores
(`ask_rows`, `engine/columnar_entries.py`): `BatchCalls` is a batch's columns, read when a form first
asks, and `RowCalls` one top-level row's (`parent_row` null: the traces the engine scores). A batch
form decides each scorer's rows at once by array operations, each distinct call checked once (`memo`);
rows alike share one `Score` object. A row the forms do not all answer is scored by the reference.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from evaltrace.collector.traces.records import ToolCall
from evaltrace.collector.traces.table import bare_calls
from evaltrace.evaluators.scoring._kernels import (
    Bools,
    Ints,
    as_bools,
    as_ints,
    code_ids,
    message_text,
    micros_between,
    names_alike,
    top_rows,
)
from evaltrace.evaluators.scoring.scorers.base import Score, Scorer

Form = Callable[[Any, "RowCalls"], Score | None]
"""A columnar form of one row: (scorer, row) -> the reference's `Score` (sure of it), or `None` for the reference."""

Forms = Callable[[list[Any], "BatchCalls", list[int]], list[Score | None]]
"""A columnar form of a batch's rows: (each row's scorer, batch, row positions) -> a `Form`'s answer per row."""

FORMS: dict[type[Scorer], Form] = {}
"""Columnar forms by the exact scorer class they answer for (filled as the scorers' modules load)."""
_MANY: dict[type[Scorer], tuple[Form, Forms, Callable[[Any], object]]] = {}
"""Batch forms by scorer class: the one-row form derived from each, the batch form, and its plan's maker."""

F = TypeVar("F", bound=Form)


def columnar_form(cls: type[Scorer]) -> Callable[[F], F]:
    """Function decorator registering a form for `cls` exactly (a test's form put in by hand stays)."""

    def add(form: F) -> F:
        FORMS.setdefault(cls, form)
        return form

    return add


def columnar_forms(cls: type[Scorer], many: Forms, plan: Callable[[Any], object] = bool) -> Form:
    """Register the batch form `many` for `cls` (with the maker of its `plan`); returns its one-row form."""

    def form(scorer: Scorer, row: RowCalls) -> Score | None:
        return many([scorer], row.batch, [row.index])[0]

    form.__module__ = many.__module__  # the form is its scorer's module's
    FORMS.setdefault(cls, form)
    _MANY.setdefault(cls, (form, many, plan))
    return form


def ask_rows(scorers: list[Scorer], batch: BatchCalls, rows: list[int]) -> list[Score | None]:
    """The form of `scorers`' one class on each of `rows` of `batch` (`scorers[k]` the scorer of `rows[k]`).

    Its batch form at once, else its form row by row. A form that fails on a row leaves that row to
    the reference (`None`); a batch form that fails is asked again row by row. A form put in `FORMS`
    by hand (a test's) is asked row by row.
    """
    form, many = FORMS[type(scorers[0])], _MANY.get(type(scorers[0]))
    if many is not None and many[0] is form:
        with contextlib.suppress(Exception):  # a row it trips over: each row alone, only that one left to the reference
            return many[1](scorers, batch, rows)
    return [_asked(form, scorer, RowCalls(batch, index)) for scorer, index in zip(scorers, rows, strict=True)]


def _asked(form: Form, scorer: Scorer, row: RowCalls) -> Score | None:
    try:
        return form(scorer, row)
    except Exception:
        return None


_PLAN = "_form_plan"  # the key of a scorer's plan among its private attributes (so pickled with it)


def plan(scorer: Scorer) -> Any:
    """What `scorer`'s batch form needs from its configuration alone, made once (`prepare`) and kept with it."""
    private = cast("dict[str, Any]", scorer.__pydantic_private__)
    found = private.get(_PLAN)
    if found is None:
        found = private[_PLAN] = _MANY[type(scorer)][2](scorer)
    return found


def prepare(scorer: Scorer) -> None:
    """Make `scorer`'s plan now (when the spec is compiled), if its form has one: the compiled-spec cache keeps it."""
    if type(scorer) in _MANY:
        plan(scorer)


_KEPT: dict[int, tuple[Scorer, dict[str, dict[Any, Any]]]] = {}  # per scorer: its forms' dicts for the run (`memo`)
_KEPT_MAX = 65536  # entries of a dict; and 1024 scorers at most (a spec of one scorer a case would keep 10,000 dicts)


class RowCalls:
    """One top-level row of a batch: its tool calls (`Trace.tool_calls`) and its columns, read lazily."""

    __slots__ = ("batch", "index", "first_call", "_end", "names")

    def __init__(self, batch: BatchCalls, index: int) -> None:
        self.batch, self.index = batch, index
        """The batch the row is in (its kernels' results, `memo`) and the row's position in it."""
        self.first_call = start = batch.offsets[index]
        """Where the row's calls start in the batch's flat call lists."""
        self._end = end = batch.offsets[index + 1]
        self.names: list[str] = batch.names[start:end]
        """Tool names, in call order."""

    # The properties the trajectory form reads on every row index the batch's lists directly: a
    # lookup through `call_values` costs two more Python calls each, on ~10,000 rows a scoring.
    @property
    def arguments(self) -> list[str | None]:
        """Each call's arguments as the table's JSON text (`None`: not recorded)."""
        return self.batch.arguments[self.first_call : self._end]

    @property
    def truncated(self) -> bool:
        """Whether any call's arguments were cut when recorded."""
        return bool(self.batch.rows_truncated[self.index])

    @property
    def nested(self) -> bool:
        """Whether any call started a nested agent run (`child_row` set)."""
        return bool(self.batch.rows_nested[self.index])

    @property
    def nested_runs(self) -> bool:
        """Whether a call started a nested agent whose calls are in its own row (a handoff's are in this one)."""
        calls = zip(self.call_values("child_row"), self.call_values("handoff"), strict=True)
        return any(child is not None and not handoff for child, handoff in calls)

    def final_answer(self) -> str | None:
        """`Trace.final_answer()` from the columns: the output, else the last model reply's text."""
        output = self.value("output")
        if output is not None:
            return cast("str", output)
        replies = cast("list[list[dict[str, Any]] | None]", self.iteration_values("output_messages"))
        for messages in reversed(replies):
            texts = [text for text in map(message_text, messages or []) if text is not None]
            if texts:
                return "\n".join(texts)
        return None

    def json_values(self, field_name: str = "arguments_json") -> list[Any]:
        """Each call's `*_json` field (its arguments, by default) as the trace holds it (`None`: not recorded).

        One parse of all of them as one JSON array (as the trace decoder does): each text is a whole
        JSON value, so the array's items are exactly the values, for one call's overhead.
        """
        texts = cast("list[str | None]", self.call_values(field_name))  # `arguments`: the same list's slice
        values: list[Any] = json.loads("[" + ",".join("null" if text is None else text for text in texts) + "]")
        return values

    def tool_calls(self, nested: bool = False) -> list[ToolCall] | None:
        """The calls as the reference's grading reads them; `None`: it needs the trace (texts not JSON, `nested`)."""
        if nested and self.nested:
            return None
        try:
            values = self.json_values()
        except ValueError:  # not a table evaltrace wrote
            return None
        return bare_calls(
            name=self.names, arguments=values, arguments_truncated=self.call_values("arguments_truncated")
        )

    def value(self, column: str) -> object:
        """The row's value of a top-level column of the traces table (`output`, `tool_schemas`, ...)."""
        return self.batch.column(column)[self.index]

    def call_values(self, field_name: str) -> list[object]:
        """One field of the row's tool calls (`result_json`, `error`, ...), in call order."""
        return self.batch.call_field(field_name)[self.first_call : self._end]

    def iteration_values(self, field_name: str) -> list[object]:
        """One field of the row's model calls (`model`, `usage`, `error`, `finish_reasons`, ...), in order.

        Converts that field alone: the whole `iterations` column (`value`) costs ~20x more.
        """
        start, end = self.batch.iteration_bounds(self.index)
        return self.batch.iteration_field(field_name)[start:end]


class BatchCalls:
    """The tool calls of one traces-table batch, by top-level trace id; each column converted on first use."""

    def __init__(self, batch: pa.RecordBatch) -> None:
        calls = batch.column("tool_calls")
        self._values = calls.values  # `offsets` index into the unsliced child array
        self.offsets: list[int] = calls.offsets.to_pylist()
        """Where each row's calls start in the flat call lists (row `i`: `offsets[i]` to `offsets[i + 1]`)."""
        self._batch = batch
        self._columns: dict[str, list[object]] = {}
        self._call_fields: dict[str, list[object]] = {}
        self._memos: dict[tuple[int, str], dict[Any, Any]] = {}
        self._rows = top_rows(batch)

    def rows(self) -> list[tuple[str, int]]:
        """The trace ids this batch answers for, each with its row's position in the batch."""
        return list(self._rows.items())

    def row(self, trace_id: str) -> RowCalls | None:
        """The top-level row of `trace_id`, or `None` when this batch has no such single row."""
        index = self._rows.get(trace_id)
        return None if index is None else RowCalls(self, index)

    def memo(self, scorer: Scorer, name: str, *, run: bool = False) -> dict[Any, Any]:
        """A dict for `scorer`'s form to keep what rows share: for the batch (keys of its ids) or the run (of texts).

        A row computes only what no row before it did, so never more than alone (the time limit stays
        per row). A run's dict, kept with `scorer` (its id not reused meanwhile), empties at `_KEPT_MAX`.
        """
        if not run:
            return self._memos.setdefault((id(scorer), name), {})
        if (kept := _KEPT.get(id(scorer))) is None or kept[0] is not scorer:
            if len(_KEPT) >= 1024:
                _KEPT.clear()
            kept = _KEPT[id(scorer)] = (scorer, {})
        if len(found := kept[1].setdefault(name, {})) >= _KEPT_MAX:
            found.clear()
        return found

    def array(self, name: str) -> pa.Array:
        """A top-level column of the batch as it is (for kernels over every row)."""
        return self._batch.column(name)

    def column(self, name: str) -> list[object]:
        """A top-level column of the batch as Python values (converted once, on first use)."""
        if (found := self._columns.get(name)) is None:
            found = self._columns[name] = self._batch.column(name).to_pylist()
        return found

    def call_field(self, name: str) -> list[object]:
        """One field of every call in the batch, flat, as Python values (converted once, on first use)."""
        if (found := self._call_fields.get(name)) is None:
            found = self._call_fields[name] = pc.struct_field(self._values, name).to_pylist()
        return found

    def iteration_bounds(self, index: int) -> tuple[int, int]:
        """Where row `index`'s model calls start and end in the flat iteration lists."""
        return self.iteration_offsets[index], self.iteration_offsets[index + 1]

    def iteration_field(self, name: str) -> list[object]:
        """One field of every model call in the batch, flat, as Python values (converted once, on first use)."""
        key = f"iterations.{name}"  # call fields share the cache: a key no call field can have
        if (found := self._call_fields.get(key)) is None:
            values = self._batch.column("iterations").values  # offsets index into the unsliced array
            found = self._call_fields[key] = pc.struct_field(values, name).to_pylist()
        return found

    @functools.cached_property
    def names(self) -> list[str]:
        """Every call's tool name, flat."""
        return cast("list[str]", self.call_field("name"))

    @functools.cached_property
    def arguments(self) -> list[str | None]:
        """Every call's arguments as JSON text, flat (`None`: not recorded)."""
        return cast("list[str | None]", self.call_field("arguments_json"))

    def same_names(self, rows: list[int], wanted: list[tuple[str, ...]]) -> list[bool | None]:
        """Per row of `rows`: whether its calls' names are `wanted[k]` in order (`names_alike`); `None`: not as many."""
        return names_alike(self.offsets, *self._name_codes, rows, wanted)

    @functools.cached_property
    def _name_codes(self) -> tuple[np.ndarray[Any, np.dtype[np.int64]], dict[str, int]]:  # per call, and by name
        encoded = pc.dictionary_encode(pc.struct_field(self._values, "name"))
        return as_ints(encoded.indices), {name: code for code, name in enumerate(encoded.dictionary.to_pylist())}

    @functools.cached_property
    def joined_arguments(self) -> list[str | None]:
        """Per row: its calls' arguments texts joined by commas, as an array's items (`None`: one not recorded)."""
        texts, bounds = self.arguments, itertools.pairwise(self.offsets)  # Arrow's `binary_join`: 30x slower
        return [None if None in (row := texts[start:end]) else ",".join(row) for start, end in bounds]  # type: ignore[arg-type]

    @functools.cached_property
    def iteration_offsets(self) -> list[int]:
        """Where each row's model calls start in the flat iteration lists (as `offsets` for the calls)."""
        offsets: list[int] = self._batch.column("iterations").offsets.to_pylist()
        return offsets

    @functools.cached_property
    def model_calls(self) -> list[int]:
        """Each row's count of model calls (iterations)."""
        counts: list[int] = pc.list_value_length(self._batch.column("iterations")).to_pylist()
        return counts

    @functools.cached_property
    def run_micros(self) -> list[int | None]:
        """Each row's wall time in microseconds."""
        return micros_between(self._batch.column("start_time"), self._batch.column("end_time"))

    @functools.cached_property
    def call_micros(self) -> list[int | None]:
        """Each call's wall time in microseconds, flat."""
        return micros_between(pc.struct_field(self._values, "start_time"), pc.struct_field(self._values, "end_time"))

    @functools.cached_property
    def call_keys(self) -> list[int]:
        """Per call, flat: an id equal for calls of equal name, arguments text and truncation (one per distinct call).

        The columns' dictionary codes, combined by integer arithmetic (no text is joined, so no
        recorded text can make two different calls share an id). Forms keep what they work out about
        a call per id (`memo`): a run repeats few distinct calls many times.
        """
        fields = [pc.struct_field(self._values, name) for name in ("name", "arguments_json")]
        key = np.zeros(len(self._values), dtype=np.int64)
        for codes in map(pc.dictionary_encode, fields):  # null: code 0, apart from every text
            key = key * (len(codes.dictionary) + 1) + code_ids(codes)
        keys: list[int] = (key * 2 + as_bools(pc.struct_field(self._values, "arguments_truncated"))).tolist()
        return keys

    @functools.cached_property
    def schema_ids(self) -> list[int]:
        """Per row: an id equal for rows offering the same tools with the same parameters (`tool_schemas`), in order."""
        tools = self._batch.column("tool_schemas")
        codes = [pc.dictionary_encode(pc.struct_field(tools.values, name)) for name in ("name", "parameters_json")]
        tool = code_ids(codes[0]) * (len(codes[1].dictionary) + 1) + code_ids(codes[1])  # per offered tool, distinct
        offered, bounds = tool.tolist(), tools.offsets.to_pylist()
        ids: dict[tuple[int, ...], int] = {}
        return [ids.setdefault(tuple(offered[start:end]), len(ids)) for start, end in itertools.pairwise(bounds)]

    @functools.cached_property
    def call_counts(self) -> Ints:
        """Per row: how many tool calls it made."""
        return np.diff(np.asarray(self.offsets))

    def calls_of(self, tops: Ints) -> tuple[Ints, Ints]:
        """The calls of rows `tops`, in order: each one's position in the batch, and its row's place in `tops`."""
        counts = self.call_counts[tops]
        owner, starts = np.repeat(np.arange(len(tops)), counts), np.asarray(self.offsets)[tops] - np.cumsum(counts)
        return np.repeat(starts + counts, counts) + np.arange(len(owner)), owner

    # Per-row flags and counts, each from one kernel over every call of the batch and a sum per row's calls.
    @functools.cached_property
    def rows_truncated(self) -> Bools:
        """Per row: whether any call's arguments were cut when recorded."""
        return self._per_row(as_bools(pc.struct_field(self._values, "arguments_truncated"))) > 0

    @functools.cached_property
    def rows_nested(self) -> Bools:
        """Per row: whether any call started a nested agent run (`child_row` set)."""
        return self._per_row(as_bools(pc.is_valid(pc.struct_field(self._values, "child_row")))) > 0

    @functools.cached_property
    def failed_calls(self) -> Ints:
        """Per row: how many of its calls have a non-empty error."""
        return self._per_row(as_ints(pc.utf8_length(pc.struct_field(self._values, "error"))) > 0)

    @functools.cached_property
    def rows_error_text(self) -> Bools:
        """Per row: whether any call's result JSON text holds `"error"`."""
        # Written by evaltrace's own encoder, which never escapes a letter: a result object with an
        # `error` key holds the text `"error"`. Its absence proves there is none; its presence proves nothing.
        return self._per_row(as_bools(pc.match_substring(pc.struct_field(self._values, "result_json"), '"error"'))) > 0

    def _per_row(self, flags: Bools) -> Ints:
        """Per row: how many of its calls' `flags` (one per call of the batch) are true."""
        counts, offsets = np.concatenate(([0], np.cumsum(flags))), np.asarray(self.offsets)
        found: Ints = counts[offsets[1:]] - counts[offsets[:-1]]
        return found
