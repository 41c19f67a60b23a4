"""Registration through the entry point, declared capabilities, factories and the pipeline validation hook."""

from __future__ import annotations

import types
from typing import Literal

import pytest
import specframe_trees.plugin as trees_plugin

from specframe.config.base import ComponentConfig
from specframe.config.validate import validate_pipeline
from specframe.errors import ConfigError
from specframe.interfaces import BuildContext, Corrector, Pruner, TreeBuilder
from specframe.plugins import PluginHost, hookimpl
from specframe.registry import ComponentSpec, CorrectorCapabilities, DrafterCapabilities, VerifierCapabilities

EXPECTED = {  # the null stages (identity, chain, none) are the core's built-ins
    "corrector": {"random_gru", "random_markov"},
    "tree_builder": {"heap", "heap_sequential", "dartree", "chain_then_heap"},
    "pruner": {"deferred_topb", "taps"},
}
INTERFACE = {"corrector": Corrector, "tree_builder": TreeBuilder, "pruner": Pruner}


def test_entry_point_registers_every_stage() -> None:
    # Only this distribution's entry point: other installed plugins must not make this test fail.
    registry = PluginHost(autoload=True, allowlist={"trees"}, disabled=(), trace=False).registry
    for kind, names in EXPECTED.items():
        for name in names:
            record = registry.get(kind, name)
            assert record.plugin == "trees" and record.distribution == "specframe-trees"
            component = record.spec.factory(record.spec.config(), BuildContext(pipeline=None))
            assert isinstance(component, INTERFACE[kind])
            assert record.spec.summary


def test_capabilities_are_declared(specframe_plugin_host: PluginHost) -> None:
    specframe_plugin_host.register(trees_plugin, "trees")
    registry = specframe_plugin_host.registry
    identity = registry.get("corrector", "identity").spec.capabilities
    assert identity == CorrectorCapabilities()
    for name in ("random_gru", "random_markov"):
        caps = registry.get("corrector", name).spec.capabilities
        assert caps.stateful and caps.needs_features and caps.path_dependent and not caps.needs_logits
    for name in EXPECTED["tree_builder"]:
        assert registry.get("tree_builder", name).spec.capabilities.draft_regime == "deterministic"


def _config(**stages: object) -> types.SimpleNamespace:
    defaults = {"corrector": {"type": "identity"}, "tree_builder": {"type": "chain"}, "pruner": {"type": "none"},
                "drafter": {"type": "fake"}}
    merged = {**defaults, **stages}
    return types.SimpleNamespace(budget=64, **{k: types.SimpleNamespace(**v) for k, v in merged.items()})


@pytest.fixture
def host(specframe_plugin_host: PluginHost) -> PluginHost:
    specframe_plugin_host.register(trees_plugin, "trees")
    specframe_plugin_host.register(_FakeStages, "fake")
    return specframe_plugin_host


def test_heap_with_a_path_dependent_corrector_is_rejected(host: PluginHost) -> None:
    problems = host.validate_pipeline(_config(corrector={"type": "random_gru"}, tree_builder={"type": "heap"}))
    assert len(problems) == 1 and "heap_sequential" in problems[0] and "chain_then_heap" in problems[0]
    assert host.validate_pipeline(_config(tree_builder={"type": "heap"})) == []
    assert host.validate_pipeline(_config(corrector={"type": "random_markov"},
                                          tree_builder={"type": "heap_sequential"})) == []


def test_pruned_dartree_without_a_pruner_is_rejected(host: PluginHost) -> None:
    dart = {"type": "dartree", "mode": "pruned", "width": 12, "max_depth": 16, "budget": None}
    problems = host.validate_pipeline(_config(tree_builder=dart))
    assert len(problems) == 1 and "deferred_topb" in problems[0] and "12 x 16" in problems[0]
    assert host.validate_pipeline(_config(tree_builder=dart, pruner={"type": "deferred_topb"})) == []
    assert host.validate_pipeline(_config(tree_builder={**dart, "mode": "fixed"})) == []
    assert host.validate_pipeline(_config(tree_builder={**dart, "width": 4})) == []  # 4 x 16 <= 64


def test_full_vocab_needs_a_drafter_with_logits(host: PluginHost) -> None:
    corrector = {"type": "random_gru", "normalize": "full_vocab"}
    problems = host.validate_pipeline(_config(corrector=corrector, tree_builder={"type": "dartree", "mode": "fixed",
                                                                                  "width": 1, "max_depth": 4,
                                                                                  "budget": None}))
    assert len(problems) == 1 and "normalize: candidates" in problems[0]
    assert host.validate_pipeline(_config(corrector=corrector, drafter={"type": "fake_logits"})) == []


def test_real_pipeline_validation_reports_the_problem(host: PluginHost) -> None:
    data = {"drafter": {"type": "fake"}, "corrector": {"type": "random_gru"}, "tree_builder": {"type": "heap"},
            "verifier": {"type": "fake_verifier"}}
    with pytest.raises(ConfigError, match=r"tree_builder\.type: heap"):
        validate_pipeline(data, host, has_target_object=True)
    data["tree_builder"] = {"type": "dartree"}
    data["pruner"] = {"type": "deferred_topb", "beta": 0.5}
    with pytest.raises(ConfigError, match="refused"):
        validate_pipeline(data, host, has_target_object=True)
    data["pruner"] = {"type": "deferred_topb"}
    config = validate_pipeline(data, host, has_target_object=True)
    assert config.tree_builder.width == 12 and config.tree_builder.max_depth == 16
    assert config.tree_builder.candidates == 64 and config.pruner.beta == -0.2


class _FakeDrafterConfig(ComponentConfig):
    type: Literal["fake"] = "fake"


class _FakeLogitsDrafterConfig(ComponentConfig):
    type: Literal["fake_logits"] = "fake_logits"


class _FakeVerifierConfig(ComponentConfig):
    type: Literal["fake_verifier"] = "fake_verifier"


class _FakeStages:
    """An in-process plugin with two feature-emitting drafters (with and without logits) and a verifier."""

    @staticmethod
    @hookimpl
    def specframe_drafters():
        yield ComponentSpec(kind="drafter", name="fake", config=_FakeDrafterConfig, factory=lambda c, x: None,
                            capabilities=DrafterCapabilities(emits_features=True))
        yield ComponentSpec(kind="drafter", name="fake_logits", config=_FakeLogitsDrafterConfig,
                            factory=lambda c, x: None,
                            capabilities=DrafterCapabilities(emits_features=True, emits_logits=True))

    @staticmethod
    @hookimpl
    def specframe_verifiers():
        yield ComponentSpec(kind="verifier", name="fake_verifier", config=_FakeVerifierConfig,
                            factory=lambda c, x: None, capabilities=VerifierCapabilities(lossless=True))
