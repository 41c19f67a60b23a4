"""The two rules of `budget: auto`: how many nodes each row verifies, and which rows draft at all.

A round of ``B`` rows is priced by the one cost model (`CostProfile`): its target forward costs ``C(B, n)`` for the
``n`` tokens it carries, its draft ``a + b R`` for ``R`` drafting rows (`DraftCost`), and plain decoding at this
batch size commits ``lambda_B = B / C(B, B)`` tokens per millisecond (overheads included). A round beats plain
decoding when its extra tokens exceed ``lambda_B`` times its extra milliseconds (Dinkelbach's rule for the ratio
tokens / time), so the planner maximises

    value = sum over verified nodes v of p(v)  -  lambda_B * (a [R > 0] + b R + C(B, n) - C(B, B))

where ``p(v)`` is the predicted probability that node ``v``'s path is accepted (the calibrated estimate, scaled by
the row's own calibration, see `specframe.cost.auto_budget`). Two rules come out of it:

* **Node rule**: take nodes greedily by ``p`` across *all* rows (each row's nodes in its own order, so the set is
  ancestor-closed: ``p`` never rises along a path) and stop where the next nodes no longer pay,
  ``p(v) <= lambda_B * dC/dn``. Implemented as the best prefix of the global order (:func:`node_counts`), which is
  the same where ``C`` is convex in ``n`` and also right where it is not (a CPU's first extra token costs more than
  the next ones; a GPU's flat curve turns steep where it saturates). Each row gets its own count: DARTree's
  deferred top-B, across the batch. Where the target pads every row to the widest (no selective batching,
  ``packs`` False) the forward carries ``B (1 + max k)`` tokens, so nodes inside that width cost nothing more and
  every drafting row verifies up to it.
* **Row rule**: a row drafts only when its predicted extra tokens ``S_r`` exceed ``lambda_B`` times what it adds:
  ``b + a / R`` of drafting plus ``C(B, n) - C(B, n - its tokens)`` of verifying (:func:`plan_counts`). A row
  that fails, or that the node rule gave no node, is removed and the node rule runs again on the others (the
  shared ``a`` then falls on fewer rows, and a removed row's nodes no longer interleave with theirs).

Node counts can be restricted to the sizes the device runs fast (``allowed``, e.g. CUDA-graph buckets): a row's
count is then rounded down to the largest allowed one.

Everything here runs on the host from numbers known before the round (the statistics after the previous round),
so the forward's shape is known before drafting and decisions never depend on this round's draws.

Worked example (one row, packs, ``C(1, n) = 40, 50, 55, 60`` ms for ``n = 1..4``, no draft cost): ``lambda_1 =
1 / 40``; predicted ``p = [0.9, 0.5, 0.1]``. Values of the prefixes: ``0``, ``0.9 - 10/40 = 0.65``, ``1.4 -
15/40 = 1.025``, ``1.5 - 20/40 = 1.0``: verify 2 nodes (the third's 0.1 tokens do not pay its 5 ms, worth
0.125 tokens). With a draft cost of 60 ms the best value ``1.4 - 75/40 < 0``: the row decodes plainly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate

Cost = Callable[[int, float], float]


def _rounder(allowed: Sequence[int] | None) -> Callable[[int], int]:
    if allowed is None:
        return lambda k: k
    sizes = sorted({int(a) for a in allowed if a > 0})
    return lambda k: max((a for a in sizes if a <= k), default=0)


def forward_tokens(counts: Sequence[int], packs: bool) -> int:
    """Tokens of the round's target forward when row ``b`` verifies ``counts[b]`` nodes besides its root.

    Example: counts ``[7, 0, 0, 0]``: ``8 + 3 = 11`` tokens with selective batching, ``4 x 8 = 32`` without."""
    rows = len(counts)
    return rows + sum(counts) if packs else rows * (1 + max(counts, default=0))


def node_counts(p: Sequence[Sequence[float]], batch: int, cost: Cost, rate: float,
                draft_ms: Callable[[int], float], *, packs: bool, allowed: Sequence[int] | None = None) -> list[int]:
    """The node rule: each row's count, the best prefix of all rows' nodes taken by descending ``p``.

    Args:
        p: ``p[b]``: row ``b``'s predicted path acceptances, descending (empty: the row decodes plainly).
        batch: rows of the round (``len(p)``).
        cost: ``C(B, n)`` in ms.
        rate: ``lambda_B``, plain tokens per ms at ``batch`` rows.
        draft_ms: the draft cost of a round in which ``R`` rows draft (0 for none).
        packs: the target skips padding (selective batching).
        allowed: node counts a row may verify (None: any).
    """
    rounded = _rounder(allowed)
    sums = [[0.0, *accumulate(row)] for row in p]  # sums[b][k] = S_b(k)
    items = sorted(((v, b, j) for b, row in enumerate(p) for j, v in enumerate(row)), key=lambda t: (-t[0], t[1], t[2]))
    base = cost(batch, batch)
    counts, kept = [0] * batch, [0] * batch  # taken from the order, and rounded to an allowed count
    gain, total, width, drafting = 0.0, 0, 0, 0
    best, best_value = list(kept), 0.0  # all plain: value 0
    for _, b, _ in items:
        counts[b] += 1
        new = rounded(counts[b])
        if new == kept[b]:
            continue
        gain += sums[b][new] - sums[b][kept[b]]
        total += new - kept[b]
        drafting += kept[b] == 0
        width = max(width, new)
        kept[b] = new
        tokens = batch + total if packs else batch * (1 + width)
        value = gain - rate * (draft_ms(drafting) + cost(batch, tokens) - base)
        if value > best_value + 1e-12:
            best, best_value = list(kept), value
    if not packs and any(best):  # the forward runs the widest row's width for all: fill the drafting rows to it
        width = max(best)
        best = [rounded(min(width, len(row))) if k else 0 for k, row in zip(best, p, strict=True)]
    return best


def plan_counts(p: Sequence[Sequence[float]], batch: int, cost: Cost, rate: float, fixed_ms: float,
                per_row_ms: float, *, packs: bool, allowed: Sequence[int] | None = None) -> list[int]:
    """Both rules: the node rule (:func:`node_counts`) on the rows that may draft, then the row rule removes every
    drafting row whose predicted extra tokens do not exceed ``rate`` times its share of the draft (``per_row_ms +
    fixed_ms / R``) plus the verify milliseconds its tokens add, and the node rule runs again without them."""
    candidates = [list(row) for row in p]
    while True:
        counts = node_counts(candidates, batch, cost, rate,
                             lambda r: 0.0 if r <= 0 else fixed_ms + per_row_ms * r, packs=packs, allowed=allowed)
        drafting = [b for b, k in enumerate(counts) if k > 0]
        if not drafting:
            return counts
        full = cost(batch, forward_tokens(counts, packs))
        dropped = [b for b, row in enumerate(candidates) if row and not counts[b]]  # the node rule gave it none
        for b in drafting:
            without = cost(batch, forward_tokens([0 if i == b else k for i, k in enumerate(counts)], packs))
            extra_ms = per_row_ms + fixed_ms / len(drafting) + max(full - without, 0.0)
            if sum(candidates[b][:counts[b]]) <= rate * extra_ms:
                dropped.append(b)
        if not dropped:
            return counts
        for b in dropped:
            candidates[b] = []
