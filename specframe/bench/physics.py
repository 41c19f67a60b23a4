"""The physics bound of speculative decoding at a batch size: the best speedup the cost model allows.

It reads the same cost model as `budget: auto` (`specframe.cost.profile.CostProfile`, ``C(B, n)`` = the target's
forward over ``B`` rows carrying ``n`` tokens, and the draft cost ``a + b B``, `specframe.cost.draft_cost`). With
``B`` rows in flight, plain decoding commits ``B`` tokens per round of ``C(B, B) + o_p`` ms (``o_p``: a plain
round's other stages). A round in which every row verifies ``k`` draft nodes commits ``B * tau(k)`` tokens
(``tau(k)``: tokens per round at that fixed budget, measured) in ``a + b B + C(B, B (k + 1)) + o_d`` ms. The bound
is the best ratio of the two rates over the node counts measured, and 1 (decode plainly) when none beats it::

    bound(B) = max(1, max_k  [B tau(k) / (a + b B + C(B, B (k + 1)) + o_d)]  /  [B / (C(B, B) + o_p)])

It is the bound of uniform strategies (every row the same ``k``); a controller that drafts some rows only can do
somewhat better on a mixed batch, so a measured speedup a little above it is possible. Benchmarks print each
method's speedup as a share of this bound (`benchmarks/batch_decoding.py`).

Example: C(1, n) = 40, 60 and 80 ms at n = 1, 4 and 8, a draft of 8 ms (a = 4, b = 4), tau = {3: 2.2, 7: 2.8},
no overheads: at B = 1, k = 3 gives 2.2 / (8 + 60) = 0.0324 tokens/ms against 1 / 40 = 0.025 (1.29x), k = 7 gives
2.8 / 88 (1.27x): the bound is 1.29x at k = 3.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from specframe.cost.profile import CostProfile


@dataclass(frozen=True)
class Bound:
    """The bound at one batch size and the node count that reaches it (0: plain decoding)."""

    batch: int
    speedup: float
    nodes: int


def physics_bound(batch: int, profile: CostProfile, draft: tuple[float, float],
                  tau_by_nodes: Mapping[int, float]) -> Bound:
    """See the module docstring. ``profile``: the cost model (its ``plain``, ``verify`` and ``commit`` overheads
    included); ``draft``: ``(a, b)``, the draft cost's fixed and per-row milliseconds; ``tau_by_nodes[k]``: tokens
    per round at ``k`` nodes."""
    fixed, per_row = draft
    plain_rate = profile.plain_rate(batch)
    drafted_overhead = profile.overhead("verify") + profile.overhead("commit")
    best = Bound(batch, 1.0, 0)
    for k, tau in sorted(tau_by_nodes.items()):
        if k < 1:
            continue
        ms = fixed + per_row * batch + profile.cost(batch, batch * (k + 1)) + drafted_overhead
        rate = batch * tau / max(ms, 1e-9)
        if rate / plain_rate > best.speedup:
            best = Bound(batch, rate / plain_rate, k)
    return best
