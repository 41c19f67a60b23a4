"""The conformance kit on the core's built-in stages (drafter ``none``, corrector ``identity``, tree builder
``chain``, pruner ``none``), registered by every plugin host as plugin ``builtin``."""

from __future__ import annotations

from specframe.config import build_pipeline_model
from specframe.config.pipeline import STAGE_DEFAULTS, STAGE_FIELDS
from specframe.plugins import BUILTIN_PLUGIN, PluginHost
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


def test_stage_defaults_are_builtin_components_a_pipeline_may_leave_out() -> None:
    host = PluginHost(autoload=False)
    for field, name in STAGE_DEFAULTS.items():
        if field != "verifier":  # `auto` is the core's own choice of verifier, not a component
            assert host.registry.get(STAGE_FIELDS[field], name).plugin == BUILTIN_PLUGIN, field
    config = build_pipeline_model(host.registry).model_validate({"drafter": {"type": "none"}})
    assert {field: getattr(config, field).type for field in STAGE_DEFAULTS} == STAGE_DEFAULTS
