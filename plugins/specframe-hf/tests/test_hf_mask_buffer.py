"""The reusable tree-mask buffer gives exactly the masks (and logits) that fresh masks give."""

from __future__ import annotations

import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids, random_tree_parents
from specframe_hf.tree_mask import TreeMaskBuffer

from specframe.tree import DraftTree


def reference_mask(parents: list[int], past: int, dtype: torch.dtype, width: int | None = None) -> torch.Tensor:
    """Straight from the definition: every node sees its row's ``past`` slots, itself and its ancestors, whose
    entries sit after the ``width`` cache slots; ``[1, 1, N, width + N]``."""
    n, width = len(parents), past if width is None else width
    visible = torch.zeros(n, width + n, dtype=torch.bool)
    visible[:, :past] = True
    for i in range(n):
        j = i
        while j != -1:
            visible[i, width + j] = True
            j = parents[j]
    mask = torch.zeros(n, width + n, dtype=dtype)
    mask.masked_fill_(~visible, torch.finfo(dtype).min)
    return mask[None, None]


def build(buf: TreeMaskBuffer, tree: DraftTree, past: int) -> torch.Tensor:
    """One row whose length is the cache's width."""
    return buf.build(tree.ancestor_mask(), [past], past)


def test_worked_example_from_the_module_docstring():
    buf = TreeMaskBuffer(torch.float32, "cpu")
    tree = DraftTree.from_lists([7, 3, 5], [-1, 0, 0])
    mask = buf.build(tree.ancestor_mask().expand(2, -1, -1), [2, 1], 2)
    m = torch.finfo(torch.float32).min
    row0 = torch.tensor([[0, 0, 0, m, m], [0, 0, 0, 0, m], [0, 0, 0, m, 0]])
    row1 = torch.tensor([[0, m, 0, m, m], [0, m, 0, 0, m], [0, m, 0, m, 0]])
    assert torch.equal(mask[0, 0], row0) and torch.equal(mask[1, 0], row1)


def test_ragged_rounds_equal_fresh_masks():
    """Rows of different lengths that grow, join and leave: every round equals the definition, row by row."""
    buf = TreeMaskBuffer(torch.float32, "cpu", min_columns=16)
    gen = torch.Generator().manual_seed(1)
    lengths = [5, 2, 9]
    for r in range(30):
        if r == 10:
            lengths.append(1)  # a short request joins
        if r == 20:
            lengths = lengths[1:]  # the first row leaves
        n = int(torch.randint(1, 8, (1,), generator=gen))
        parents = random_tree_parents(n, seed=r)
        tree = DraftTree.from_lists(list(range(n)), parents)
        width = max(lengths)
        got = buf.build(tree.ancestor_mask().expand(len(lengths), -1, -1), lengths, width)
        for b, length in enumerate(lengths):
            assert torch.equal(got[b : b + 1], reference_mask(parents, length, torch.float32, width)), (r, b)
        lengths = [length + int(torch.randint(1, n + 1, (1,), generator=gen)) for length in lengths]


def test_reused_buffer_equals_fresh_masks_over_many_rounds():
    """Past grows by a random accepted length, trees change size, and the buffer grows once in a while."""
    reused = TreeMaskBuffer(torch.float32, "cpu", min_columns=32)
    gen = torch.Generator().manual_seed(0)
    past = 3
    for r in range(40):
        n = int(torch.randint(1, 20, (1,), generator=gen))
        parents = random_tree_parents(n, seed=r)
        tree = DraftTree.from_lists(list(range(n)), parents)
        got = build(reused, tree, past)
        assert torch.equal(got, reference_mask(parents, past, torch.float32)), f"round {r}"
        past += int(torch.randint(1, n + 1, (1,), generator=gen))
    assert reused.allocations < 6  # geometric growth, not one allocation per round


def test_buffer_is_not_reallocated_when_rounds_fit():
    buf = TreeMaskBuffer(torch.bfloat16, "cpu", min_columns=128)
    tree = DraftTree.from_lists(list(range(8)), random_tree_parents(8, seed=1))
    first = build(buf, tree, 10).data_ptr()
    for past in range(11, 100, 7):
        assert build(buf, tree, past).data_ptr() == first
    assert buf.allocations == 1


def test_reset_clears_tree_blocks_for_a_new_request():
    buf = TreeMaskBuffer(torch.float32, "cpu")
    parents = random_tree_parents(10, seed=2)
    tree = DraftTree.from_lists(list(range(10)), parents)
    build(buf, tree, 50)
    buf.reset()
    small = DraftTree.from_lists([0, 1], [-1, 0])
    assert torch.equal(build(buf, small, 55), reference_mask([-1, 0], 55, torch.float32))


def test_target_logits_with_reused_buffer_equal_logits_with_a_fresh_buffer(tiny_model):
    """Two targets run the same rounds; one gets a brand-new mask buffer before every forward."""
    model = tiny_model("qwen3", "eager")
    reused = HFTarget.from_model(model, engine="transformers")  # the mask buffer is that engine's
    fresh = HFTarget.from_model(model, engine="transformers")
    prompt = random_ids(9, seed=3)
    reused.prefill(torch.tensor([prompt]))
    fresh.prefill(torch.tensor([prompt]))
    gen = torch.Generator().manual_seed(4)
    for r in range(8):
        n = int(torch.randint(2, 10, (1,), generator=gen))
        tree = DraftTree.from_lists(random_ids(n, seed=10 + r), random_tree_parents(n, seed=20 + r))
        fresh.rows._mask = TreeMaskBuffer(fresh.dtype, fresh.device)  # a brand-new buffer for this round
        a = reused.forward_tree(tree).logits
        b = fresh.forward_tree(tree).logits
        assert torch.equal(a, b), f"round {r}"
        leaf = int(torch.randint(0, n, (1,), generator=gen))
        path = tree.path_to(0, leaf)
        accepted = torch.tensor([path + [-1] * (n - len(path))])
        reused.commit(tree, accepted)
        fresh.commit(tree, accepted)
    assert reused.rows.mask.allocations == 1


def test_reset_outside_inference_mode_after_a_tree_forward(tiny_model) -> None:  # type: ignore[no-untyped-def]
    target = HFTarget.from_model(tiny_model("qwen3"))
    target.prefill(torch.tensor([[1, 2, 3]]))
    target.forward_tree(DraftTree.from_lists([4, 5, 6], [-1, 0, 0]))
    target.reset()
    assert target.cache_len == 0
