"""The reusable tree-mask buffer gives exactly the masks (and logits) that fresh masks give."""

from __future__ import annotations

import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import random_ids, random_tree_parents
from specframe_hf.tree_mask import TreeMaskBuffer

from specframe.tree import DraftTree


def reference_mask(parents: list[int], past: int, dtype: torch.dtype) -> torch.Tensor:  # [1, 1, N, past + N]
    """Straight from the definition: every node sees the past, itself and its ancestors."""
    n = len(parents)
    visible = torch.zeros(n, past + n, dtype=torch.bool)
    visible[:, :past] = True
    for i in range(n):
        j = i
        while j != -1:
            visible[i, past + j] = True
            j = parents[j]
    mask = torch.zeros(n, past + n, dtype=dtype)
    mask.masked_fill_(~visible, torch.finfo(dtype).min)
    return mask[None, None]


def test_worked_example_from_the_module_docstring():
    buf = TreeMaskBuffer(torch.float32, "cpu")
    tree = DraftTree.from_lists([7, 3, 5], [-1, 0, 0])
    mask = buf.build(tree.ancestor_mask(), past=2)[0, 0]
    m = torch.finfo(torch.float32).min
    expected = torch.tensor([[0, 0, 0, m, m], [0, 0, 0, 0, m], [0, 0, 0, m, 0]])
    assert torch.equal(mask, expected)


def test_reused_buffer_equals_fresh_masks_over_many_rounds():
    """Past grows by a random accepted length, trees change size, and the buffer grows once in a while."""
    reused = TreeMaskBuffer(torch.float32, "cpu", min_columns=32)
    gen = torch.Generator().manual_seed(0)
    past = 3
    for r in range(40):
        n = int(torch.randint(1, 20, (1,), generator=gen))
        parents = random_tree_parents(n, seed=r)
        tree = DraftTree.from_lists(list(range(n)), parents)
        got = reused.build(tree.ancestor_mask(), past)
        assert torch.equal(got, reference_mask(parents, past, torch.float32)), f"round {r}"
        past += int(torch.randint(1, n + 1, (1,), generator=gen))
    assert reused.allocations < 6  # geometric growth, not one allocation per round


def test_buffer_is_not_reallocated_when_rounds_fit():
    buf = TreeMaskBuffer(torch.bfloat16, "cpu", min_columns=128)
    tree = DraftTree.from_lists(list(range(8)), random_tree_parents(8, seed=1))
    first = buf.build(tree.ancestor_mask(), 10).data_ptr()
    for past in range(11, 100, 7):
        assert buf.build(tree.ancestor_mask(), past).data_ptr() == first
    assert buf.allocations == 1


def test_reset_clears_tree_blocks_for_a_new_request():
    buf = TreeMaskBuffer(torch.float32, "cpu")
    parents = random_tree_parents(10, seed=2)
    tree = DraftTree.from_lists(list(range(10)), parents)
    buf.build(tree.ancestor_mask(), 50)
    buf.reset()
    small = DraftTree.from_lists([0, 1], [-1, 0])
    assert torch.equal(buf.build(small.ancestor_mask(), 55), reference_mask([-1, 0], 55, torch.float32))


def test_target_logits_with_reused_buffer_equal_logits_with_a_fresh_buffer(tiny_model):
    """Two targets run the same rounds; one gets a brand-new mask buffer before every forward."""
    model = tiny_model("qwen3", "eager")
    reused, fresh = HFTarget.from_model(model), HFTarget.from_model(model)
    prompt = random_ids(9, seed=3)
    reused.prefill(torch.tensor([prompt]))
    fresh.prefill(torch.tensor([prompt]))
    gen = torch.Generator().manual_seed(4)
    for r in range(8):
        n = int(torch.randint(2, 10, (1,), generator=gen))
        tree = DraftTree.from_lists(random_ids(n, seed=10 + r), random_tree_parents(n, seed=20 + r))
        fresh._mask = TreeMaskBuffer(fresh.dtype, fresh.device)
        a = reused.forward_tree(tree).logits
        b = fresh.forward_tree(tree).logits
        assert torch.equal(a, b), f"round {r}"
        leaf = int(torch.randint(0, n, (1,), generator=gen))
        path = tree.path_to(0, leaf)
        accepted = torch.tensor([path + [-1] * (n - len(path))])
        reused.commit(tree, accepted)
        fresh.commit(tree, accepted)
    assert reused._mask.allocations == 1


def test_reset_outside_inference_mode_after_a_tree_forward(tiny_model) -> None:  # type: ignore[no-untyped-def]
    target = HFTarget.from_model(tiny_model("qwen3"))
    target.prefill(torch.tensor([[1, 2, 3]]))
    target.forward_tree(DraftTree.from_lists([4, 5, 6], [-1, 0, 0]))
    target.reset()
    assert target.cache_len == 0
