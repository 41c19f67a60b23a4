"""Conformance kit for plugin authors: contract tests every specframe component must pass.

Subclass :class:`ConformanceSuite` in your plugin's tests and name your plugin; every component it registers
is then tested against the contract of its stage kind::

    # tests/test_conformance.py
    from specframe.testing.conformance import ConformanceCase, ConformanceSuite

    class TestConformance(ConformanceSuite):
        plugin = "lmdraft"   # the entry-point name in the `specframe` group
        cases = [ConformanceCase("drafter", "lm_draft", config=lambda workdir: {"model": write_tiny(workdir)},
                                 target=tiny_target)]

Contracts (docs/plugins/conformance.md lists them in full):

* every kind: a well-formed declaration; config round-trip (``model_dump -> model_validate`` equal, also
  through JSON), frozen, unknown fields rejected, every field described; the factory returns the interface;
  no use of the global torch RNG;
* drafters: proposal shapes, dtypes, devices, sorted distinct candidates, ``logprobs = log_softmax(logits)``
  at the candidates, declared outputs present, and identical runs after ``begin`` again and after a rebuild;
* targets: tree logits equal causal prefill logits, commit keeps exactly the accepted path, reset, taps;
* correctors: state and score shapes, scores are log-probabilities over the candidates, masked candidates
  stay masked, honest ``path_dependent`` / ``stateful`` / ``needs_logits`` / ``needs_features``;
* tree builders: ``check_tree``-valid trees of live candidates, deterministic regime independent of the RNG,
  sampled regime records ``child_q``, empty proposals;
* pruners: valid ancestor-closed subsets of the input that fit the budget (or the input unchanged);
* verifiers: root-first accepted paths; greedy decisions equal to a brute-force oracle at temperature 0;
  ``lossless=True`` verifiers pass the G-test of the emitted tokens' law in every declared regime.

The check functions are importable on their own (``check_drafter(built)`` etc.) for ad-hoc use.
"""

from specframe.testing.conformance.cases import BuiltCase, ConformanceCase, ProposalShape, resolve, toy_target
from specframe.testing.conformance.common import check_config_round_trip, check_declaration, check_factory
from specframe.testing.conformance.correctors import check_corrector, check_corrector_reproducible
from specframe.testing.conformance.drafters import (
    check_drafter,
    check_drafter_batch_rows,
    check_drafter_reproducible,
    check_proposal,
)
from specframe.testing.conformance.suite import ConformanceSuite, contract, parametrize, plugin_registry
from specframe.testing.conformance.targets import check_target, check_target_ragged
from specframe.testing.conformance.trees import (
    check_pruner,
    check_pruner_reproducible,
    check_tree_builder,
    check_tree_builder_reproducible,
)
from specframe.testing.conformance.verifiers import (
    check_verifier,
    check_verifier_greedy,
    check_verifier_lossless,
    check_verifier_reproducible,
    lossless_g_test,
)

__all__ = [
    "BuiltCase",
    "ConformanceCase",
    "ConformanceSuite",
    "ProposalShape",
    "check_config_round_trip",
    "check_corrector",
    "check_corrector_reproducible",
    "check_declaration",
    "check_drafter",
    "check_drafter_batch_rows",
    "check_drafter_reproducible",
    "check_factory",
    "check_proposal",
    "check_pruner",
    "check_pruner_reproducible",
    "check_target",
    "check_target_ragged",
    "check_tree_builder",
    "check_tree_builder_reproducible",
    "check_verifier",
    "check_verifier_greedy",
    "check_verifier_lossless",
    "check_verifier_reproducible",
    "contract",
    "lossless_g_test",
    "parametrize",
    "plugin_registry",
    "resolve",
    "toy_target",
]
