"""Property tests of `DraftTree`: invariants, agreement of the derived views, and subtrees."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specframe.testing.strategies import ancestor_closed_masks, draft_trees, non_closed_masks
from specframe.tree import DraftTree, check_tree

SETTINGS = settings(max_examples=60, deadline=None)


def _children_lists(tree: DraftTree, b: int) -> list[list[int]]:
    """Children of each valid node, by scanning ``parent`` (independent of DraftTree's own views)."""
    n = int(tree.num_nodes[b])
    kids: list[list[int]] = [[] for _ in range(n)]
    for i in range(1, n):
        kids[int(tree.parent[b, i])].append(i)
    return kids


def _token_path(tree: DraftTree, b: int, node: int) -> tuple[int, ...]:
    return tuple(int(tree.tokens[b, j]) for j in tree.path_to(b, node))


@SETTINGS
@given(draft_trees())
def test_random_trees_satisfy_every_invariant(tree: DraftTree) -> None:
    assert check_tree(tree, monotone_scores=True) == []
    n = tree.num_nodes
    assert bool((tree.valid.sum(dim=1) == n).all())
    assert check_tree(tree, budget=int(n.max()) - 1) == []


@SETTINGS
@given(draft_trees())
def test_ancestor_mask_agrees_with_path_to_and_depth(tree: DraftTree) -> None:
    mask = tree.ancestor_mask()
    for b in range(tree.batch_size):
        n = int(tree.num_nodes[b])
        for i in range(tree.capacity):
            row = mask[b, i]
            if i >= n:
                assert not bool(row.any()), "padding nodes see nothing"
                continue
            expected = torch.zeros(tree.capacity, dtype=torch.bool)
            expected[tree.path_to(b, i)] = True
            assert torch.equal(row, expected)
            assert int(row.sum()) == int(tree.depth[b, i]) + 1


@SETTINGS
@given(draft_trees(), st.integers(0, 50))
def test_positions_are_base_plus_path_length(tree: DraftTree, base: int) -> None:
    pos = tree.positions(base)
    pos_t = tree.positions(torch.full((tree.batch_size,), base))
    assert torch.equal(pos, pos_t)
    for b in range(tree.batch_size):
        for i in range(int(tree.num_nodes[b])):
            assert int(pos[b, i]) == base + len(tree.path_to(b, i)) - 1


@SETTINGS
@given(draft_trees())
def test_first_child_next_sibling_agree_with_parents(tree: DraftTree) -> None:
    first, nxt = tree.first_child_next_sibling()
    views = tree.children()
    for b in range(tree.batch_size):
        kids = _children_lists(tree, b)
        assert views[b] == kids
        for i, expected in enumerate(kids):
            walked = []
            c = int(first[b, i])
            while c != -1:
                walked.append(c)
                c = int(nxt[b, c])
            assert walked == expected
        for i in range(int(tree.num_nodes[b]), tree.capacity):
            assert int(first[b, i]) == -1 and int(nxt[b, i]) == -1


@SETTINGS
@given(draft_trees())
def test_leaf_paths_are_the_paths_to_every_leaf(tree: DraftTree) -> None:
    paths = tree.leaf_paths()
    for b in range(tree.batch_size):
        kids = _children_lists(tree, b)
        leaves = [i for i, k in enumerate(kids) if not k]
        rows = [[x for x in row if x != -1] for row in paths[b].tolist()]
        rows = [r for r in rows if r]
        assert rows == [tree.path_to(b, leaf) for leaf in leaves]
        for row in paths[b].tolist():  # -1 only as trailing padding
            body = [x for x in row if x != -1]
            assert row[: len(body)] == body


@st.composite
def tree_and_closed_set(draw: st.DrawFn) -> tuple[DraftTree, torch.Tensor]:
    tree = draw(draft_trees())
    return tree, draw(ancestor_closed_masks(tree))


@SETTINGS
@given(tree_and_closed_set())
def test_subtree_of_an_ancestor_closed_set_is_valid_and_keeps_paths(case: tuple[DraftTree, torch.Tensor]) -> None:
    tree, keep = case
    sub = tree.subtree(keep)
    assert check_tree(sub, monotone_scores=True) == []
    assert torch.equal(sub.num_nodes, keep.sum(dim=1))
    for b in range(tree.batch_size):
        kept = [i for i in range(tree.capacity) if bool(keep[b, i])]
        assert len(kept) == int(sub.num_nodes[b])
        for new, old in enumerate(kept):  # order preserved: the k-th kept node becomes node k
            assert _token_path(sub, b, new) == _token_path(tree, b, old)
            assert int(sub.depth[b, new]) == int(tree.depth[b, old])
            assert float(sub.score[b, new]) == float(tree.score[b, old])
            assert float(sub.logq[b, new]) == float(tree.logq[b, old])


@st.composite
def tree_and_open_set(draw: st.DrawFn) -> tuple[DraftTree, torch.Tensor]:
    tree = draw(draft_trees(nodes=(3, 12)).filter(lambda t: bool((t.depth >= 2).any())))
    return tree, draw(non_closed_masks(tree))


@SETTINGS
@given(tree_and_open_set())
def test_subtree_rejects_a_set_that_drops_a_parent(case: tuple[DraftTree, torch.Tensor]) -> None:
    tree, keep = case
    with pytest.raises(ValueError, match="not ancestor-closed"):
        tree.subtree(keep)


@SETTINGS
@given(draft_trees())
def test_subtree_must_keep_the_root(tree: DraftTree) -> None:
    keep = tree.valid.clone()
    keep[0, 0] = False
    with pytest.raises(ValueError, match="root"):
        tree.subtree(keep)


def test_check_tree_reports_broken_trees() -> None:
    """The checker has power: each corruption of a valid tree is reported."""
    good = DraftTree.from_lists([7, 3, 5, 9], [-1, 0, 0, 1], logq=[0.0, -0.1, -0.2, -0.3])
    assert check_tree(good, monotone_scores=True) == []
    bad_parent = DraftTree.from_lists([7, 3, 5, 9], [-1, 0, 0, 1])
    bad_parent.parent[0, 3] = 3
    assert any("does not precede" in e for e in check_tree(bad_parent))
    dup = DraftTree.from_lists([7, 3, 3], [-1, 0, 0])
    assert any("repeats token" in e for e in check_tree(dup))
    rising = DraftTree.from_lists([7, 3], [-1, 0], score=[0.0, 0.5])
    assert any("above its parent" in e for e in check_tree(rising, monotone_scores=True))
    assert any("exceed the budget" in e for e in check_tree(good, budget=2))


def test_a_chain_is_assembled_in_one_step_with_its_dead_tail_as_padding() -> None:
    """`chain_tree` (the worked example of its docstring, then random chains with dead tails): each row's live prefix
    is the chain `DraftTree.from_lists` builds from the same lists, the rest padding; the tree is kept as it is
    when moved to the device it is on (so its visibility is computed once)."""
    from specframe.tree.assembly import chain_tree

    one = chain_tree(torch.tensor([5]), torch.tensor([[7, 9]]), torch.tensor([[-0.1, -0.2]]),
                     torch.tensor([[-0.1, -0.3]]), torch.tensor([[True, False]]))
    assert one.tokens.tolist() == [[5, 7, 0]] and one.parent.tolist() == [[-1, 0, -1]]
    assert one.depth.tolist() == [[0, 1, 0]] and one.valid.tolist() == [[True, True, False]]
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 50, (3, 5), generator=gen)
    logq = -torch.rand(3, 5, generator=gen)
    live = [5, 2, 0]
    alive = torch.tensor([[d < n for d in range(5)] for n in live])
    tree = chain_tree(torch.tensor([1, 2, 3]), tokens, logq, logq.cumsum(1), alive)
    for b, n in enumerate(live):
        want = DraftTree.from_lists([b + 1, *tokens[b, :n].tolist()], list(range(-1, n)),
                                    logq=[0.0, *logq[b, :n].tolist()])
        got = tree.row(b)
        for field in ("tokens", "parent", "depth", "valid"):
            assert torch.equal(getattr(got, field), getattr(want, field)), (b, field)
        assert torch.allclose(got.logq, want.logq)
        assert tree.parent[b, n + 1 :].eq(-1).all() and not tree.valid[b, n + 1 :].any()
    assert tree.to("cpu") is tree
