"""formcast's modules import one another without cycles.

The graph is read from the source with ``ast``: every ``formcast.*`` import, at module
level or inside a function, absolute or relative, except those under
``if TYPE_CHECKING:`` (annotations only, never run). A cycle means one module of it
cannot be imported first without a function-level import working around the other.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from pathlib import Path

import formcast

SOURCE = Path(formcast.__file__).parent

# Known cycles, as (importer, imported) edges left out of the graph; an imported name
# covers its submodules. Empty: keep it so.
KNOWN_CYCLE_EDGES: list[tuple[str, str]] = []


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package at ``root``, by dotted name (a package by its
    ``__init__.py``)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports (itself excluded)."""
    modules = module_files(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets = set()
        for node in _runtime_imports(tree):
            targets.update(_imported(node, name, is_package, modules))
        graph[name] = targets - {name}
    return graph


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``tree`` that run, wherever they are (skipping the body,
    not the ``else``, of ``if TYPE_CHECKING:``)."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imported(
    node: ast.Import | ast.ImportFrom,
    module: str,
    is_package: bool,
    modules: dict[str, Path],
) -> Iterator[str]:
    """The modules of the package an import statement names: ``import a.b`` names
    ``a.b``; ``from a import x`` names ``a.x`` when ``x`` is a submodule, else ``a``.
    Parent packages that Python runs on the way count too (``formcast.regex`` for
    ``formcast.regex.dialect``), except the root package, which imports only
    ``formcast.errors`` at module level (its other names load lazily)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield from _parents(alias.name, module, modules)
        return
    if node.level:
        # relative: "." is the importer's own package (itself, for an __init__.py)
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    else:
        base = node.module or ""
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
            yield submodule
        elif base in modules:
            yield base
    yield from _parents(base, module, modules)


def _parents(name: str, importer: str, modules: dict[str, Path]) -> Iterator[str]:
    """The packages Python runs to import ``name``, below the root and other than the
    importer's own packages (those are already loaded when the importer runs)."""
    parts = name.split(".")
    for end in range(2, len(parts) + 1):
        parent = ".".join(parts[:end])
        if parent in modules and not (importer + ".").startswith(parent + "."):
            yield parent


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None when it has none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for successor in sorted(graph.get(node, ())):
            cycle = visit(successor)
            if cycle is not None:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle is not None:
            return cycle
    return None


def without_known_cycles(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    def known(importer: str, imported: str) -> bool:
        return any(
            importer == source and (imported == target or imported.startswith(target + "."))
            for source, target in KNOWN_CYCLE_EDGES
        )

    return {m: {t for t in targets if not known(m, t)} for m, targets in graph.items()}


def test_formcast_modules_import_without_cycles() -> None:
    graph = without_known_cycles(import_graph(SOURCE, "formcast"))
    assert {"formcast.extraction.extractor", "formcast.index", "formcast.cursor"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_known_cycle_edges_name_real_modules() -> None:
    modules = module_files(SOURCE, "formcast")
    for source, target in KNOWN_CYCLE_EDGES:
        assert source in modules and target in modules, (source, target)


def write_package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root / "pkg"


def test_the_graph_reads_packages_submodules_relative_and_function_level_imports(
    tmp_path: Path,
) -> None:
    root = write_package(
        tmp_path,
        {
            "__init__.py": "from pkg.sub import parts\n",
            "sub/__init__.py": "from . import parts\nfrom .parts import Thing\n",
            "sub/parts.py": "def f():\n    from ..top import g\n",
            "top.py": (
                "from typing import TYPE_CHECKING\n"
                "import pkg.leaf\n"
                "if TYPE_CHECKING:\n    from pkg import sub\n"
                "else:\n    from pkg import other\n"
            ),
            "leaf.py": "import os\n",
            "other.py": "",
        },
    )
    graph = import_graph(root, "pkg")
    assert graph == {
        "pkg": {"pkg.sub", "pkg.sub.parts"},
        "pkg.sub": {"pkg.sub.parts"},
        "pkg.sub.parts": {"pkg.top"},
        "pkg.top": {"pkg.leaf", "pkg.other"},  # the TYPE_CHECKING import is left out
        "pkg.leaf": set(),
        "pkg.other": set(),
    }
    assert find_cycle(graph) is None


def test_a_cycle_through_a_function_level_import_is_found(tmp_path: Path) -> None:
    root = write_package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.b import x\n",
            "b.py": "def x():\n    from pkg import c\n",
            "c.py": "import pkg.a as a\n",
        },
    )
    assert find_cycle(import_graph(root, "pkg")) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
