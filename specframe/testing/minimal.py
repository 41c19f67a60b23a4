"""The smallest real verifier, for tests that must not depend on installed plugins.

The other stages such tests need are the core's built-in null stages (:mod:`specframe.builtin`): drafter
``none``, corrector ``identity``, tree builder ``chain``, pruner ``none``. With them, plain decoding runs on
any target (the toy target included) and is exact at temperature 0.

* :class:`ArgmaxWalkVerifier`: follow the child whose token is the target's argmax (every row).

Example: for the chain ``3 -> 5 -> 7``, if the target's argmax after ``3`` is 5 and after ``5`` is 4, the
verifier accepts ``[0, 1]`` and emits the bonus token 4.
"""

from __future__ import annotations

import torch

from specframe.interfaces import RoundContext, Verifier
from specframe.tree import DraftTree
from specframe.types import VerifyResult


class ArgmaxWalkVerifier(Verifier):
    """Greedy WALK, row by row in Python (a reference, not a fast path)."""

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        best = logits.argmax(-1).tolist()  # [B, N] target argmax after each node
        toks = tree.tokens.tolist()
        paths, bonus = [], []
        for b, kids in enumerate(tree.children()):
            path, node = [0], 0
            while True:
                nxt = [c for c in kids[node] if toks[b][c] == best[b][node]]
                if not nxt:
                    break
                node = nxt[0]
                path.append(node)
            paths.append(path)
            bonus.append(best[b][node])
        width = max(len(p) for p in paths)
        nodes = torch.tensor([p + [-1] * (width - len(p)) for p in paths], device=logits.device)  # [B, D + 1]
        return VerifyResult(accepted_nodes=nodes, num_accepted=torch.tensor([len(p) - 1 for p in paths],
                                                                             device=logits.device),
                            bonus_token=torch.tensor(bonus, device=logits.device))
