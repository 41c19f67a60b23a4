"""`HFRows`: per-row lengths, positions, masks and compaction, checked against plain causal forwards."""

from __future__ import annotations

import pytest
import torch
from specframe_hf.target import HFTarget
from specframe_hf.testing import causal_hidden, causal_logits, random_ids, random_tree_parents, tiny_causal_lm

from specframe.errors import GenerationError
from specframe.tree import DraftTree

ATOL = 1e-4


@pytest.fixture(scope="module", params=["sdpa", "eager"])
def model(request):  # type: ignore[no-untyped-def]
    return tiny_causal_lm("llama", attn=request.param, seed=3)


def test_worked_example_of_the_module_docstring(model) -> None:  # type: ignore[no-untyped-def]
    rows = HFTarget.from_model(model).ragged_batch()
    rows.add_row(torch.tensor([[5, 6, 7]]))
    rows.add_row(torch.tensor([[9]]))
    assert rows.lengths == [3, 1]
    trees = [DraftTree.from_lists([11, 12], [-1, 0]), DraftTree.from_lists([13], [-1])]
    stacked = DraftTree.stack(trees)  # row 1 padded with one invalid node
    out = rows.forward_tree(stacked)
    assert torch.allclose(out.logits[0, :2], causal_logits(model, [5, 6, 7, 11, 12])[-2:], atol=ATOL)
    assert torch.allclose(out.logits[1, 0], causal_logits(model, [9, 13])[-1], atol=ATOL)
    rows.commit(stacked, torch.tensor([[0, 1], [0, -1]]))
    assert rows.lengths == [5, 2]
    after = rows.forward_tree(DraftTree.stack([DraftTree.from_lists([1], [-1]), DraftTree.from_lists([2], [-1])]))
    assert torch.allclose(after.logits[0, 0], causal_logits(model, [5, 6, 7, 11, 12, 1])[-1], atol=ATOL)
    assert torch.allclose(after.logits[1, 0], causal_logits(model, [9, 13, 2])[-1], atol=ATOL)


def test_random_ragged_rounds_with_rows_joining_and_leaving(model) -> None:  # type: ignore[no-untyped-def]
    """Random trees per row, random accepted paths (entries must move), rows joining longer and leaving."""
    rows = HFTarget.from_model(model).ragged_batch(taps=(0,))
    gen = torch.Generator().manual_seed(0)
    seqs = [random_ids(4, seed=1), random_ids(9, seed=2)]
    for s in seqs:
        rows.add_row(torch.tensor([s]))
    for r in range(6):
        if r == 2:  # a longer request joins (the cache widens), then the first row leaves
            seqs.append(random_ids(17, seed=3))
            out = rows.add_row(torch.tensor([seqs[-1]]))
            assert torch.allclose(out.hidden[0], causal_hidden(model, seqs[-1], (0,)), atol=ATOL)
        if r == 4:
            rows.keep_rows([2, 1])
            seqs = [seqs[2], seqs[1]]
        trees, paths = [], []
        for b in range(len(seqs)):
            n = int(torch.randint(1, 9, (1,), generator=gen))
            tokens = [int(torch.randint(0, 512, (1,), generator=gen)) for _ in range(n)]
            tree = DraftTree.from_lists(tokens, random_tree_parents(n, seed=100 * r + b))
            trees.append(tree)
            node = int(torch.randint(0, n, (1,), generator=gen))
            paths.append(tree.path_to(0, node))
        stacked = DraftTree.stack(trees)
        out = rows.forward_tree(stacked)
        for b, tree in enumerate(trees):
            for i in range(tree.capacity):
                path_tokens = [int(tree.tokens[0, j]) for j in tree.path_to(0, i)]
                want = causal_logits(model, seqs[b] + path_tokens)[-1]
                assert torch.allclose(out.logits[b, i], want, atol=ATOL), (r, b, i)
            assert out.hidden is not None and out.hidden.shape[:2] == stacked.tokens.shape
        accepted = torch.full((len(seqs), max(len(p) for p in paths)), -1, dtype=torch.long)
        for b, p in enumerate(paths):
            accepted[b, : len(p)] = torch.tensor(p)
        rows.commit(stacked, accepted)
        seqs = [s + [int(trees[b].tokens[0, j]) for j in paths[b]] for b, s in enumerate(seqs)]
        assert rows.lengths == [len(s) for s in seqs]


def test_misuse_is_an_error(model) -> None:  # type: ignore[no-untyped-def]
    rows = HFTarget.from_model(model).ragged_batch()
    with pytest.raises(GenerationError, match=r"\[R, P\]"):
        rows.add_row(torch.tensor([1, 2]))
    rows.add_row(torch.tensor([[1, 2]]))
    with pytest.raises(GenerationError, match="2 rows but the cache holds 1"):
        rows.forward_tree(DraftTree.stack([DraftTree.from_lists([1], [-1])] * 2))
    with pytest.raises(GenerationError, match="without a pending forward_tree"):
        rows.commit(DraftTree.from_lists([1], [-1]), torch.tensor([[0]]))
