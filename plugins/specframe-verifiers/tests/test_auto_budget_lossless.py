"""`budget: auto` keeps sampled verification lossless: trimmed trees keep every node's children as an index prefix.

The controller verifies a prefix of `verification_order(..., sibling_prefix=True)`; here each of the ``ROWS``
rows of a sampled round is trimmed to a random such prefix (random calibrated ``p`` per row, random size), and
the joint law of the first two emitted tokens is G-tested against the target's, as in
`test_verifier_losslessness.py`. The negative control drops each row's first sampled root child while keeping
the later ones (what a trim without the sibling rule may do): tree rejection then tries siblings against the
wrong residual law, and the same test must fail.
"""

from __future__ import annotations

import pytest
import torch
from specframe_verifiers import TreeRejectionVerifier, WalkVerifier
from verifier_scenarios import Round, sampled_round

from specframe.cost.chooser import verification_order
from specframe.tree import DraftTree

ALPHA = 1e-6
ROWS = 6000  # enough for the control to fail by orders of magnitude, a third of the time of 20000


def trimmed(rnd: Round, keep_rule: str, seed: int = 5) -> Round:
    """``rnd`` with every row's tree cut by ``keep_rule`` ("auto": a random auto prefix; "drop_first")."""
    gen = torch.Generator().manual_seed(seed)
    rows = []
    tree = rnd.tree
    kids = tree.children()
    for b in range(tree.batch_size):
        one = tree.row(b)
        n = int(one.num_nodes[0])
        if keep_rule == "auto":
            p = torch.rand(n, generator=gen, dtype=torch.float64)
            p[0] = 1.0
            parent = one.parent[0].tolist()
            for i in range(1, n):
                p[i] = min(float(p[i]), float(p[parent[i]]))
            order, _ = verification_order(one, p, sibling_prefix=True)
            k = int(torch.randint(0, n, (1,), generator=gen))
            keep_nodes = {0, *order[:k]}
        else:
            first = kids[b][0][0] if kids[b][0] else -1
            drop = {first} | {i for i in range(n) if first in one.path_to(0, i)}
            keep_nodes = {i for i in range(n) if i not in drop}
        keep = torch.zeros(1, one.capacity, dtype=torch.bool)
        keep[0, sorted(keep_nodes)] = True
        rows.append(one.subtree(keep))
    cut = DraftTree.stack(rows)
    index = torch.zeros(tree.batch_size, cut.capacity, dtype=torch.long)
    for b, row in enumerate(rows):  # the logits of each kept node, found by its path of tokens
        full = tree.row(b)
        old = {tuple(full.tokens[0, full.path_to(0, i)].tolist()): i for i in range(int(full.num_nodes[0]))}
        for j in range(int(row.num_nodes[0])):
            index[b, j] = old[tuple(row.tokens[0, row.path_to(0, j)].tolist())]
    logits = torch.gather(rnd.logits, 1, index[:, :, None].expand(-1, -1, rnd.logits.shape[-1]))
    return Round(target=rnd.target, tree=cut, logits=logits, params=rnd.params, seed=rnd.seed)


@pytest.mark.parametrize("verifier", [TreeRejectionVerifier, WalkVerifier], ids=lambda v: v.__name__)
def test_auto_trimmed_sampled_trees_stay_lossless(verifier: type) -> None:
    rnd = trimmed(sampled_round("T1", (3, 2), rows=ROWS), "auto")
    assert int(rnd.tree.num_nodes.min()) == 1 and int(rnd.tree.num_nodes.max()) > 4
    res, _ = rnd.g_test(verifier())
    assert res.impossible == 0 and res.p_value >= ALPHA, (res.statistic, res.p_value)


def test_negative_control_dropping_a_first_sibling_fails() -> None:
    rnd = trimmed(sampled_round("T1", (3, 2), rows=ROWS), "drop_first")
    res, _ = rnd.g_test(TreeRejectionVerifier())
    assert res.p_value < ALPHA, (res.statistic, res.p_value)
