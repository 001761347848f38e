"""The layout keeps its promises: public names import, private modules stay private, no import
cycles, small modules and short functions. Measured from the source with `ast`, nothing run."""

from __future__ import annotations

import ast
import importlib
import math
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"collector": "evaltrace.collector", "evaluators": "evaltrace.evaluators", "cli": "evaltrace.cli"}


@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    tree: ast.Module

    @property
    def package(self) -> str:
        return self.name if self.path.name == "__init__.py" else self.name.rpartition(".")[0]


def _modules() -> dict[str, Module]:
    found: dict[str, Module] = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            found[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8")))
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _nodes(node: ast.AST, *, module_level: bool) -> Iterator[ast.AST]:
    """The nodes under `node`; at module level, only those run when the module is imported."""
    for child in ast.iter_child_nodes(node):
        if module_level and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if module_level and isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield other
                yield from _nodes(other, module_level=True)
            continue
        yield child
        yield from _nodes(child, module_level=module_level)


def _imports(module: Module, *, module_level: bool) -> set[str]:
    """The project modules `module` imports: all of them, or only those imported when it loads."""
    found: set[str] = set()
    for node in _nodes(module.tree, module_level=module_level):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
    return {name for name in found if name in MODULES and name != module.name}


def _absolute(node: ast.ImportFrom, module: Module) -> str:
    if not node.level:
        return node.module or ""
    base = module.package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _graph(*, module_level: bool) -> dict[str, set[str]]:
    return {name: _imports(module, module_level=module_level) for name, module in MODULES.items()}


def _owner_of_private(imported: str) -> str | None:
    """The package a private module (or one inside a private sub-package) belongs to, if it is one."""
    parts = imported.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def _package_public_names() -> list[tuple[str, str]]:
    names: list[tuple[str, str]] = []
    for name, module in MODULES.items():
        if module.path.name == "__init__.py":
            package = importlib.import_module(name)
            names += [(name, public) for public in getattr(package, "__all__", [])]
    return names


@pytest.mark.parametrize(("package", "name"), _package_public_names())
def test_every_listed_public_name_imports(package: str, name: str) -> None:
    value = getattr(importlib.import_module(package), name)
    assert value is not None
    assert name in dir(importlib.import_module(package))


def test_no_subpackage_shadows_a_public_name() -> None:
    # Importing `evaltrace.collector.x.y` sets the attribute `x` on `evaltrace.collector`: a room
    # named like a public name (`record`, `score`) would replace that name once anything imported it.
    packages = {name for name, module in MODULES.items() if module.path.name == "__init__.py"}
    shadowed = [
        (package, name)
        for package, name in _package_public_names()
        if f"{package}.{name}" in MODULES or f"{package}.{name}" in packages
    ]
    assert shadowed == []


def test_public_lists_are_the_packages_documented_names() -> None:
    # The names a README reader imports are in the list the test above checks.
    evaluators = importlib.import_module("evaltrace.evaluators")
    assert {"Score", "Scorer", "register", "load_spec", "score", "ReportWriter"} <= set(evaluators.__all__)
    assert len(evaluators.__all__) == len(set(evaluators.__all__)) >= 28


def test_no_module_imports_another_packages_private_modules() -> None:
    crossings: set[tuple[str, str]] = set()
    for importer, imported in ((a, b) for a, targets in _graph(module_level=False).items() for b in targets):
        owner = _owner_of_private(imported)
        if owner is not None and importer != owner and not importer.startswith(owner + "."):
            crossings.add((importer, imported))
    assert crossings == set(), crossings


def test_no_import_cycle_at_module_level() -> None:
    graph = _graph(module_level=True)
    cycles = [component for component in _strongly_connected(graph) if len(component) > 1]
    assert cycles == [], cycles


def test_imports_flow_collector_evaluators_cli() -> None:
    rank = {"evaltrace.collector": 0, "evaltrace.evaluators": 1, "evaltrace.cli": 2}
    back = [
        (a, b)
        for a, targets in _graph(module_level=False).items()
        for b in targets
        if rank[".".join(b.split(".")[:2])] > rank[".".join(a.split(".")[:2])]
    ]
    assert back == []


# The data flow's stages, in import order: a room imports only rooms before it (and the shared
# modules at its package's top: errors, terminal, network, ...). Run files come first because every
# stage reads or writes them; the engine runs scoring over traces and writes results, so it comes
# after both; the pytest runner and plugin are front doors like the CLI.
STAGES = (
    "collector.runfiles",
    "collector.recorder",
    "collector.otlp",
    "collector.traces",
    "evaluators.scoring",
    "evaluators.results",
    "evaluators.engine",
    "evaluators.runner",
)
# Inside the OTLP room: the wire formats are a leaf; files, the receiver and sending build on them.
OTLP_PARTS = ("collector.otlp.wire", "collector.otlp.files", "collector.otlp.receive", "collector.otlp.send")


def _stage(module: str, stages: tuple[str, ...]) -> int | None:
    relative = module.removeprefix("evaltrace.")
    for rank, stage in enumerate(stages):
        if relative == stage or relative.startswith(stage + "."):
            return rank
    return None


def test_every_module_is_in_a_stage_or_shared() -> None:
    # Shared: the packages' own top-level modules (errors, terminal, ...) and the CLI.
    homeless = [
        name
        for name in MODULES
        if _stage(name, STAGES) is None and name.count(".") > 2 and not name.startswith("evaltrace.cli")
    ]
    assert homeless == []
    for stage in STAGES:
        assert any(_stage(name, (stage,)) == 0 for name in MODULES), f"the room {stage} is missing"


@pytest.mark.parametrize("stages", [STAGES, OTLP_PARTS], ids=["stages", "otlp"])
def test_stages_import_only_earlier_stages(stages: tuple[str, ...]) -> None:
    later = [
        (a, b)
        for a, targets in _graph(module_level=False).items()
        for b in targets
        if (mine := _stage(a, stages)) is not None and (theirs := _stage(b, stages)) is not None and theirs > mine
    ]
    assert later == []


def test_shared_modules_import_no_stage() -> None:
    # errors, terminal, network, cachedir, ... sit under every stage, so they import none.
    upward = [
        (a, b)
        for a, targets in _graph(module_level=False).items()
        if a.count(".") == 2 and not a.startswith("evaltrace.cli")
        for b in targets
        if _stage(b, STAGES) is not None
    ]
    assert upward == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    # Tarjan's algorithm, iterative: the graph is small but recursion depth should not depend on it.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def _lines(module: Module) -> int:
    return len(module.path.read_text(encoding="utf-8").splitlines())


def test_no_module_over_400_lines() -> None:
    long = {name: _lines(m) for name, m in MODULES.items() if _lines(m) > 400}
    assert long == {}


def _function_lengths(prefixes: tuple[str, ...]) -> list[int]:
    return [
        node.end_lineno - node.lineno + 1
        for name, module in MODULES.items()
        if name.startswith(prefixes)
        for node in ast.walk(module.tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
    ]


def _p90(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[math.ceil(0.9 * len(ordered)) - 1]


def test_function_length_p90_is_at_most_25_lines() -> None:
    # Lines from `def` to the last line of the body, docstring included, nested functions counted too.
    lengths = _function_lengths(tuple(FOLDERS.values()))
    assert len(lengths) > 1000  # the measure sees the code, not an empty tree
    assert _p90(lengths) <= 25


def test_every_subpackage_is_in_the_distribution() -> None:
    # setuptools lists packages explicitly (package-dir maps the folders): a missing sub-package
    # would be left out of the wheel while every test of the checkout still passed.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    packages = {name for name, module in MODULES.items() if module.path.name == "__init__.py"}
    assert packages <= listed, packages - listed
    data = config["tool"]["setuptools"]["package-data"]
    for json_file in (ROOT / "evaluators").rglob("*.json"):
        parts = json_file.parent.relative_to(ROOT / "evaluators").parts
        assert "*.json" in data[".".join(("evaltrace.evaluators", *parts))]


def test_the_base_errors_are_imported_from_their_one_home() -> None:
    # `InputError` (exit 2) and `EvaltraceError` live in collector/errors.py; no module takes them from elsewhere.
    elsewhere = [
        (name, node.module)
        for name, module in MODULES.items()
        for node in ast.walk(module.tree)
        if isinstance(node, ast.ImportFrom)
        and node.module != "evaltrace.collector.errors"
        and {alias.name for alias in node.names} & {"InputError", "EvaltraceError"}
    ]
    assert elsewhere == []
    assert "InputError" not in importlib.import_module("evaltrace.evaluators.errors").__all__
