"""The report's scorer list (`Report.scorers`), made when the spec is compiled.

A report names each scorer that ran, once per (name, configuration hash): a `ScorerInfo`. A
10,000-case spec has ~10,000 of them, and making a model of each at the end of every run, then
dumping them for the report's header and again for the score store's run row, was a tenth of a
second of a warm re-scoring. So each distinct scorer's row is made once, when the spec is compiled
(`scorer_row`), and the compiled-spec cache keeps it: its name, version, hash, configuration as
`json.dumps` text (as the score store keeps it) and its `ScorerInfo` JSON (as the report writes
it, made by the model itself, so the same bytes). A run picks its cases' rows into a `ScorerList`,
which gives the header's JSON and the store's rows from them, and makes models only when read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

from pydantic import BaseModel, ConfigDict, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

if TYPE_CHECKING:
    from evaltrace.evaluators.scoring.scorers.base import Scorer

ScorerRow = tuple[str, int, str, str, bytes]
"""A scorer: name, version, configuration hash, configuration as `json.dumps` text and its `ScorerInfo`'s
JSON. A plain tuple: the cache reads 10,000 of them back per run."""


class ScorerInfo(BaseModel):
    """A scorer that ran, so a past report's scores can be compared with a new scoring."""

    model_config = ConfigDict(extra="forbid")

    name: str
    version: int
    config_hash: str
    config: dict[str, Any]


def scorer_row(scorer: Scorer) -> ScorerRow:
    """`scorer`'s row, its configuration dumped once for the text, the hash and the report's JSON."""
    dumped = scorer.model_dump(mode="json")  # JSON data: pydantic refuses to dump anything else
    digest = scorer.config_hash(dumped)
    return _row(ScorerInfo(name=scorer.name, version=scorer.version, config_hash=digest, config=dumped))


def _row(info: ScorerInfo) -> ScorerRow:
    return info.name, info.version, info.config_hash, json.dumps(info.config), info.model_dump_json().encode()


def distinct(rows: Iterable[ScorerRow]) -> ScorerList:
    """`rows` each (name, hash) once, in the order first given."""
    kept: dict[tuple[str, str], ScorerRow] = {}
    for row in rows:
        kept.setdefault((row[0], row[2]), row)
    return ScorerList(list(kept.values()))


class ScorerList(Sequence[ScorerInfo]):
    """A report's scorers: rows (from the compiled spec) or models (a report read back), each made when asked.

    A field of `Report` as a list of `ScorerInfo` would be: validated from one, dumped as one, equal to one.
    """

    def __init__(self, rows: list[ScorerRow] | None = None, infos: list[ScorerInfo] | None = None) -> None:
        self._rows = rows if rows is not None or infos is not None else []
        self._infos = infos

    def rows(self) -> list[ScorerRow]:
        """Each scorer's row (made from the models when the list was given models)."""
        if self._rows is None:
            self._rows = [_row(info) for info in self.infos()]
        return self._rows

    def json(self) -> bytes:
        """The list as `Report.model_dump_json` writes it (compact)."""
        return b"[" + b",".join(row[4] for row in self.rows()) + b"]"

    def configs(self) -> list[tuple[str, int, str, str]]:
        """Each scorer's name, version, hash and configuration as `json.dumps` text, as the score store keeps them."""
        return [row[:4] for row in self.rows()]

    def infos(self) -> list[ScorerInfo]:
        """The models, made once (all configurations parsed in one go)."""
        if self._infos is None:
            rows = self.rows()
            configs = json.loads("[" + ",".join(row[3] for row in rows) + "]")
            # Validated: faster than `model_construct` for this model.
            self._infos = [
                ScorerInfo(name=name, version=version, config_hash=digest, config=config)
                for (name, version, digest, *_), config in zip(rows, configs, strict=True)
            ]
        return self._infos

    @overload
    def __getitem__(self, index: int) -> ScorerInfo: ...
    @overload
    def __getitem__(self, index: slice) -> list[ScorerInfo]: ...
    def __getitem__(self, index: int | slice) -> ScorerInfo | list[ScorerInfo]:
        return self.infos()[index]

    def __len__(self) -> int:
        return len(self._rows if self._rows is not None else self.infos())

    def __iter__(self) -> Iterator[ScorerInfo]:
        return iter(self.infos())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ScorerList | list):
            return self.infos() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # compared by content, as a list

    def __repr__(self) -> str:
        return repr(self.infos())

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        """Validated as a list of `ScorerInfo` (a `ScorerList` is taken as it is); dumped as one."""
        models = handler.generate_schema(list[ScorerInfo])
        return core_schema.no_info_wrap_validator_function(
            cls._validate,
            models,
            serialization=core_schema.plain_serializer_function_ser_schema(cls.infos, return_schema=models),
        )

    @classmethod
    def _validate(cls, value: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> ScorerList:
        return value if isinstance(value, ScorerList) else cls(infos=handler(value))
