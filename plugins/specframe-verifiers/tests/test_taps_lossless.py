"""Distributional losslessness of `walk` on trees cut by the `taps` pruner (the sampling verifier it declares).

`taps` builds deterministic trees' subsets and declares no ``keeps_child_prefix``, so the only sampling verifier a
pipeline may pair it with is `walk` (exact for any fixed tree; `tree_rejection` is refused at validation). The
harness of ``test_verifier_losslessness``: the fixed toy tree of ``verifier_scenarios.deterministic_tree``, given
draft log-probs under which TAPS keeps a different subtree than DDTree's ranking would, is pruned to the budget,
replicated over ``ROWS`` rows and verified; the joint law of the first two emitted tokens is G-tested against the
target's exact law. The always-accept walk on the same pruned tree is the negative control (it must fail).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from specframe_trees.pruners import DeferredTopBConfig, DeferredTopBPruner, TapsConfig, TapsPruner
from specframe_verifiers import WalkVerifier
from test_verifier_losslessness import ALPHA, WalkAlwaysAccept
from verifier_scenarios import ROWS, SETTINGS, Round, _round, deterministic_tree, make_target, repeat_tree

from specframe.interfaces import RoundContext
from specframe.sampling.noise import RoundNoise
from specframe.tree import DraftTree, check_tree

BUDGET = 4
#: Draft log-probs of the scenario tree's nodes [root, a, b, c, a1, a3, b1, b2, a1's child] (a, b, c under the
#: root; a1, a3 under a; b1, b2 under b): TAPS keeps a, a1, b and a1's child; DDTree's ranking keeps b1 instead.
LOGQ = [0.0, -0.4, -0.9, -2.5, -0.3, -1.5, -0.2, -0.8, -0.5]


def pruned_tree() -> DraftTree:
    base = deterministic_tree()
    logq = torch.tensor([LOGQ], dtype=torch.float32)  # [1, N]
    tree = replace(base, logq=logq, score=_path_sums(base, LOGQ))
    ctx = RoundContext(budget=BUDGET, sampling=SETTINGS["T1"], noise=RoundNoise.from_seed(0))
    pruned = TapsPruner(TapsConfig()).prune(tree, ctx)
    assert check_tree(pruned, budget=BUDGET) == []
    ddtree = DeferredTopBPruner(DeferredTopBConfig(beta=0.0)).prune(tree, ctx)
    assert not torch.equal(pruned.tokens, ddtree.tokens)  # the test is about TAPS' own choice
    return pruned


def _path_sums(tree: DraftTree, logq: list[float]) -> torch.Tensor:  # [1, N] path scores (summed logq)
    return torch.tensor([[sum(logq[j] for j in tree.path_to(0, i)[1:]) for i in range(len(logq))]],
                        dtype=torch.float32)


def taps_round(setting: str) -> Round:
    return _round(repeat_tree(pruned_tree(), ROWS), make_target(), SETTINGS[setting], seed=0)


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_walk_on_taps_pruned_trees_is_lossless(setting: str) -> None:
    res, result = taps_round(setting).g_test(WalkVerifier())
    assert res.impossible == 0
    assert res.p_value >= ALPHA, f"walk on a taps tree at {setting}: G = {res.statistic:.1f}, p = {res.p_value:.3g}"
    assert float((result.num_accepted >= 2).double().mean()) > 0.05  # the kept main path is walked deep


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_always_accept_on_taps_pruned_trees_fails(setting: str) -> None:
    res, _ = taps_round(setting).g_test(WalkAlwaysAccept())
    assert res.p_value < ALPHA and not math.isnan(res.p_value)
