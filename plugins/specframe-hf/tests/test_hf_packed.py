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


def reference_slot_mask(parents: list[list[int]], lengths: list[int], width: int) -> torch.Tensor:
    """Straight from the definition: node i of row b sees the row's committed slots [0, lengths[b]) and its own
    ancestors-or-self, which sit at slots lengths[b] + j; everything else is hidden."""
    m = torch.finfo(torch.float32).min
    rows = []
    for par, length in zip(parents, lengths, strict=True):
        n = len(par)
        mask = torch.full((n, width), m)
        mask[:, :length] = 0.0
        for i in range(n):
            j = i
            while j != -1:
                mask[i, length + j] = 0.0
                j = par[j]
        rows.append(mask)
    return torch.stack(rows)[:, None]


def test_each_rows_mask_follows_the_definition_and_is_sized_to_the_row() -> None:
    """One mask per row and round, built from the parent indices, ``[G * N, lengths[b] + N]``: the row's own width
    (not the longest row's, nor the cache's capacity), its query rows repeated per group of query heads."""
    from specframe_hf.paged_attention import tree_mask

    parents = [[-1, 0, 0], [-1, 0, 1]]
    trees = DraftTree.stack([DraftTree.from_lists([1, 2, 3], p) for p in parents])
    lengths = [2, 5]
    dense = reference_slot_mask(parents, lengths, max(lengths) + 3)
    visible = trees.visibility()
    for b, length in enumerate(lengths):
        got = tree_mask(visible[b], length, 2, torch.float32)
        assert got.shape == (2 * 3, length + 3)
        own = dense[b, 0, :, : length + 3]  # the definition, cut to the row's own slots
        assert torch.equal(got, torch.cat([own, own]))


def test_rounds_never_allocate_a_mask_of_the_capacity(tiny_model, monkeypatch) -> None:
    """The lean path's masks follow each row's length: a row reserved for 400 positions with 10 committed attends
    over 10 + N slots."""
    import specframe_hf.slot_rows as slot_rows

    target = HFTarget.from_model(tiny_model("llama"))
    rows = target.ragged_batch()
    rows.add_row(torch.tensor([random_ids(6, seed=50)]), capacity=400)
    rows.add_row(torch.tensor([random_ids(10, seed=51)]), capacity=400)
    seen: list[tuple[int, ...]] = []
    original = slot_rows.tree_mask

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.append(tuple(out.shape))
        return out

    monkeypatch.setattr(slot_rows, "tree_mask", spy)
    rows.forward_tree(DraftTree.stack([DraftTree.from_lists([1, 2, 3], [-1, 0, 1])] * 2))
    groups = rows.decoder.groups
    assert seen == [(groups * 3, 9), (groups * 3, 13)] and rows.cache.capacity >= 400


def test_the_compiled_forward_captures_and_decodes_exactly(tiny_model) -> None:
    """``compile: true`` wraps the lean forward in torch.compile (dynamic shapes). Graph capture is checked here
    with dynamo's eager backend (inductor's code generation takes minutes on these CPUs; the benchmark
    `benchmarks/loop_overhead.py --compile` measures it): trees of several sizes, rows joining and a plain step all
    run through the captured forward and score every node as the eager forward does."""
    from specframe_hf.decoder import DecoderForward

    model = tiny_model("qwen3")
    decoder = DecoderForward(model)
    decoder.forward = torch.compile(decoder.forward, dynamic=True, backend="eager")  # type: ignore[method-assign]
    eager = HFTarget.from_model(model).ragged_batch()
    compiled = HFTarget.from_model(model).ragged_batch()
    compiled.decoder = decoder
    for rows in (eager, compiled):
        rows.add_row(torch.tensor([random_ids(7, seed=60)]))
        rows.add_row(torch.tensor([random_ids(5, seed=61)]))
    for n in (1, 4):
        tree = DraftTree.stack([DraftTree.from_lists(random_ids(n, seed=70 + n), [-1] + list(range(n - 1)))] * 2)
        a, b = eager.forward_tree(tree).logits, compiled.forward_tree(tree).logits
        assert torch.allclose(a, b, atol=ATOL)
        for rows in (eager, compiled):
            rows.commit(tree, None, [[0], [0]])
