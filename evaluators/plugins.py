"""Scorers from outside evaltrace: installed plugins and `--plugin` modules.

Two ways in, both ending in the registry (`registry.register`), so a plugin's scorers are named
in spec files like the built-in ones and listed by `evaltrace scorers`:

- an installed distribution declares an entry point in the group `evaltrace.scorers`, naming a
  `Scorer` subclass (`my_scorers:Politeness`) or a module whose classes use `@register`. They are
  loaded the first time the registry is consulted, so merely installing the package enables them;
- `evaltrace score --plugin REF` (repeatable, or `EVALTRACE_PLUGINS`, space-separated) imports a
  module for this run: a file (`scorers/politeness.py`), a module name (`my_scorers`), or a class
  within either (`my_scorers:Politeness`, `scorers/politeness.py:Politeness`).

A plugin that fails to load is an `InputError` naming it (the CLI's exit code 2), never a
silently smaller registry: a spec naming its scorers would otherwise fail for the wrong reason.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from evaltrace.evaluators.base import Scorer
from evaltrace.evaluators.errors import InputError

ENTRY_POINT_GROUP: Final = "evaltrace.scorers"
"""The entry-point group installed packages declare their scorers in."""

FILE_MODULE_PREFIX: Final = "evaltrace_plugin_"
"""Module names of plugin files start with this, so a file never shadows an installed module."""


def load_entry_points(register: Any) -> None:
    """Register the scorers of every installed `evaltrace.scorers` entry point.

    Args:
        register: `registry.register` (passed in: the registry imports this module lazily).

    Raises:
        InputError: an entry point does not import, or names something that is not a scorer.
    """
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        where = _describe(entry)
        try:
            loaded = entry.load()
        except (Exception, SystemExit) as exc:  # any failure of third-party import code is the plugin's
            raise InputError(f"{where}: could not be loaded ({type(exc).__name__}: {exc})") from None
        _register_loaded(loaded, where, register)


def load_plugin(ref: str, register: Any) -> None:
    """Import one `--plugin` reference and register the scorers it names or defines.

    Raises:
        InputError: the file or module does not exist or fails to import, the class is missing or
            not a scorer, or a module registers no scorer at all.
    """
    where = f"--plugin {ref}"
    target, _, attribute = _split(ref)
    before = _registered_count()
    module = _import_file(Path(target), where) if _is_path(target) else _import_module(target, where)
    if attribute:
        if not hasattr(module, attribute):
            raise InputError(f"{where}: {target} has no attribute {attribute!r}")
        _register_loaded(getattr(module, attribute), where, register)
    elif _registered_count() == before and not _defines_registered_scorer(module):
        raise InputError(
            f"{where}: the module registers no scorer (decorate a Scorer subclass with "
            "@evaltrace.evaluators.register, or name the class as MODULE:CLASS)"
        )


def _register_loaded(loaded: Any, where: str, register: Any) -> None:
    if isinstance(loaded, ModuleType):
        return  # importing it ran its `@register` decorators
    if isinstance(loaded, type) and issubclass(loaded, Scorer):
        try:
            register(loaded)
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
        return
    raise InputError(f"{where}: names {loaded!r}, which is neither a Scorer subclass nor a module")


def _split(ref: str) -> tuple[str, str, str]:
    # `C:\x.py` keeps its drive letter: only a colon after the last path separator splits.
    head, sep, tail = ref.rpartition(":")
    if not sep or "/" in tail or "\\" in tail or not tail.isidentifier():
        return ref, "", ""
    return head, sep, tail


def _is_path(target: str) -> bool:
    return target.endswith(".py") or "/" in target or "\\" in target


def _import_file(path: Path, where: str) -> ModuleType:
    if not path.is_file():
        raise InputError(f"{where}: no such file {str(path)!r}")
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    name = f"{FILE_MODULE_PREFIX}{path.stem}_{digest}"  # unique per file: two `checks.py` may be given
    if name in sys.modules:
        return sys.modules[name]  # the same file named twice: running it again would register twice
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"{where}: {str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    # Registered before running, as `import` does: dataclasses and pydantic look classes' modules up.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # a module-level sys.exit() too: never a silent exit
        del sys.modules[name]
        raise InputError(f"{where}: import failed ({type(exc).__name__}: {exc})") from None
    return module


def _import_module(name: str, where: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            hint = " (give a file path such as my_scorers.py for a module that is not installed)"
            raise InputError(f"{where}: no module named {exc.name!r}{hint}") from None
        raise InputError(f"{where}: import failed ({type(exc).__name__}: {exc})") from None
    except (Exception, SystemExit) as exc:
        raise InputError(f"{where}: import failed ({type(exc).__name__}: {exc})") from None


def origin(cls: type[Scorer]) -> str:
    """Where a scorer class comes from: its module, or the file a `--plugin` path named."""
    if cls.__module__.startswith(FILE_MODULE_PREFIX):
        return str(getattr(sys.modules.get(cls.__module__), "__file__", None) or cls.__module__)
    return cls.__module__


def _describe(entry: EntryPoint) -> str:
    dist = entry.dist
    source = f" (from {dist.name} {dist.version})" if dist is not None else ""
    return f"scorer plugin {entry.name} = {entry.value}{source}"


def _registered_count() -> int:
    from evaltrace.evaluators import registry

    return len(registry.registered())


def _defines_registered_scorer(module: ModuleType) -> bool:
    # A module imported earlier (by an entry point, or twice on the command line) registers
    # nothing new the second time, yet it is a valid plugin if its scorers are in the registry.
    from evaltrace.evaluators import registry

    return any(cls.__module__ == module.__name__ for cls in registry.registered().values())
