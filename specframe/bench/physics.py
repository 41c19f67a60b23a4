"""The physics bound of speculative decoding at a batch size: the best speedup the machine's measured costs allow.

With ``B`` rows in flight, plain decoding commits ``B`` tokens per round of ``T(B) + o_p`` ms (``T(q)``: the
target's forward over ``q`` tokens, ``o_p``: a plain round's other costs). A round in which every row verifies
``k`` draft nodes commits ``B * tau(k)`` tokens (``tau(k)``: tokens per round of a tree of ``k`` nodes, measured at
that fixed budget) in ``draft(B) + T(B (k + 1)) + o_d`` ms. The bound is the best ratio of the two rates over the
node counts measured, and 1 (decode plainly) when none beats it::

    bound(B) = max(1, max_k  [B tau(k) / (draft(B) + T(B (k + 1)) + o_d)]  /  [B / (T(B) + o_p)])

It is the bound of uniform strategies (every row the same ``k``); a controller that drafts some rows only can do
somewhat better on a mixed batch, so a measured speedup a little above it is possible. Benchmarks print each
method's speedup as a share of this bound (`benchmarks/batch_decoding.py`).

Example: T = {1: 40, 4: 60, 8: 80, 16: 120} ms, draft(1) = 8 ms, tau = {3: 2.2, 7: 2.8}, no overheads: at B = 1,
k = 3 gives 2.2 / (8 + 60) = 0.0324 tokens/ms against 1 / 40 = 0.025 (1.29x), k = 7 gives 2.8 / 88 (1.27x):
the bound is 1.29x at k = 3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Bound:
    """The bound at one batch size and the node count that reaches it (0: plain decoding)."""

    batch: int
    speedup: float
    nodes: int


def physics_bound(batch: int, verify_ms: Callable[[int], float], draft_ms: float,
                  tau_by_nodes: Mapping[int, float], plain_overhead_ms: float = 0.0,
                  drafted_overhead_ms: float = 0.0) -> Bound:
    """See the module docstring. ``verify_ms(q)``: the target forward over ``q`` tokens; ``draft_ms``: a drafted
    round's draft, build and prune at this batch size; ``tau_by_nodes[k]``: tokens per round at ``k`` nodes."""
    plain_rate = batch / (verify_ms(batch) + plain_overhead_ms)
    best = Bound(batch, 1.0, 0)
    for k, tau in sorted(tau_by_nodes.items()):
        if k < 1:
            continue
        rate = batch * tau / (draft_ms + verify_ms(batch * (k + 1)) + drafted_overhead_ms)
        if rate / plain_rate > best.speedup:
            best = Bound(batch, rate / plain_rate, k)
    return best
