"""Selective batching: a round whose rows hold trees of different sizes runs its token-wise work on the real
positions only, and scores every real node exactly as the padded batch does."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from specframe_hf.slot_rows import packing
from specframe_hf.target import HFTarget
from specframe_hf.testing import causal_logits, random_ids

from specframe.tree import DraftTree

ATOL = 1e-4


def test_packing_indices_and_when_it_pays() -> None:
    assert packing((3, 1, 1), 3, torch.device("cpu")).tolist() == [0, 1, 2, 3, 6]
    assert packing((3, 3, 2), 3, torch.device("cpu")) is None  # 8 of 9 positions: not worth it
    assert packing(None, 3, torch.device("cpu")) is None and packing((3,), 3, torch.device("cpu")) is None


@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_packed_round_scores_every_node_like_the_padded_batch_and_the_causal_forward(tiny_model, family) -> None:
    model = tiny_model(family)
    prompts = [random_ids(6 + 2 * b, seed=30 + b) for b in range(3)]
    trees = [DraftTree.from_lists(random_ids(5, seed=40), [-1, 0, 0, 1, 3]),
             DraftTree.root_only(torch.tensor([7])), DraftTree.root_only(torch.tensor([9]))]
    batch = DraftTree.stack(trees)  # [3, 5]: rows 1 and 2 are padding after their root
    outs = []
    for row_nodes in (None, (5, 1, 1)):
        target = HFTarget.from_model(model)
        rows = target.ragged_batch(taps=(0, 1))
        for p in prompts:
            rows.add_row(torch.tensor([p]))
        outs.append(rows.forward_tree(replace(batch, row_nodes=row_nodes)))
    dense, packed = (o.logits for o in outs)
    dense_taps, packed_taps = (o.hidden for o in outs)
    for b, tree in enumerate(trees):
        for node in range(tree.capacity):
            assert torch.allclose(packed[b, node], dense[b, node], atol=ATOL), (b, node)
            assert torch.allclose(packed_taps[b, node], dense_taps[b, node], atol=ATOL), (b, node)
            toks = tree.tokens[0].tolist()
            ref = causal_logits(model, prompts[b] + [toks[j] for j in tree.path_to(0, node)])[-1]
            assert torch.allclose(packed[b, node], ref, atol=ATOL), (b, node)
