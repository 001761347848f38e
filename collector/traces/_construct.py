"""Records built without validation, from values the converter made itself.

Validating a record whose values evaltrace produced (a table it wrote, fields the converter
computed) costs 2-4x building it and checks nothing new: `RecordFactory` builds the record as
`model_construct` would, minus its per-field lookups of aliases and defaults. The record's
`__dict__` is a dict display of the values, in functions generated once per model (as
`dataclasses` generates `__init__`). About 4x `model_construct`'s speed, 3x validation's.

What validation would have done must then be done by the caller:

- a `list` or `dict` field gets a new container (validation copies it), so a record never shares
  a list with the converter's caches or with another record;
- every value already has the field's type: a caller whose values come from recorded content
  (`Any`) checks them first and builds through validation when one does not fit, so a bad value
  fails as it always did. tests/collector/traces/test_construct.py holds records built both ways equal.

Every field counts as set (`model_fields_set`), as for records decoded from the traces table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

M = TypeVar("M", bound=BaseModel)
_IMMUTABLE_DEFAULTS = (type(None), str, int, bool, float)


class RecordFactory(Generic[M]):
    """Builds `model` records from trusted values, without validation.

    `make(*values)` takes every field positionally, in declaration order (`names`); `build(**values)`
    takes them by name, the omitted ones getting their defaults (a new list for `default_factory`).
    """

    def __init__(self, model: type[M]) -> None:
        if model.__pydantic_post_init__ or model.__pydantic_root_model__:  # what a plain __dict__ cannot do
            raise TypeError(f"{model.__name__} needs model_construct")
        self.model = model
        self.names = tuple(model.model_fields)
        assert all(name.isidentifier() for name in self.names)
        scope = _scope(model, self.names)
        exec(_source(model, self.names), scope)  # built from the model's own field names and defaults only
        self.make: Callable[..., M] = scope["make"]
        self.build: Callable[..., M] = scope["build"]

    def build_all(self, columns: dict[str, list[Any]]) -> list[M]:
        """One record per position of `columns` (a list per field, all of one length)."""
        lists = [columns[name] for name in self.names]
        if len({len(values) for values in lists}) > 1:
            raise ValueError(f"{self.model.__name__}: columns of different lengths")
        return list(map(self.make, *lists))


def _scope(model: type[BaseModel], names: tuple[str, ...]) -> dict[str, Any]:
    scope: dict[str, Any] = {
        "_new": model.__new__,
        "_model": model,
        # Every field is set, so one shared set serves all records: pydantic only ever adds a
        # field name to it (on assignment), and each is in it already.
        "_fields_set": set(names),
        # `BaseModel`'s own slots, set through their descriptors: `object.__setattr__` would look
        # each name up in the class's MRO first (~5% of decoding a trace).
        "_set_dict": _slot_setter("__dict__"),
        "_set_fields_set": _slot_setter("__pydantic_fields_set__"),
        "_set_extra": _slot_setter("__pydantic_extra__"),
        "_set_private": _slot_setter("__pydantic_private__"),
        "_MISSING": _MISSING,
    }
    for name, info in model.model_fields.items():
        if info.default_factory is not None:
            scope[f"_factory_{name}"] = info.default_factory
        elif info.default is not PydanticUndefined:
            if not isinstance(info.default, _IMMUTABLE_DEFAULTS):  # validation would copy it
                raise TypeError(f"{model.__name__}.{name}: mutable default")
            scope[f"_default_{name}"] = info.default
    return scope


def _source(model: type[BaseModel], names: tuple[str, ...]) -> str:
    keywords, fills = [], []
    for name, info in model.model_fields.items():
        if info.default_factory is not None:
            keywords.append(f"{name}=_MISSING")
            fills.append(f"    if {name} is _MISSING:\n        {name} = _factory_{name}()\n")
        elif info.default is not PydanticUndefined:
            keywords.append(f"{name}=_default_{name}")
        else:
            keywords.append(name)
    positional = [f"v{i}" for i in range(len(names))]
    # `build` names its parameters after the fields (`build(trace_id=..., ...)`); `make` takes them in order.
    return (
        f"def make({', '.join(positional)}):\n{_body(names, positional)}\n"
        f"def build(*, {', '.join(keywords)}):\n{''.join(fills)}{_body(names, names)}"
    )


def _body(names: tuple[str, ...], variables: Sequence[str]) -> str:
    items = ", ".join(f"{name!r}: {variable}" for name, variable in zip(names, variables, strict=True))
    return (
        "    record = _new(_model)\n"
        f"    _set_dict(record, {{{items}}})\n"
        "    _set_fields_set(record, _fields_set)\n"
        "    _set_extra(record, None)\n"
        "    _set_private(record, None)\n"
        "    return record\n"
    )


def texts_or_none(*values: Any) -> bool:
    """Whether each value is exactly a `str` or `None`, as a `str | None` field holds it after validation."""
    for value in values:  # a loop, not `all(...)`: a generator costs more than these checks
        if value is not None and type(value) is not str:
            return False
    return True


def ints_or_none(*values: Any) -> bool:
    """Whether each value is exactly an `int` or `None` (validation would convert a subclass, a bool)."""
    for value in values:
        if value is not None and type(value) is not int:
            return False
    return True


class _Missing:
    """The default of a `default_factory` field in `build`: the factory makes a new value."""


_MISSING = _Missing()


def _slot_setter(name: str) -> Callable[[Any, Any], None]:
    setter: Callable[[Any, Any], None] = vars(BaseModel)[name].__set__
    return setter
