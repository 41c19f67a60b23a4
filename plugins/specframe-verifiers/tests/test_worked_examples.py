"""The worked examples in the verifier docstrings, run through the verifiers they describe."""

from __future__ import annotations

import torch
from specframe_verifiers import ChainRejectionVerifier, TreeRejectionVerifier, WalkVerifier
from specframe_verifiers.rejection import residual_law

from specframe.interfaces import RoundContext
from specframe.sampling.noise import RoundNoise
from specframe.tree import DraftTree
from specframe.types import SamplingParams


class FixedDraws(WalkVerifier):
    def __init__(self, draws: list[int]) -> None:
        self.fixed = torch.tensor([draws])

    def draws(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> torch.Tensor:
        return self.fixed


def test_walk_example() -> None:
    tree = DraftTree.from_lists([7, 3, 5, 9], [-1, 0, 0, 1])
    ctx = RoundContext(budget=8, sampling=SamplingParams(1.0), noise=RoundNoise.from_seed(0))
    result = FixedDraws([3, 9, 1, 4]).verify(tree, torch.zeros(1, 4, 10), ctx)
    assert result.accepted_nodes.tolist() == [[0, 1, 3]]
    assert result.num_accepted.tolist() == [2] and result.bonus_token.tolist() == [4]


def test_chain_rejection_example() -> None:
    """The docstring's example run through the verifier: ``q = [0.8, 0.2]``, ``p = [0.5, 0.5]``."""
    p, q = torch.tensor([0.5, 0.5]), torch.tensor([0.8, 0.2])
    assert torch.allclose(residual_law(p, q), torch.tensor([0.0, 1.0]))
    rows = 5000
    drafts = [0] * 4000 + [1] * 1000  # d_1 ~ q, in exact proportions
    tree = DraftTree.stack([DraftTree.from_lists([1, d], [-1, 0]) for d in drafts])
    child_q = torch.zeros(rows, 2, 2)  # [B, N, V]
    child_q[:, 0] = q
    tree = DraftTree(**{**tree.__dict__, "child_q": child_q})
    logits = torch.zeros(rows, 2, 2)  # [B, N, V]: p = [0.5, 0.5] at every node (temperature 1)
    ctx = RoundContext(budget=1, sampling=SamplingParams(1.0), noise=RoundNoise.from_seed(0))
    result = ChainRejectionVerifier().verify(tree, logits, ctx)
    accepted = result.num_accepted == 1  # [B]
    draft = torch.tensor(drafts)
    assert abs(float(accepted[draft == 0].double().mean()) - 0.625) < 0.035  # min(1, 0.5 / 0.8)
    assert accepted[draft == 1].all()  # p / q = 2.5 >= 1
    assert result.bonus_token[~accepted].eq(1).all()  # the residual [0, 1] after a rejection
    first = torch.where(accepted, draft, result.bonus_token)  # [B] the first emitted token
    assert abs(float(first.eq(0).double().mean()) - 0.5) < 0.035  # exactly p overall


def test_tree_rejection_example() -> None:
    p = torch.tensor([[0.2, 0.5, 0.3]], dtype=torch.float64)
    q = torch.tensor([[0.6, 0.3, 0.1]], dtype=torch.float64)
    verifier = TreeRejectionVerifier()
    p2, q2 = verifier.residual(p, q), verifier.drop_tried(q, torch.tensor([[0]]))
    assert torch.allclose(p2, torch.tensor([[0.0, 0.5, 0.5]], dtype=torch.float64))
    assert torch.allclose(q2, torch.tensor([[0.0, 0.75, 0.25]], dtype=torch.float64))
    p3 = verifier.residual(p2, q2)
    assert torch.allclose(p3, torch.tensor([[0.0, 0.0, 1.0]], dtype=torch.float64))


def test_residual_falls_back_to_p_when_p_equals_q() -> None:
    p = torch.tensor([0.25, 0.75])
    assert torch.equal(residual_law(p, p.clone()), p)


def test_chain_rejection_is_tree_rejection_on_chains() -> None:
    """Same decisions and the same random draws, round after round, on sampled chains."""
    torch.manual_seed(0)
    rows, depth, vocab = 64, 3, 5
    chains = [DraftTree.from_lists([1, *torch.randint(vocab, (depth,)).tolist()], [-1, *range(depth)])
              for _ in range(rows)]
    tree = DraftTree.stack(chains)
    child_q = torch.softmax(torch.randn(rows, depth + 1, vocab), dim=-1)  # [B, N, V]
    tree = DraftTree(**{**tree.__dict__, "child_q": child_q})
    logits = torch.randn(rows, depth + 1, vocab)  # [B, N, V]
    chain_ctx, tree_ctx = (RoundContext(budget=depth, sampling=SamplingParams(1.0), noise=RoundNoise.from_seed(7))
                           for _ in range(2))
    for _ in range(3):  # consecutive rounds share the streams
        a = ChainRejectionVerifier().verify(tree, logits, chain_ctx)
        b = TreeRejectionVerifier().verify(tree, logits, tree_ctx)
        assert torch.equal(a.accepted_nodes, b.accepted_nodes) and torch.equal(a.bonus_token, b.bonus_token)
