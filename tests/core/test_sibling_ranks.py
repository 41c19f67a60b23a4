"""Sibling ranks along the accepted path (:mod:`specframe.tree.siblings`): the worked example, a brute-force oracle
on random padded batches, and the round's outcome carrying them inside its one device-to-host transfer."""

from __future__ import annotations

import pytest
import torch

from specframe.decode.rounds import RoundOutcome
from specframe.device_sync import HostSyncCounter
from specframe.tree import DraftTree
from specframe.tree.siblings import path_sibling_ranks
from specframe.types import VerifyResult

#: The module docstring's example: root -> a, b; a -> c; b -> d, e.
EXAMPLE = DraftTree.from_lists([9, 1, 2, 3, 4, 5], [-1, 0, 0, 1, 2, 2], logq=[0.0, -0.2, -1.5, -0.1, -0.9, -0.3])


def test_worked_example() -> None:
    rank, has_child = path_sibling_ranks(EXAMPLE, torch.tensor([[0, 2, 4]]))
    assert rank.tolist() == [[0, 1, 1]] and has_child.tolist() == [[True, True, False]]
    rank, has_child = path_sibling_ranks(EXAMPLE, torch.tensor([[0, 1, 3, -1]]))
    assert rank[0, :3].tolist() == [0, 0, 0] and has_child[0, :3].tolist() == [True, True, False]


def oracle(parents: list[int], logq: list[float], node: int) -> tuple[int, bool]:
    """Rank by sorting the siblings (log-prob descending, index ascending); children by scanning."""
    siblings = [j for j in range(len(parents)) if parents[j] == parents[node]]
    order = sorted(siblings, key=lambda j: (-logq[j], j))
    return order.index(node), any(p == node for p in parents)


@pytest.mark.parametrize("seed", range(8))
def test_ranks_match_sorting_the_siblings_on_random_padded_batches(seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    rows, meta = [], []
    for _ in range(3):
        n = int(torch.randint(2, 14, (1,), generator=gen))
        parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
        # Coarse log-probs so that ties occur and the index breaks them.
        logq = [0.0] + [-float(torch.randint(0, 3, (1,), generator=gen)) for _ in range(1, n)]
        rows.append(DraftTree.from_lists(list(range(n)), parents, logq=logq))
        meta.append((parents, logq))
    tree = DraftTree.stack(rows)  # padded rows: padding is never anyone's sibling or child
    paths = torch.full((3, tree.capacity), -1, dtype=torch.long)
    for b, (parents, _) in enumerate(meta):
        leaf = len(parents) - 1 - int(torch.randint(0, len(parents), (1,), generator=gen))
        chain = []
        while leaf >= 0:
            chain.append(leaf)
            leaf = parents[leaf]
        paths[b, : len(chain)] = torch.tensor(chain[::-1])
    rank, has_child = path_sibling_ranks(tree, paths)
    for b, (parents, logq) in enumerate(meta):
        for k, node in enumerate(paths[b].tolist()):
            if node >= 0:
                assert (int(rank[b, k]), bool(has_child[b, k])) == oracle(parents, logq, node), (b, node)


def test_the_outcome_carries_ranks_in_the_rounds_one_read() -> None:
    result = VerifyResult(accepted_nodes=torch.tensor([[0, 2, 4]]), num_accepted=torch.tensor([2]),
                          bonus_token=torch.tensor([7]))
    with HostSyncCounter() as counter:
        outcome = RoundOutcome.read(EXAMPLE, result)
    assert counter.total == 1, counter.by_op
    assert outcome.ranks == [[1, 1]] and outcome.end_has_children == [False]
    stopped = VerifyResult(accepted_nodes=torch.tensor([[0, 2, -1]]), num_accepted=torch.tensor([1]),
                           bonus_token=torch.tensor([7]))
    outcome = RoundOutcome.read(EXAMPLE, stopped)
    assert outcome.ranks == [[1]] and outcome.end_has_children == [True]  # b's children were both rejected
