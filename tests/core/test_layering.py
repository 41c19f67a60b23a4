"""Layering: what may import what, so the layers stay a tree while the loop changes (imports inside functions
included, type-checking blocks aside; the graph is read by the cycle test's parser).

From the bottom up: the tree type and the sampling maths know nothing of stages or the loop; the stage interfaces
know the tree and sampling; the cost model measures a target and prices rounds, and never sees a pipeline or the
loop; the loop uses stages and the cost model, never the pipeline or the command line; plugins build on the public
API (``specframe.building`` for tree builders, ``specframe.notices``), never on the built-in stages' modules or
the `budget: auto` wiring.
"""

from __future__ import annotations

from pathlib import Path

from .test_import_cycles import (
    ROOT,
    find_modules,
    first_party_packages,
    import_graph,
    imported_names,
    strongly_connected,
)

#: module prefix -> prefixes it must not import.
ABOVE = ("specframe.pipeline", "specframe.cli", "specframe.builtin", "specframe.bench", "specframe.report",
         "specframe.profile_report")
RULES: dict[str, tuple[str, ...]] = {
    "specframe.tree": ("specframe.config", "specframe.interfaces", "specframe.decode", "specframe.cost",
                       "specframe.sampling", *ABOVE),
    "specframe.sampling": ("specframe.decode", "specframe.cost", "specframe.interfaces", *ABOVE),
    "specframe.interfaces": ("specframe.decode", "specframe.cost", *ABOVE),
    "specframe.building": ("specframe.decode", "specframe.cost", *ABOVE),
    "specframe.cost": ("specframe.decode", *ABOVE),
    "specframe.decode": ABOVE,
    "specframe_": ("specframe.builtin", "specframe.cost.setup", "specframe.cost.auto_budget", "specframe.decode.loop",
                   "specframe.decode.rounds", "specframe.decode.row", "specframe.decode.session"),
}


def governs(prefix: str, name: str) -> bool:
    """Whether the rule of ``prefix`` applies to module ``name`` (``specframe_`` covers every plugin package)."""
    return name == prefix or name.startswith(prefix + ".") or (prefix.endswith("_") and name.startswith(prefix))


def violations(root: Path = ROOT) -> list[str]:
    """Every import under ``root`` (its ``specframe/`` and plugin packages) of a prefix its module's rules forbid."""
    modules = find_modules(first_party_packages(root))
    known = set(modules)
    found = []
    for name, module in sorted(modules.items()):
        rules = [forbidden for prefix, forbidden in RULES.items() if governs(prefix, name)]
        for forbidden in rules:
            for target, line in imported_names(module, known).items():
                if any(target == f or target.startswith(f + ".") for f in forbidden):
                    found.append(f"{module.path.relative_to(root)}:{line}: {name} imports {target}")
    return found


def test_no_module_imports_a_layer_above_it() -> None:
    assert violations() == []


# ------------------------------------------------------------------ negative control: the checker on a small tree
def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_reports_forbidden_imports_and_a_cycle_in_a_synthetic_tree(tmp_path: Path) -> None:
    """The real parser and rules, run on a module tree laid out like the repository, name each bad import
    (a function-level one included) and nothing else, and the cycle detector finds the cycle planted in it."""
    _tree(tmp_path, {
        "specframe/__init__.py": "",
        "specframe/pipeline.py": "",
        "specframe/builtin/__init__.py": "",
        "specframe/builtin/shape.py": "",
        "specframe/tree/__init__.py": "",
        "specframe/tree/a.py": "from specframe.tree import b\n",
        "specframe/tree/b.py": "def f():\n    from . import a\n",
        "specframe/cost/__init__.py": "",
        # allowed: the cost model may import the tree; a TYPE_CHECKING import is not run
        "specframe/cost/ok.py": "from typing import TYPE_CHECKING\nimport specframe.tree.a\n"
                                "if TYPE_CHECKING:\n    from specframe.pipeline import x\n",
        # forbidden: the cost model importing the pipeline, inside a function
        "specframe/cost/bad.py": "import os\n\n\ndef build():\n    from specframe.pipeline import build\n",
        "plugins/specframe-trees/specframe_trees/__init__.py": "",
        "plugins/specframe-trees/specframe_trees/builders/__init__.py": "",
        # forbidden: a plugin importing a built-in stage's module
        "plugins/specframe-trees/specframe_trees/builders/x.py": "from specframe.builtin.shape import y\n",
    })
    assert violations(tmp_path) == [
        "specframe/cost/bad.py:5: specframe.cost.bad imports specframe.pipeline",
        "plugins/specframe-trees/specframe_trees/builders/x.py:1: specframe_trees.builders.x imports "
        "specframe.builtin.shape",
    ]
    graph = import_graph(find_modules(first_party_packages(tmp_path)))
    assert strongly_connected(graph) == [["specframe.tree.a", "specframe.tree.b"]]
