"""The smallest real implementation of each stage, for tests that must not depend on installed plugins.

They run on any target (the toy target included) and are exact at temperature 0:

* :class:`NoDraft`: an empty proposal (plain decoding);
* :class:`MarginalCorrector`: the proposal's base log-probs, unchanged;
* :class:`FirstCandidateChain`: the first candidate of every depth, as a chain of at most ``budget`` nodes;
* :class:`KeepAllPruner`: the tree as built;
* :class:`ArgmaxWalkVerifier`: follow the child whose token is the target's argmax (one row).

Example: with candidates ``[[5, 2], [7, 1]]`` per depth and root 3, :class:`FirstCandidateChain` builds
``3 -> 5 -> 7``; if the target's argmax after ``3`` is 5 and after ``5`` is 4, the verifier accepts ``[0, 1]``
and emits the bonus token 4.
"""

from __future__ import annotations

import torch

from specframe.interfaces import Corrector, DecodeState, Drafter, Pruner, RoundContext, TreeBuilder, Verifier
from specframe.tree import DraftTree
from specframe.types import DraftProposal, VerifyResult


class NoDraft(Drafter):
    supports_batch = True  # stateless

    def propose(self, state: DecodeState) -> DraftProposal:
        return DraftProposal.empty(state.root)


class MarginalCorrector(Corrector):
    def child_logprobs(self, proposal: DraftProposal, depth: int, tokens: torch.Tensor,
                       state: torch.Tensor) -> torch.Tensor:  # [B, M, K]
        return proposal.logprobs[:, depth - 1 : depth].expand(-1, tokens.shape[1], -1)


class FirstCandidateChain(TreeBuilder):
    def build(self, proposal: DraftProposal, corrector: Corrector, ctx: RoundContext) -> DraftTree:
        depth = min(proposal.depth, ctx.budget)
        tokens = [int(proposal.root[0])] + [int(proposal.tokens[0, d, 0]) for d in range(depth)]
        return DraftTree.from_lists(tokens, [-1, *range(depth)])


class KeepAllPruner(Pruner):
    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        return tree


class ArgmaxWalkVerifier(Verifier):
    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        best = logits[0].argmax(-1).tolist()  # [N] target argmax after each node
        kids = tree.children()[0]
        toks = tree.tokens[0].tolist()
        path, node = [0], 0
        while True:
            nxt = [c for c in kids[node] if toks[c] == best[node]]
            if not nxt:
                break
            node = nxt[0]
            path.append(node)
        return VerifyResult(accepted_nodes=torch.tensor([path]), num_accepted=torch.tensor([len(path) - 1]),
                            bonus_token=torch.tensor([best[node]]))
