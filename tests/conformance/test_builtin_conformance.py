"""The conformance kit on the core's built-in stages (drafter ``none``, corrector ``identity``, tree builder
``chain``, pruner ``none``), registered by every plugin host as plugin ``builtin``."""

from __future__ import annotations

from specframe.plugins import BUILTIN_PLUGIN
from specframe.testing.conformance import ConformanceCase, ConformanceSuite, plugin_registry


class TestBuiltinConformance(ConformanceSuite):
    plugin = BUILTIN_PLUGIN
    cases = (
        ConformanceCase("corrector", "identity"),
        ConformanceCase("tree_builder", "chain", config={"max_depth": 2}, variant="short"),
    )


def test_the_builtin_plugin_registers_the_null_stages() -> None:
    names = {(r.spec.kind, r.spec.name) for r in plugin_registry(BUILTIN_PLUGIN)}
    assert names == {("drafter", "none"), ("corrector", "identity"), ("tree_builder", "chain"), ("pruner", "none")}
