"""The smallest real verifier, for tests that must not depend on installed plugins.

The other stages such tests need are the core's built-in null stages (:mod:`specframe.builtin`): drafter
``none``, corrector ``identity``, tree builder ``chain``, pruner ``none``. With them, plain decoding runs on
any target (the toy target included) and is exact at temperature 0.

* :class:`ArgmaxWalkVerifier`: follow the child whose token is the target's argmax (one row).

Example: for the chain ``3 -> 5 -> 7``, if the target's argmax after ``3`` is 5 and after ``5`` is 4, the
verifier accepts ``[0, 1]`` and emits the bonus token 4.
"""

from __future__ import annotations

import torch

from specframe.interfaces import RoundContext, Verifier
from specframe.tree import DraftTree
from specframe.types import VerifyResult


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
