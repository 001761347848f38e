"""Extension points by name: one `Registry` per kind (scorers, report formats, engines, conventions).

A registry maps names to objects, in the order they were added. Three ways in:

- `add(name, obj)`: the object itself (a class decorator such as `@register` calls it);
- `lazy(name, "module:attr")`: a reference imported the first time the name is looked up, so a
  name is a valid choice (listed, checked) without paying for its module: a run imports the
  modules of the scorers and formats it uses only, which is what keeps `evaltrace score` starting
  fast. A module that `add`s the object while it is imported satisfies the reference;
- an entry-point group (`evaltrace.scorers`, `evaltrace.report_formats`): installed distributions
  declare their extensions in it, as OpenTelemetry's exporters do, and they are loaded the first
  time the registry is consulted. Merely installing a package enables them, and one that does not
  load is one `InputError` naming the entry point and its distribution, never a silently smaller
  registry (a spec naming its scorer would otherwise fail for the wrong reason).

A name that is not there is an error naming the kind, the closest valid name and every choice.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from evaltrace.collector.errors import InputError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

T = TypeVar("T")

Adopt = Callable[["Registry[Any]", "EntryPoint", Any, str], None]
"""What a registry does with an entry point's object: (registry, entry point, object, its description)."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice to a mistyped name, or `""` when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class _Ref:
    """A `module:attr` reference not imported yet."""

    module: str
    attr: str

    def names(self, item: object) -> bool:
        """Whether `item` is what this reference points at."""
        # Read from the object, not the module: a class decorator runs before its module binds the name.
        return getattr(item, "__module__", None) == self.module and getattr(item, "__qualname__", None) == self.attr

    def load(self) -> Any:
        return getattr(importlib.import_module(self.module), self.attr)


def _add_entry(registry: Registry[Any], entry: EntryPoint, loaded: Any, where: str) -> None:
    try:
        registry.add(entry.name, loaded)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


class Registry(Generic[T]):
    """Objects of one kind by name (see the module docstring)."""

    def __init__(
        self,
        kind: str,
        *,
        group: str | None = None,
        hint: str = "",
        error: type[InputError] = InputError,
        adopt: Adopt = _add_entry,
    ) -> None:
        """A registry of `kind` (named in errors); `group` is its entry-point group.

        `hint` ends the unknown-name error, raised as `error`; `adopt` registers an entry point's
        object (the default adds it under the entry point's name).
        """
        self.kind = kind
        self._error = error
        self.group = group
        self._hint = hint
        self._adopt = adopt
        self._entries: dict[str, T | _Ref] = {}
        self._values: tuple[T, ...] | None = None  # `values()`, kept: conventions are asked per span
        self._plugins_loaded = group is None

    def add(self, name: str, item: T) -> T:
        """Register `item` as `name`; the same object again is a no-op.

        Raises:
            ValueError: another object holds the name.
        """
        holder = self._entries.get(name)
        if holder is not None and holder is not item and not (isinstance(holder, _Ref) and holder.names(item)):
            raise ValueError(f"{self.kind} name {name!r} is registered twice ({_label(holder)}, {_label(item)})")
        self._entries[name] = item
        self._values = None
        return item

    def lazy(self, name: str, ref: str) -> None:
        """Register `name` as the object `ref` (`"package.module:attr"`) names, imported on first lookup."""
        module, _, attr = ref.partition(":")
        self._entries.setdefault(name, _Ref(module, attr))
        self._values = None

    def get(self, name: str) -> T:
        """The object registered as `name`, imported now if it was lazy.

        Raises:
            InputError: (the registry's `error`) no such name: the message names the kind, the closest name
                and every valid choice; also an installed plugin that does not load.
        """
        self.check(name)
        return self._resolve(name, self._entries[name])

    def check(self, name: str) -> None:
        """Raise `get`'s error for a name that is not registered, importing nothing (options checked early)."""
        self.load_plugins()
        if name not in self._entries:
            choices = self.names()
            raise self._error(
                f"Unknown {self.kind} {name!r}{did_you_mean(name, choices)}. Valid choices: {', '.join(choices)}"
                f"{self._hint}"
            )

    def names(self) -> list[str]:
        """Every registered name, lazy ones included (nothing is imported for it), sorted."""
        self.load_plugins()
        return sorted(self._entries)

    def values(self) -> tuple[T, ...]:
        """Every object in the order registered, lazy ones imported."""
        if self._values is None:
            self.load_plugins()
            self._values = tuple(self._resolve(name, found) for name, found in list(self._entries.items()))
        return self._values

    def loaded(self) -> dict[str, T]:
        """The objects registered or imported so far (nothing is loaded on the way)."""
        return {name: found for name, found in self._entries.items() if not isinstance(found, _Ref)}

    def remove(self, name: str) -> None:
        """Forget `name` (tests undo what they registered)."""
        self._entries.pop(name, None)
        self._values = None

    def load_plugins(self) -> None:
        """Load the entry-point group once, the first time the registry is consulted.

        Raises:
            InputError: an entry point does not import or names something unusable (the error names it).
        """
        if self._plugins_loaded or self.group is None:
            return
        # Imported only here: scanning the installed distributions costs start-up that a command
        # never consulting a registry does not pay.
        from importlib.metadata import entry_points

        # Set first: a plugin that looks the registry up while importing must not recurse.
        # A failed plugin resets it, so every later lookup reports the failure again.
        self._plugins_loaded = True
        try:
            for entry in entry_points(group=self.group):
                where = self._describe(entry)
                try:
                    loaded = entry.load()
                except (Exception, SystemExit) as exc:  # any failure of third-party import code is the plugin's
                    raise InputError(f"{where}: could not be loaded ({type(exc).__name__}: {exc})") from None
                self._adopt(self, entry, loaded, where)
        except BaseException:
            self._plugins_loaded = False
            raise

    def _resolve(self, name: str, found: T | _Ref) -> T:
        if not isinstance(found, _Ref):
            return found
        item: T = found.load()
        # Importing the module may have registered the object already (a decorator): keep that one.
        current = self._entries.get(name)
        if isinstance(current, _Ref):
            self._entries[name] = item
            return item
        return item if current is None else current

    def _describe(self, entry: EntryPoint) -> str:
        dist = entry.dist
        source = f" (from {dist.name} {dist.version})" if dist is not None else ""
        return f"{self.kind} plugin {entry.name} = {entry.value}{source}"


def _label(item: object) -> str:
    if isinstance(item, _Ref):
        return item.attr
    return str(getattr(item, "__qualname__", None) or repr(item))
