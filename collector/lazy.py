"""A package's public names, written once: the imports of its `if TYPE_CHECKING:` block.

Type checkers read that block as the package's names (each imported `as` itself, so it is an
explicit re-export); at run time nothing in it is imported. `lazy_package` reads the same block
from the package's source and turns it into the lazy `__getattr__` (PEP 562), `__dir__` and
`__all__`, so a name is listed in one place and its module is imported only on first use: importing
the records or the pytest plugin must not pay for pyarrow and the OTel SDK until something actually
reads or writes spans.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def lazy_package(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The `__getattr__`, `__dir__` and `__all__` of `package`, from its `if TYPE_CHECKING:` imports."""
    exports = type_checking_exports(Path(sys.modules[package].__file__ or ""))
    get, listing = lazy_exports(package, exports)
    return get, listing, sorted(exports)


def type_checking_exports(init: Path) -> dict[str, str]:
    """Each name imported by the module-level `if TYPE_CHECKING:` blocks of `init`, and its module."""
    exports: dict[str, str] = {}
    for block in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING":
            for node in block.body:
                if isinstance(node, ast.ImportFrom) and node.module is not None:
                    exports.update({alias.asname or alias.name: node.module for alias in node.names})
    return exports


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, importing each export's module on first use."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
