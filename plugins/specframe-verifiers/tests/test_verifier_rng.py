"""Randomness: seeded determinism, seed sensitivity, and the global torch RNG left untouched."""

from __future__ import annotations

import pytest
import torch
from specframe_verifiers import (
    ChainRejectionVerifier,
    GreedyVerifier,
    SampledTreeBuilder,
    TreeRejectionVerifier,
    WalkVerifier,
)
from verifier_scenarios import PROMPT, ROOT, make_corrector, make_drafter, make_target

from specframe.interfaces import DecodeState, RoundContext, Verifier
from specframe.sampling.noise import RoundNoise
from specframe.tree import DraftTree
from specframe.types import SamplingParams, VerifyResult

ROWS = 64
PARAMS = SamplingParams(temperature=1.0, top_k=5, top_p=0.95)
VERIFIERS: dict[str, tuple[type[Verifier], tuple[int, ...]]] = {
    "greedy": (GreedyVerifier, (3, 2)),
    "walk": (WalkVerifier, (3, 2)),
    "chain_rejection": (ChainRejectionVerifier, (1, 1, 1)),
    "tree_rejection": (TreeRejectionVerifier, (3, 2)),
}


def _round(verifier: Verifier, branching: tuple[int, ...], seed: int) -> tuple[DraftTree, VerifyResult]:
    """Build a sampled tree and verify it, every random choice keyed by ``seed`` (``RoundNoise.from_seed``)."""
    target = make_target()
    ctx = RoundContext(budget=16, sampling=PARAMS, noise=RoundNoise.from_seed(seed))
    state = DecodeState(tokens=torch.tensor([[*PROMPT, ROOT]]).expand(ROWS, -1), prompt_len=2, sampling=PARAMS,
                        seed=seed)
    tree = SampledTreeBuilder(branching, target.vocab_size).build(make_drafter(target).propose(state),
                                                                  make_corrector(), ctx)
    target.prefill(torch.tensor([PROMPT]).expand(ROWS, -1))
    return tree, verifier.verify(tree, target.forward_tree(tree).logits, ctx)


def _same(a: tuple[DraftTree, VerifyResult], b: tuple[DraftTree, VerifyResult]) -> bool:
    (ta, ra), (tb, rb) = a, b
    return (torch.equal(ta.tokens, tb.tokens) and torch.equal(ra.accepted_nodes, rb.accepted_nodes)
            and torch.equal(ra.bonus_token, rb.bonus_token))


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_same_seed_same_round(name: str) -> None:
    cls, branching = VERIFIERS[name]
    assert _same(_round(cls(), branching, seed=5), _round(cls(), branching, seed=5))


@pytest.mark.parametrize("name", list(VERIFIERS))
def test_other_seed_other_round(name: str) -> None:
    cls, branching = VERIFIERS[name]
    first = _round(cls(), branching, seed=5)
    assert not _same(first, _round(cls(), branching, seed=6))


def test_verifier_coins_depend_on_their_streams() -> None:
    """Same tree, different accept/residual/target streams: different decisions for a rejection verifier."""
    tree, first = _round(TreeRejectionVerifier(), (3, 2), seed=5)
    target = make_target()
    target.prefill(torch.tensor([PROMPT]).expand(ROWS, -1))
    ctx = RoundContext(budget=16, sampling=PARAMS, noise=RoundNoise.from_seed(99))
    again = TreeRejectionVerifier().verify(tree, target.forward_tree(tree).logits, ctx)
    assert not torch.equal(first.bonus_token, again.bonus_token)


def test_global_rng_untouched() -> None:
    torch.manual_seed(1234)
    before = torch.get_rng_state()
    for cls, branching in VERIFIERS.values():
        _round(cls(), branching, seed=3)
    assert torch.equal(before, torch.get_rng_state())
