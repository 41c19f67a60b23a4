"""`ConformanceSuite`: the pytest test class a plugin author subclasses to run every contract on their specs.

Usage, in a plugin's ``tests/test_conformance.py``::

    from specframe.testing.conformance import ConformanceCase, ConformanceSuite

    class TestConformance(ConformanceSuite):
        plugin = "lmdraft"                       # entry-point name (or a module registered in-process)
        cases = [ConformanceCase("drafter", "lm_draft", config=..., target=...)]

Every component the plugin registers is tested; those without an explicit case get one with the default
config. Each contract is a test method parametrised over the cases of its stage kind (test ids such as
``test_drafter_proposals[drafter-lm_draft]``); methods with no case of their kind are deselected. The
parametrisation happens in :func:`parametrize`, which specframe's pytest plugin calls from
``pytest_generate_tests``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import pytest

from specframe.plugins import PluginHost
from specframe.registry import STAGE_KINDS, ComponentRegistry
from specframe.testing.conformance import correctors, drafters, targets, trees, verifiers
from specframe.testing.conformance.cases import BuiltCase, ConformanceCase, resolve
from specframe.testing.conformance.common import check_config_round_trip, check_declaration
from specframe.testing.marks import UNUSED_MARK

_CASES: dict[type, list[ConformanceCase]] = {}
_BUILT: dict[tuple[type, str], BuiltCase] = {}


def contract(*kinds: str, when: Callable[[Any], bool] | None = None) -> Callable[[Any], Any]:
    """Mark a test method as a contract for ``kinds`` (optionally only for specs whose capabilities match)."""

    def mark(fn: Any) -> Any:
        fn.conformance_kinds = kinds
        fn.conformance_when = when
        return fn

    return mark


def plugin_registry(plugin: str | ModuleType) -> ComponentRegistry:
    """The components of one plugin: an installed entry point (by name), ``"builtin"`` (the core's own
    stages), or a module registered in-process."""
    if isinstance(plugin, str):
        host = PluginHost(autoload=True, allowlist=[plugin], disabled=(), trace=False)
        name = plugin
    else:
        host = PluginHost(autoload=False, allowlist=None, disabled=(), trace=False)
        name = host.register(plugin, name=plugin.__name__)
    registry = ComponentRegistry()
    for rec in host.registry:
        if rec.plugin == name:
            registry.add(rec.spec, plugin=rec.plugin, distribution=rec.distribution, version=rec.version)
    if not list(registry):
        raise ValueError(f"plugin {plugin!r} registered no components; is its distribution installed "
                         "(pip install -e .) and is the entry point in the `specframe` group?")
    return registry


def parametrize(metafunc: pytest.Metafunc) -> None:
    """Parametrise ``conformance_case`` of a suite's contract method over the matching cases."""
    cls, fn = metafunc.cls, metafunc.function
    kinds = getattr(fn, "conformance_kinds", None)
    if cls is None or kinds is None or not issubclass(cls, ConformanceSuite):
        return
    when = getattr(fn, "conformance_when", None)
    cases = [c for c in cls.conformance_cases()
             if c.kind in kinds and c.spec is not None and (when is None or when(c.spec.capabilities))]
    if cases:
        metafunc.parametrize("conformance_case", cases, ids=[c.id for c in cases])
    else:
        metafunc.parametrize("conformance_case", [pytest.param(None, marks=getattr(pytest.mark, UNUSED_MARK))],
                             ids=["no-case"])


class ConformanceSuite:
    """Contract tests for a plugin's components; subclass it as ``TestSomething`` and set :attr:`plugin`.

    Attributes:
        plugin: entry-point name of the installed plugin (``"lmdraft"``), or a module with hook
            implementations registered in-process.
        cases: explicit cases; components without one are tested with their default config.
        lossless_rows: rounds per distribution test of a lossless verifier.
    """

    plugin: ClassVar[str | ModuleType | None] = None
    cases: ClassVar[tuple[ConformanceCase, ...] | list[ConformanceCase]] = ()
    lossless_rows: ClassVar[int] = 20_000

    @classmethod
    def conformance_cases(cls) -> list[ConformanceCase]:
        """Every registered component of :attr:`plugin`, each with its explicit cases or a default one."""
        if cls not in _CASES:
            if cls.plugin is None:
                raise TypeError(f"{cls.__name__} must set `plugin` (entry-point name or module)")
            registry = plugin_registry(cls.plugin)
            unknown = [c.id for c in cls.cases if (c.kind, c.name) not in registry]
            if unknown:
                raise ValueError(f"{cls.__name__}.cases name components that {cls.plugin!r} does not register: "
                                 f"{', '.join(unknown)}")
            out = []
            for rec in registry:
                own = [c for c in cls.cases if (c.kind, c.name) == (rec.spec.kind, rec.spec.name)]
                out.extend(replace(c, spec=rec.spec) for c in own or [ConformanceCase(rec.spec.kind, rec.spec.name)])
            _CASES[cls] = out
        return _CASES[cls]

    def built(self, case: ConformanceCase, workdir: Path) -> BuiltCase:
        """The resolved case (config validated, checkpoints written once per test session)."""
        cls = type(self)
        key = (cls, case.id)
        if key not in _BUILT:
            scope = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{cls.__module__}.{cls.__qualname__}")
            _BUILT[key] = resolve(case, workdir / scope)
        return _BUILT[key]

    # ------------------------------------------------------------------------------------------ every kind
    @contract(*STAGE_KINDS)
    def test_declaration(self, conformance_case: ConformanceCase) -> None:
        assert conformance_case.spec is not None
        check_declaration(conformance_case.spec)

    @contract(*STAGE_KINDS)
    def test_config_round_trip(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        built = self.built(conformance_case, specframe_conformance_workdir)
        check_config_round_trip(built.spec, built.config)

    # --------------------------------------------------------------------------------------------- stages
    @contract("target")
    def test_target_tree_forward_and_commit(self, conformance_case: ConformanceCase,
                                            specframe_conformance_workdir: Path) -> None:
        targets.check_target(self.built(conformance_case, specframe_conformance_workdir))

    @contract("target")
    def test_target_ragged_batch(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        targets.check_target_ragged(self.built(conformance_case, specframe_conformance_workdir))

    @contract("drafter")
    def test_drafter_proposals(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        drafters.check_drafter(self.built(conformance_case, specframe_conformance_workdir))

    @contract("drafter")
    def test_drafter_reproducible(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        drafters.check_drafter_reproducible(self.built(conformance_case, specframe_conformance_workdir))

    @contract("drafter")
    def test_drafter_batch_rows(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        drafters.check_drafter_batch_rows(self.built(conformance_case, specframe_conformance_workdir))

    @contract("corrector")
    def test_corrector_scores(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        correctors.check_corrector(self.built(conformance_case, specframe_conformance_workdir))

    @contract("corrector")
    def test_corrector_reproducible(self, conformance_case: ConformanceCase,
                                    specframe_conformance_workdir: Path) -> None:
        correctors.check_corrector_reproducible(self.built(conformance_case, specframe_conformance_workdir))

    @contract("tree_builder")
    def test_tree_builder_trees(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        trees.check_tree_builder(self.built(conformance_case, specframe_conformance_workdir))

    @contract("tree_builder")
    def test_tree_builder_reproducible(self, conformance_case: ConformanceCase,
                                       specframe_conformance_workdir: Path) -> None:
        trees.check_tree_builder_reproducible(self.built(conformance_case, specframe_conformance_workdir))

    @contract("pruner")
    def test_pruner_subtrees(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        trees.check_pruner(self.built(conformance_case, specframe_conformance_workdir))

    @contract("pruner")
    def test_pruner_reproducible(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        trees.check_pruner_reproducible(self.built(conformance_case, specframe_conformance_workdir))

    @contract("verifier")
    def test_verifier_results(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        verifiers.check_verifier(self.built(conformance_case, specframe_conformance_workdir))

    @contract("verifier")
    def test_verifier_reproducible(self, conformance_case: ConformanceCase,
                                   specframe_conformance_workdir: Path) -> None:
        verifiers.check_verifier_reproducible(self.built(conformance_case, specframe_conformance_workdir))

    @contract("verifier", when=lambda caps: caps.lossless or caps.greedy_only)
    def test_verifier_matches_greedy_oracle(self, conformance_case: ConformanceCase,
                                            specframe_conformance_workdir: Path) -> None:
        verifiers.check_verifier_greedy(self.built(conformance_case, specframe_conformance_workdir))

    @contract("verifier", when=lambda caps: caps.lossless and not caps.greedy_only)
    def test_verifier_lossless(self, conformance_case: ConformanceCase, specframe_conformance_workdir: Path) -> None:
        built = self.built(conformance_case, specframe_conformance_workdir)
        verifiers.check_verifier_lossless(built, self.lossless_rows)
