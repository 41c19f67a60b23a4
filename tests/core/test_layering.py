"""Layering: what may import what, so the layers stay a tree while the loop changes (imports inside functions
included, type-checking blocks aside; the graph is read by the cycle test's parser).

From the bottom up: the tree type and the sampling maths know nothing of stages or the loop; the stage interfaces
know the tree and sampling; the cost model measures a target and prices rounds, and never sees a pipeline or the
loop; the loop uses stages and the cost model, never the pipeline or the command line; plugins build on the public
API (``specframe.building`` for tree builders, ``specframe.notices``), never on the built-in stages' modules or
the `budget: auto` wiring.
"""

from __future__ import annotations

import pytest

from .test_import_cycles import ROOT, find_modules, first_party_packages, imported_names

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


def violations() -> list[str]:
    modules = find_modules(first_party_packages(ROOT))
    known = set(modules)
    found = []
    for name, module in sorted(modules.items()):
        rules = [forbidden for prefix, forbidden in RULES.items() if governs(prefix, name)]
        for forbidden in rules:
            for target, line in imported_names(module, known).items():
                if any(target == f or target.startswith(f + ".") for f in forbidden):
                    found.append(f"{module.path.relative_to(ROOT)}:{line}: {name} imports {target}")
    return found


def test_no_module_imports_a_layer_above_it() -> None:
    assert violations() == []


@pytest.mark.parametrize("source, bad", [("specframe.cost.x", "specframe.pipeline"),
                                         ("specframe_trees.builders.x", "specframe.builtin.shape")])
def test_the_rules_catch_a_violation(source: str, bad: str) -> None:
    """The check can fail: an import of the kind the rules forbid is named."""
    rules = [f for p, f in RULES.items() if governs(p, source)]
    assert any(bad == f or bad.startswith(f + ".") for forbidden in rules for f in forbidden)
