"""Registration through the entry point: names, capabilities, configs and factories."""

from __future__ import annotations

import pytest
import specframe_verifiers.plugin as plugin
from pydantic import ValidationError
from specframe_verifiers import SampledTreeBuilder
from specframe_verifiers.sampled_builders import SampledTreeConfig

from specframe.interfaces import BuildContext, TreeBuilder, Verifier
from specframe.plugins import PluginHost
from specframe.testing.toy import ToyTarget


def test_installed_entry_point_registers_every_component(specframe_installed_host: PluginHost) -> None:
    registry = specframe_installed_host.registry
    for name in ("greedy", "walk", "chain_rejection", "tree_rejection"):
        assert registry.get("verifier", name).distribution == "specframe-verifiers"
    for name in ("sampled_chain", "sampled_tree"):
        assert registry.get("tree_builder", name).distribution == "specframe-verifiers"


def test_capabilities_are_declared_honestly(specframe_plugin_host: PluginHost) -> None:
    specframe_plugin_host.register(plugin, name="verifiers")
    caps = {r.spec.name: r.spec.capabilities for r in specframe_plugin_host.registry.of_kind("verifier")}
    assert caps["greedy"].greedy_only and not caps["greedy"].requires_q
    assert not caps["walk"].greedy_only and not caps["walk"].requires_q
    assert caps["walk"].supported_regimes == {"deterministic", "sampled"}
    for name in ("chain_rejection", "tree_rejection"):
        assert caps[name].requires_q and caps[name].supported_regimes == {"sampled"}
        assert not caps[name].greedy_only
    assert all(c.lossless for c in caps.values())
    for rec in specframe_plugin_host.registry.of_kind("tree_builder"):
        assert rec.spec.capabilities.draft_regime == "sampled" or rec.plugin == "builtin"


def test_factories_build_components(specframe_plugin_host: PluginHost) -> None:
    specframe_plugin_host.register(plugin, name="verifiers")
    reg = specframe_plugin_host.registry
    ctx = BuildContext(pipeline=None, target=ToyTarget.random(7))
    for name in ("greedy", "walk", "chain_rejection", "tree_rejection"):
        spec = reg.get("verifier", name).spec
        assert isinstance(spec.factory(spec.config(), ctx), Verifier)
    tree_spec = reg.get("tree_builder", "sampled_tree").spec
    builder = tree_spec.factory(tree_spec.config(branching=[2, 1]), ctx)
    assert isinstance(builder, SampledTreeBuilder) and builder.branching == (2, 1) and builder.vocab_size == 7
    chain_spec = reg.get("tree_builder", "sampled_chain").spec
    chain = chain_spec.factory(chain_spec.config(depth=4), ctx)
    assert isinstance(chain, TreeBuilder) and chain.branching == (1, 1, 1, 1)
    assert chain_spec.factory(chain_spec.config(), BuildContext(pipeline=None)).branching is None


@pytest.mark.parametrize("bad", [[], [2, 0], [-1]])
def test_bad_branching_is_rejected_with_the_value(bad: list[int]) -> None:
    with pytest.raises(ValidationError, match="branching"):
        SampledTreeConfig(branching=bad)
