"""Shared set-up for the verifier tests: one toy round replicated over many batch rows.

Every row holds the same context ``(PREV2, ROOT)`` (``PREV2`` is the last cached token, ``ROOT`` the root), so
the rows are independent repetitions of one round and the empirical law of the emitted tokens can be compared
with :func:`specframe.testing.stats.exact_first_two_law`. Rows share one generator per stream.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

import torch
from specframe_verifiers import SampledTreeBuilder

from specframe.interfaces import DecodeState, RoundContext, Verifier
from specframe.sampling.noise import RoundNoise
from specframe.testing.stats import GTestResult, exact_first_two_law, first_two_tokens, g_test, joint_counts
from specframe.testing.toy import ToyCorrector, ToyDrafter, ToyTarget
from specframe.tree import DraftTree
from specframe.types import SamplingParams, VerifyResult

VOCAB = 6
PROMPT = (3, 1)  # PREV2 = 1 is the last cached token
ROOT = 4
ROWS = 20_000  # rounds per distribution test
SETTINGS = {
    "T1": SamplingParams(temperature=1.0),
    "T0.7-p0.9": SamplingParams(temperature=0.7, top_p=0.9),
}


def make_target() -> ToyTarget:
    return ToyTarget.random(VOCAB, seed=0, scale=0.8)


def make_drafter(target: ToyTarget) -> ToyDrafter:
    return ToyDrafter(target, depth=3, num_candidates=4, distance=1.0, seed=1)


def make_corrector() -> ToyCorrector:
    return ToyCorrector(VOCAB, strength=1.0, seed=2)


def repeat_tree(tree: DraftTree, rows: int) -> DraftTree:
    """A one-row tree copied into ``rows`` rows."""

    def rep(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.expand(rows, *t.shape[1:]).contiguous()

    return replace(tree, tokens=rep(tree.tokens), parent=rep(tree.parent), depth=rep(tree.depth),
                   logq=rep(tree.logq), score=rep(tree.score), valid=rep(tree.valid), child_q=rep(tree.child_q))


def deterministic_tree() -> DraftTree:
    """A fixed tree under the root: 3 children, two of them with 2 children each, one grandchild deeper.

    The tokens are the target's most likely continuations and a few unlikely ones, so walks both stop early
    and go deep.
    """
    target = make_target()
    first = target.logits_after([*PROMPT, ROOT]).argsort(descending=True).tolist()
    a, b, c = first[0], first[1], first[-1]
    second_a = target.logits_after([*PROMPT, ROOT, a]).argsort(descending=True).tolist()
    second_b = target.logits_after([*PROMPT, ROOT, b]).argsort(descending=True).tolist()
    third = target.logits_after([*PROMPT, ROOT, a, second_a[0]]).argmax().item()
    tokens = [ROOT, a, b, c, second_a[0], second_a[2], second_b[0], second_b[1], third]
    parents = [-1, 0, 0, 0, 1, 1, 2, 2, 4]
    return DraftTree.from_lists(tokens, parents)


@dataclass
class Round:
    """One verification round over ``ROWS`` rows: the tree, the target's logits and the round context."""

    target: ToyTarget
    tree: DraftTree
    logits: torch.Tensor  # [ROWS, N, V]
    params: SamplingParams
    seed: int

    def context(self) -> RoundContext:
        """A fresh context whose verifier streams depend only on the seed (the tree is already built)."""
        return RoundContext(budget=64, sampling=self.params, noise=RoundNoise.from_seed(self.seed + 1))

    def verify(self, verifier: Verifier) -> VerifyResult:
        return verifier.verify(self.tree, self.logits, self.context())

    def g_test(self, verifier: Verifier) -> tuple[GTestResult, VerifyResult]:
        """G-test of the joint law of the first two emitted tokens against the exact target law."""
        result = self.verify(verifier)
        gen = torch.Generator().manual_seed(self.seed + 2)  # separate stream for second tokens after the round
        first, second = first_two_tokens(result, self.tree, self.target, self.params, gen)
        law = exact_first_two_law(self.target, PROMPT[-1], ROOT, self.params)
        return g_test(joint_counts(first, second, VOCAB), law), result


def _round(tree: DraftTree, target: ToyTarget, params: SamplingParams, seed: int) -> Round:
    target.prefill(torch.tensor([PROMPT]).expand(tree.batch_size, -1))
    logits = target.forward_tree(tree).logits
    return Round(target=target, tree=tree, logits=logits, params=params, seed=seed)


@cache
def deterministic_round(setting: str, seed: int = 0, rows: int = ROWS) -> Round:
    return _round(repeat_tree(deterministic_tree(), rows), make_target(), SETTINGS[setting], seed)


@cache
def sampled_round(setting: str, branching: tuple[int, ...], seed: int = 0, rows: int = ROWS) -> Round:
    """A round whose tree ``sampled_tree(branching)`` built from the toy drafter and corrector, per row."""
    target = make_target()
    params = SETTINGS[setting]
    ctx = RoundContext(budget=64, sampling=params, noise=RoundNoise.from_seed(seed))
    state = DecodeState(tokens=torch.tensor([[*PROMPT, ROOT]]).expand(rows, -1), prompt_len=len(PROMPT),
                        sampling=params, seed=seed)
    proposal = make_drafter(target).propose(state)
    tree = SampledTreeBuilder(branching, VOCAB).build(proposal, make_corrector(), ctx)
    return _round(tree, target, params, seed)
