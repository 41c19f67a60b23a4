"""The ``diffusion`` entry point: components, capabilities, and the cross-stage checks."""

from __future__ import annotations

import pytest

from specframe.config.validate import validate_pipeline
from specframe.errors import ConfigError
from specframe.plugins import PluginHost

PLUGINS = ["diffusion", "hf", "trees", "verifiers"]


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return PluginHost(allowlist=PLUGINS)


def test_components_and_capabilities_are_declared(host: PluginHost) -> None:
    registry = host.registry
    for name in ("dflash", "domino", "dspark"):
        record = registry.get("drafter", name)
        caps = record.spec.capabilities
        assert record.distribution == "specframe-diffusion"
        assert caps.needs_target_hidden and caps.parallel_block and caps.emits_logits and caps.emits_features
    for name in ("ar", "markov"):
        caps = registry.get("corrector", name).spec.capabilities
        assert caps.stateful and caps.needs_features and caps.path_dependent


@pytest.mark.parametrize(
    ("drafter", "corrector", "message"),
    [({"type": "dflash", "checkpoint": "/ckpt"}, {"type": "ar"}, "needs a domino checkpoint"),
     ({"type": "domino", "checkpoint": "/ckpt"}, {"type": "markov"}, "needs a dspark checkpoint"),
     ({"type": "ngram"}, {"type": "markov"}, "drafter.type: ngram has none")],
)
def test_head_without_a_matching_checkpoint_is_rejected(host: PluginHost, drafter: dict, corrector: dict,
                                                        message: str) -> None:
    config = {"drafter": drafter, "corrector": corrector, "tree_builder": {"type": "chain"}}
    with pytest.raises(ConfigError, match=message):
        validate_pipeline(config, host, has_target_object=True)
    if drafter["type"] != "ngram":  # with its own checkpoint the head no longer depends on the drafter's
        validate_pipeline(dict(config, corrector=dict(corrector, checkpoint="/elsewhere")), host,
                          has_target_object=True)
