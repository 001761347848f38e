"""Scorers from outside evaltrace: installed plugins and `--plugin` modules.

This module imports `--plugin` references and checks what entry points name; the registry
(`registry.py`, its entry-point group loaded by `collector/registry.py`) registers them, so a
plugin's scorers are named in spec files like the built-in ones and listed by `evaltrace scorers`.
Two ways in:

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
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from evaltrace.collector.errors import InputError
from evaltrace.evaluators.scoring.scorers.base import Scorer

FILE_MODULE_PREFIX: Final = "evaltrace_plugin_"
"""Module names of plugin files start with this, so a file never shadows an installed module."""


def import_plugin(ref: str) -> tuple[str, ModuleType, Any | None]:
    """Import one `--plugin` reference: `(where, module, the object MODULE:NAME names or None)`.

    Raises:
        InputError: the file or module does not exist or fails to import, or the name is missing.
    """
    where = f"--plugin {ref}"
    target, _, attribute = _split(ref)
    module = _import_file(Path(target), where) if _is_path(target) else _import_module(target, where)
    if not attribute:
        return where, module, None
    if not hasattr(module, attribute):
        raise InputError(f"{where}: {target} has no attribute {attribute!r}")
    return where, module, getattr(module, attribute)


def scorer_class_of(loaded: Any, where: str) -> type[Scorer] | None:
    """The scorer class a plugin names, or `None` for a module (importing it ran its `@register`s).

    Raises:
        InputError: it names something else.
    """
    if isinstance(loaded, ModuleType):
        return None
    if isinstance(loaded, type) and issubclass(loaded, Scorer):
        return loaded
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


def import_user_module(name: str) -> ModuleType:
    """Import a module the user named, finding it in the working directory too.

    `python -m evaltrace.cli` puts the working directory on `sys.path` and the `evaltrace`
    script does not; users expect `--plugin my_checks` and `--agent my_agent:run` to find
    `./my_checks.py` and `./my_agent.py` either way, as `python -m` would. The directory is on
    the path only while the module is imported: left there, every later lazy import of the run
    (`httpx` when a judge starts, say) would look in the working directory first and could load
    a stray `./httpx.py` instead. A plugin that imports sibling files does so when it is imported.
    """
    with _working_directory_on_path():
        return importlib.import_module(name)


@contextmanager
def _working_directory_on_path() -> Iterator[None]:
    """Put the working directory first on `sys.path` for the block, then take out only that entry."""
    cwd = os.getcwd()
    if cwd in sys.path or "" in sys.path:
        yield
        return
    sys.path.insert(0, cwd)
    try:
        yield
    finally:
        # The entry added, not a snapshot restored: a plugin may extend sys.path on purpose.
        if cwd in sys.path:
            sys.path.remove(cwd)


def _import_module(name: str, where: str) -> ModuleType:
    try:
        return import_user_module(name)
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
