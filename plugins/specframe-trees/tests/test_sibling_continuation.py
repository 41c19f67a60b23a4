"""Sibling-conditional acceptance end to end: a DDTree over a drafter whose marginals follow its own top choice.

``ToyDrafter`` proposes depth ``d + 1`` from its own argmax at depth ``d`` (DFlash-like marginals that do not
condition on the path). When the target accepts a sibling (rank ≥ 1) at depth ``d``, the drafter's depth-``d + 1``
candidates were meant for another prefix, so the next depth is accepted less often than after a rank-0 node: the
gap the vLLM DDTree report measured and a correction head is meant to close. The records must show it, with counts
that agree with the rounds' accepted lengths.
"""

from __future__ import annotations

from specframe import PluginHost
from specframe.metrics.siblings import SiblingTable, count_rows
from specframe.pipeline import Pipeline
from specframe.testing.toy import ToyTarget
from specframe.testing.toy_host import toy_drafter_host


def host(target: ToyTarget) -> PluginHost:
    return toy_drafter_host(target, depth=5, num_candidates=4, distance=1.0)


def run(builder: dict[str, object], budget: int) -> SiblingTable:
    target = ToyTarget.random(vocab_size=12, seed=4)
    data = {"drafter": {"type": "toy"}, "corrector": {"type": "identity"}, "tree_builder": builder,
            "pruner": {"type": "none"}, "verifier": {"type": "greedy"}, "budget": budget,
            "sampling": {"temperature": 0.0}, "generation": {"stop_at_eos": False}}
    pipe = Pipeline.from_dict(data, target=target, host=host(target))
    rows = []
    for prompt in ([1, 2], [3, 4, 5], [6], [7, 8, 9], [10, 11], [0, 5, 7]):
        result = pipe.generate(prompt, 60)
        for rec in result.rounds:
            assert len(rec.path_ranks) >= rec.accepted  # the verdict, before any length trimming
            assert rec.accepted == 0 or builder["type"] != "chain" or set(rec.path_ranks) == {0}
        rows.append(count_rows(result.rounds))
        continued = sum(row[2] for row in rows[-1])
        assert continued == sum(max(len(r.path_ranks) - 1, 0) for r in result.rounds)
    return SiblingTable.from_rows(rows)


def test_a_tree_over_path_blind_marginals_continues_less_after_a_sibling() -> None:
    table = run({"type": "heap"}, budget=16)
    top, n_top = table.pooled(0)
    sib, n_sib = table.pooled(1)
    assert n_top >= 50 and n_sib >= 10, table.counts
    assert sib < top - 0.2, (top, sib, table.counts)


def test_a_chain_accepts_rank_zero_nodes_only() -> None:
    table = run({"type": "chain"}, budget=5)
    assert table.ranks == [0] and table.pooled(0)[1] > 0
