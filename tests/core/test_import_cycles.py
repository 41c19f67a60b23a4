"""No import cycle in ``specframe/`` or in any first-party plugin package, imports inside functions included.

The graph is read from the source with :mod:`ast` (nothing is imported): every ``import`` and ``from ... import``
anywhere in a module, functions and methods included, except under ``if TYPE_CHECKING:`` (its ``else`` branch
counts). ``from pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg``; relative imports
are resolved. Importing ``a.b.c`` also runs the package ``a.b``'s ``__init__``, so an import points at every
package on the way that does not already contain the importing module (that is how ``models.backbone`` ->
``checkpoint.draft_config`` closed a cycle through ``checkpoint/__init__`` -> ``checkpoint.loader`` ->
``models.backbone``). Any strongly connected component of more than one module is a cycle.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

@dataclass(frozen=True)
class Module:
    name: str
    path: Path
    is_package: bool


def first_party_packages(root: Path) -> list[Path]:
    """``specframe/`` and every plugin's ``specframe_*`` package under ``plugins/``."""
    plugins = sorted(p for p in root.glob("plugins/*/specframe_*") if (p / "__init__.py").is_file())
    return [root / "specframe", *plugins]


def find_modules(packages: list[Path]) -> dict[str, Module]:
    modules = {}
    for package in packages:
        for path in sorted(package.rglob("*.py")):
            parts = list(path.relative_to(package.parent).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            modules[name] = Module(name, path, is_package)
    return modules


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_names(module: Module, known: set[str]) -> dict[str, int]:
    """Every module name ``module`` imports (absolute, resolved), with the line of its first import."""
    found: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        found.setdefault(name, line)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.name.split(".")
                base = base if module.is_package else base[:-1]
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                add(sub if sub in known else source, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path)))
    return found


def import_graph(modules: dict[str, Module]) -> dict[str, dict[str, int]]:
    """``graph[a][b]``: the line of ``a`` whose import runs first-party module ``b`` (packages on the way included)."""
    known = set(modules)
    graph: dict[str, dict[str, int]] = {}
    for name, module in modules.items():
        edges: dict[str, int] = {}
        for target, line in imported_names(module, known).items():
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                step = ".".join(parts[:i])
                if step in known and step != name and not name.startswith(step + "."):
                    edges.setdefault(step, line)
        graph[name] = edges
    return graph


def strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's components (iterative), each sorted; only those of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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
                if len(component) > 1:
                    out.append(sorted(component))
    return sorted(out)


def one_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> str:
    """A shortest import chain from the component's first module back to itself, with the importing lines."""
    members, start = set(component), component[0]
    previous: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for child in sorted(graph[node]):
            if child not in members:
                continue
            if child == start:
                chain = [node]
                while chain[-1] != start:
                    chain.append(previous[chain[-1]])
                chain.reverse()
                steps = [f"{a} (line {graph[a][b]})" for a, b in zip(chain, [*chain[1:], start], strict=True)]
                return " -> ".join([*steps, start])
            if child not in previous:
                previous[child] = node
                queue.append(child)
    raise AssertionError(f"no cycle through {start}")


def describe(graph: dict[str, dict[str, int]], components: list[list[str]]) -> str:
    return "\n".join(f"cycle of {len(c)} modules: {', '.join(c)}\n  e.g. {one_cycle(graph, c)}" for c in components)


def test_no_import_cycle_in_the_core_or_any_first_party_plugin() -> None:
    modules = find_modules(first_party_packages(ROOT))
    assert {"specframe", "specframe_hf", "specframe_diffusion", "specframe_trees"} <= set(modules)
    graph = import_graph(modules)
    cycles = strongly_connected(graph)
    assert not cycles, ("import cycles (move the shared names to a module both sides can import, or make the "
                        "lower layer take what it needs as arguments):\n" + describe(graph, cycles))


# ------------------------------------------------------------------ the detector itself, on a small package
def _package(root: Path, files: dict[str, str]) -> dict[str, dict[str, int]]:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return import_graph(find_modules([root / "pkg"]))


def test_imports_inside_functions_count_and_type_checking_ones_do_not(tmp_path: Path) -> None:
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "def f():\n    from pkg import b\n",
        "pkg/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\nelse:\n"
                    "    import pkg.d\nimport os\n\nclass K:\n    def m(self):\n        from . import a\n",
        "pkg/c.py": "from .b import K\n",
        "pkg/d.py": "",
    })
    assert graph["pkg.a"] == {"pkg.b": 2}
    assert graph["pkg.b"] == {"pkg.d": 5, "pkg.a": 10}
    assert graph["pkg.c"] == {"pkg.b": 1}
    assert strongly_connected(graph) == [["pkg.a", "pkg.b"]]
    assert describe(graph, strongly_connected(graph)) == (
        "cycle of 2 modules: pkg.a, pkg.b\n  e.g. pkg.a (line 2) -> pkg.b (line 10) -> pkg.a")


def test_a_submodule_import_runs_its_package_init(tmp_path: Path) -> None:
    graph = _package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/models/__init__.py": "from pkg.models.net import Net\n",
        "pkg/models/net.py": "from pkg.ckpt.config import Config\n",
        "pkg/ckpt/__init__.py": "from pkg.ckpt.config import Config\nfrom pkg.ckpt.load import load\n",
        "pkg/ckpt/config.py": "",
        "pkg/ckpt/load.py": "from pkg.models.net import Net\n",
    })
    assert graph["pkg.models.net"] == {"pkg.ckpt": 1, "pkg.ckpt.config": 1}  # pkg itself is already running
    assert graph["pkg.ckpt.load"] == {"pkg.models": 1, "pkg.models.net": 1}
    assert strongly_connected(graph) == [["pkg.ckpt", "pkg.ckpt.load", "pkg.models", "pkg.models.net"]]


@pytest.mark.parametrize(("module", "is_package", "text", "expected"), [
    ("pkg.sub.mod", False, "from .. import other\n", "pkg.other"),
    ("pkg.sub.mod", False, "from . import sibling\n", "pkg.sub.sibling"),
    ("pkg.sub", True, "from .sibling import name\n", "pkg.sub.sibling"),
    ("pkg.sub.mod", False, "from ..other import not_a_module\n", "pkg.other"),
    ("pkg.sub.mod", False, "import pkg.other as o\n", "pkg.other"),
])
def test_relative_and_from_imports_resolve_to_modules(tmp_path: Path, module: str, is_package: bool, text: str,
                                                       expected: str) -> None:
    path = tmp_path / "m.py"
    path.write_text(text, encoding="utf-8")
    known = {"pkg", "pkg.other", "pkg.sub", "pkg.sub.mod", "pkg.sub.sibling"}
    assert set(imported_names(Module(module, path, is_package), known)) == {expected}
