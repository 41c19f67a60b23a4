"""Sampled laws at temperature > 0 of the 2026 parent-conditioned stages, driven by the real components.

DFlash2's path selector and LiLiCorr's lattice reranker return, for every parent, a law ``q`` over the depth's
candidates; the ``sampled_chain`` builder draws each depth from it and records it (``child_q``), and
``chain_rejection`` verifies losslessly only if ``q`` is the law the draft was drawn from. PCTree is deterministic
and is verified by ``walk``. Each check runs one toy round over ``ROWS`` batch rows (independent repetitions, fixed
seeds) and G-tests counts against an exact law; every claim has a negative control that must fail at the same
sample size:

* the recorded ``child_q`` equals the stage's law computed here from its formula (processed by the sampling
  settings);
* the drawn (depth 1, depth 2) pairs follow ``q(a) q(b | a)``, with ``q(b | a)`` the stage's law for parent ``a``;
  control: the same draws against the law without the parent (the drafter's marginals);
* the first two tokens emitted by ``chain_rejection`` follow the target's law; control: the same trees with a
  ``child_q`` that is not the law they were drawn from (the drafter's marginals);
* PCTree trees verified by ``walk`` emit the target's law; control: a walk that always accepts.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest
import torch
from specframe_trees.builders import PCTreeBuilder, PCTreeConfig
from specframe_trees.correctors import (
    RandomLiLiCorrConfig,
    RandomPathSelectorConfig,
    build_random_lilicorr,
    build_random_path_selector,
)
from specframe_verifiers import ChainRejectionVerifier, SampledTreeBuilder, WalkVerifier
from test_verifier_losslessness import WalkAlwaysAccept
from verifier_scenarios import PROMPT, ROOT, VOCAB, make_drafter, make_target

from specframe.builtin.identity import IdentityCorrector
from specframe.interfaces import Corrector, DecodeState, RoundContext
from specframe.sampling import processed_logprobs
from specframe.sampling.noise import RoundNoise
from specframe.testing.stats import exact_first_two_law, first_two_tokens, g_test, joint_counts
from specframe.tree import DraftTree
from specframe.types import DraftProposal, SamplingParams

ROWS = 20_000
ALPHA = 1e-6
HIDDEN = 8
SETTINGS = {"T1": SamplingParams(temperature=1.0), "T0.7-p0.9": SamplingParams(temperature=0.7, top_p=0.9)}


def path_selector() -> Corrector:
    return build_random_path_selector(RandomPathSelectorConfig(seed=3, vocab_size=VOCAB, rank=4, hidden_size=HIDDEN,
                                                               top_k=None, init_std=0.7, dtype="float64"))


def lilicorr() -> Corrector:
    return build_random_lilicorr(RandomLiLiCorrConfig(seed=4, vocab_size=VOCAB, model_hidden_size=HIDDEN,
                                                      hidden_size=8, num_heads=2, num_slots=3, candidate_topk=4,
                                                      factor_dim=4, dtype="float64"))


CORRECTORS = {"path_selector": path_selector, "lilicorr": lilicorr}


@cache
def proposal(rows: int, params: SamplingParams) -> DraftProposal:
    """The toy drafter's proposal after ``(PROMPT, ROOT)`` in ``rows`` identical rows, with fixed features."""
    state = DecodeState(tokens=torch.tensor([[*PROMPT, ROOT]]).expand(rows, -1), prompt_len=len(PROMPT),
                        sampling=params)
    p = make_drafter(make_target()).propose(state)
    features = torch.randn(1, p.depth, HIDDEN, generator=torch.Generator().manual_seed(11))
    return replace(p, features=features.expand(rows, -1, -1))


def stage_law(corrector: Corrector, p: DraftProposal, depth: int, parent: int,
              params: SamplingParams) -> torch.Tensor:  # [V]
    """The stage's processed law over the vocabulary for the children of ``parent`` at ``depth`` (row 0)."""
    one = DraftProposal(root=p.root[:1], tokens=p.tokens[:1], logprobs=p.logprobs[:1], logits=p.logits[:1],
                        features=p.features[:1])
    lp = corrector.child_logprobs(one, depth, torch.tensor([[parent]]), torch.zeros(1, 1, 0))[0, 0]  # [K]
    full = torch.full((VOCAB,), float("-inf"), dtype=torch.float64).scatter(0, one.tokens[0, depth - 1],
                                                                            lp.double())
    return processed_logprobs(full, params).exp()


def joint_law(corrector: Corrector, p: DraftProposal, params: SamplingParams) -> torch.Tensor:  # [V, V]
    """``q(a) q(b | a)`` of the first two draws of a sampled chain."""
    first = stage_law(corrector, p, 1, ROOT, params)
    rows = [stage_law(corrector, p, 2, a, params) if first[a] > 0 else torch.zeros(VOCAB, dtype=torch.float64)
            for a in range(VOCAB)]
    return first[:, None] * torch.stack(rows)


@cache
def sampled_chain(name: str, setting: str) -> tuple[DraftTree, DraftProposal]:
    params = SETTINGS[setting]
    p = proposal(ROWS, params)
    ctx = RoundContext(budget=64, sampling=params, noise=RoundNoise.from_seed(5))
    return SampledTreeBuilder((1, 1, 1), VOCAB).build(p, CORRECTORS[name](), ctx), p


def emitted_law_test(tree: DraftTree, verifier: object, params: SamplingParams, seed: int):  # type: ignore[no-untyped-def]
    """G-test of the first two emitted tokens of one verified round against the target's exact law."""
    target = make_target()
    target.prefill(torch.tensor([PROMPT]).expand(tree.batch_size, -1))
    logits = target.forward_tree(tree).logits
    ctx = RoundContext(budget=64, sampling=params, noise=RoundNoise.from_seed(seed))
    result = verifier.verify(tree, logits, ctx)  # type: ignore[attr-defined]
    first, second = first_two_tokens(result, tree, target, params, torch.Generator().manual_seed(seed + 1))
    law = exact_first_two_law(target, PROMPT[-1], ROOT, params)
    return g_test(joint_counts(first, second, VOCAB), law), result


# ------------------------------------------------------------------------------------------ the tests
@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("name", list(CORRECTORS))
def test_recorded_q_is_the_stage_law(name: str, setting: str) -> None:
    tree, p = sampled_chain(name, setting)
    corrector = CORRECTORS[name]()
    params = SETTINGS[setting]
    assert torch.allclose(tree.child_q[0, 0].double(), stage_law(corrector, p, 1, ROOT, params), atol=1e-6)
    for row in (0, 1, 2):
        parent = int(tree.tokens[row, 1])
        assert torch.allclose(tree.child_q[row, 1].double(), stage_law(corrector, p, 2, parent, params), atol=1e-6)


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("name", list(CORRECTORS))
def test_draws_follow_the_parent_conditioned_law(name: str, setting: str) -> None:
    tree, p = sampled_chain(name, setting)
    params = SETTINGS[setting]
    assert bool(tree.valid[:, :3].all())
    counts = joint_counts(tree.tokens[:, 1], tree.tokens[:, 2], VOCAB)
    res = g_test(counts, joint_law(CORRECTORS[name](), p, params))
    assert res.impossible == 0 and res.p_value >= ALPHA, res
    # Control: the same draws against the law that forgets the parent (the drafter's marginals over the candidates).
    marginal = g_test(counts, joint_law(IdentityCorrector(), p, params))
    assert marginal.p_value < ALPHA, marginal


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("name", list(CORRECTORS))
def test_chain_rejection_over_the_stage_is_lossless(name: str, setting: str) -> None:
    tree, p = sampled_chain(name, setting)
    params = SETTINGS[setting]
    res, result = emitted_law_test(tree, ChainRejectionVerifier(), params, seed=7)
    assert res.impossible == 0 and res.p_value >= ALPHA, res
    assert float((result.num_accepted >= 2).double().mean()) > 0.05
    # Control: a stage that reports the drafter's marginals as q while drawing from its own law.
    wrong = torch.stack([stage_law(IdentityCorrector(), p, min(int(d) + 1, p.depth), 0, params)
                         for d in tree.depth[0]])  # [N, V] the marginal law of each node's children
    bad = replace(tree, child_q=wrong[None].expand_as(tree.child_q).to(tree.child_q.dtype).contiguous())
    control, _ = emitted_law_test(bad, ChainRejectionVerifier(), params, seed=7)
    assert control.p_value < ALPHA, control


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_pctree_walked_at_temperature_is_lossless(setting: str) -> None:
    params = SETTINGS[setting]
    p = proposal(ROWS, params)
    ctx = RoundContext(budget=8, sampling=params, noise=RoundNoise.from_seed(3))
    tree = PCTreeBuilder(PCTreeConfig(children=(3, 2, 1), width=6)).build(p, path_selector(), ctx)
    assert int(tree.num_nodes[0]) == 9 and bool((tree.num_nodes == 9).all())
    res, result = emitted_law_test(tree, WalkVerifier(), params, seed=9)
    assert res.impossible == 0 and res.p_value >= ALPHA, res
    assert float((result.num_accepted >= 2).double().mean()) > 0.05
    control, _ = emitted_law_test(tree, WalkAlwaysAccept(), params, seed=9)
    assert control.p_value < ALPHA, control
