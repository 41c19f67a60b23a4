"""`budget: auto` across a batch: one padded target forward verifies every row's tree.

The batched loop pads every row's tree to the batch's widest one (`DraftTree.stack`), so a round that lets
each row keep up to ``k`` nodes costs ``T(B * (k + 1))``: the verify curve read at the forward's total token
count (a forward's cost is dominated by its token count). The measured curve ends at a single row's largest
tree; a batch's forward far beyond it adds a point of its own (`AutoBudget`, `CostProfile.extend`), so the
curve is learnt where the batch runs instead of extrapolated.

Once the width ``k`` is paid for, every row keeps its ``k`` best nodes (in the order of
`specframe.cost.chooser.verification_order`), so the round commits ``B + sum_b S_b(min(k, n_b))`` tokens in
expectation and the best ``k`` maximises

    value(k) = sum_b S_b(min(k, n_b)) - lam * T(B * (k + 1))

with ``lam`` the batch's best rate so far (tokens per ms over all rows; plain decoding of ``B`` rows makes
``B / (T(B) + overhead)``). As ``B`` grows, ``T`` grows for the same ``k`` and ``lam`` grows with it, so
speculation shrinks and stops (``k = 0``: the roots alone) where it no longer pays. Rows keep different
numbers of nodes when their trees differ; the chosen ``k`` is recorded per row.

Example (B = 2, lam = 0.04 tokens/ms, T(2) = 40, T(4) = 42, T(6) = 60 ms): rows with p = [0.9, 0.5] and
[0.3] -> value(0) = -1.6, value(1) = 1.2 - 1.68 = -0.48, value(2) = 1.7 - 2.4 = -0.7 -> k = 1.
"""

from __future__ import annotations

from specframe.cost.auto_budget import AutoBudget
from specframe.cost.chooser import keep_mask, verification_order
from specframe.tree import DraftTree


def choose_batch(auto: AutoBudget, trees: list[DraftTree]) -> tuple[list[DraftTree], list[int]]:
    """Each row's subtree to verify and its node count, chosen jointly (see the module docstring)."""
    b = len(trees)
    auto.rows = b
    orders: list[list[int]] = []
    sums: list[list[float]] = []  # sums[r][j]: S_r(j), the expected accepted tokens of row r's j best nodes
    for tree in trees:
        p = auto.estimator.estimate(tree, 0)
        order, p_sorted = verification_order(tree, p, sibling_prefix=auto.sibling_prefix)
        order, p_sorted = order[: auto.settings.max_budget], p_sorted[: auto.settings.max_budget]
        running, acc = 0.0, [0.0]
        for value in p_sorted:
            running += value
            acc.append(running)
        orders.append(order)
        sums.append(acc)
    widest = max(len(o) for o in orders)
    costs = auto.profile.verify_costs(b * (widest + 1))  # costs[t - 1] = T(t)
    lam = auto.rate
    best_k, best_value = 0, None
    for k in range(widest + 1):
        gain = sum(acc[min(k, len(acc) - 1)] for acc in sums)
        value = gain - lam * costs[b * (k + 1) - 1]
        if best_value is None or value > best_value + 1e-12:
            best_k, best_value = k, value
    chosen, kept = [], []
    for tree, order in zip(trees, orders, strict=True):
        k = min(best_k, len(order))
        kept.append(k)
        chosen.append(tree if k == int(tree.num_nodes[0]) - 1 else tree.subtree(keep_mask(tree, order[:k])))
    return chosen, kept
