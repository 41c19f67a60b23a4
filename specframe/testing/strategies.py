"""Hypothesis strategies for specframe's data types: draft trees, node subsets and draft proposals.

Plugin authors use them to property-test their stages::

    from hypothesis import given
    from specframe.testing.strategies import draft_trees, proposals

    @given(proposals(depth=(1, 4), candidates=(1, 5)))
    def test_my_builder(proposal):
        assert check_tree(MyBuilder().build(proposal, IdentityCorrector(), ctx)) == []

Trees are drawn node by node (each node's parent is an earlier node, siblings get distinct tokens), so
every drawn tree is valid. Proposals are drawn from a seed with `torch.Generator` (fast, and tensors stay
small); their options produce score ties, masked (``-inf``) vocabulary entries and dead depths.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from specframe.tree import DraftTree
from specframe.types import DraftProposal

IntRange = tuple[int, int]

#: Log-probs with many exact ties and exact zeros (a float32 log-softmax that rounds to 0.0).
TIED_LOGQ = (0.0, -0.25, -0.5, -1.0, -2.0)


@st.composite
def draft_trees(
    draw: st.DrawFn,
    *,
    rows: IntRange = (1, 3),
    nodes: IntRange = (1, 12),
    vocab_size: int = 16,
    ties: bool | None = None,
) -> DraftTree:
    """A valid batch of trees; rows have different sizes, so shorter rows are padded.

    ``score`` is the cumulative sum of ``logq <= 0``, so path scores never increase along an edge.
    ``ties=True`` draws ``logq`` from :data:`TIED_LOGQ` (``None``: either).
    """
    if vocab_size < nodes[1]:
        raise ValueError("vocab_size must be at least the largest node count (siblings need distinct tokens)")
    use_ties = draw(st.booleans()) if ties is None else ties
    logq_strategy = (
        st.sampled_from(TIED_LOGQ) if use_ties
        else st.floats(min_value=-6.0, max_value=0.0, allow_nan=False, width=32)
    )
    trees = []
    for _ in range(draw(st.integers(*rows))):
        n = draw(st.integers(*nodes))
        tokens = [draw(st.integers(0, vocab_size - 1))]
        parents = [-1]
        logq = [0.0]
        used: dict[int, set[int]] = {}
        for i in range(1, n):
            p = draw(st.integers(0, i - 1))
            taken = used.setdefault(p, set())
            token = draw(st.sampled_from([t for t in range(vocab_size) if t not in taken]))
            taken.add(token)
            tokens.append(token)
            parents.append(p)
            logq.append(draw(logq_strategy))
        trees.append(DraftTree.from_lists(tokens, parents, logq=logq))
    return trees[0] if len(trees) == 1 else DraftTree.stack(trees)


@st.composite
def ancestor_closed_masks(draw: st.DrawFn, tree: DraftTree) -> torch.Tensor:  # [B, N] bool
    """A node set that contains the root and, with every node, its parent."""
    keep = torch.zeros_like(tree.valid)
    parent = tree.parent.tolist()
    for b in range(tree.batch_size):
        keep[b, 0] = True
        for i in range(1, int(tree.num_nodes[b])):
            if bool(keep[b, parent[b][i]]) and draw(st.booleans()):
                keep[b, i] = True
    return keep


@st.composite
def non_closed_masks(draw: st.DrawFn, tree: DraftTree) -> torch.Tensor:  # [B, N] bool
    """A node set that keeps some node of depth >= 2 but drops its parent (the tree must have one)."""
    candidates = [(b, i) for b in range(tree.batch_size) for i in range(int(tree.num_nodes[b]))
                  if int(tree.depth[b, i]) >= 2]
    if not candidates:
        raise ValueError("non_closed_masks needs a tree with a node at depth >= 2")
    b, i = draw(st.sampled_from(candidates))
    keep = draw(ancestor_closed_masks(tree))
    path = tree.path_to(b, i)  # root .. parent, i
    keep[b, path] = True
    keep[b, path[-2]] = False  # drop the parent only
    return keep


@st.composite
def proposals(
    draw: st.DrawFn,
    *,
    batch: IntRange = (1, 2),
    depth: IntRange = (1, 4),
    candidates: IntRange = (1, 5),
    extra_vocab: IntRange = (0, 6),
    hidden_size: int = 8,
    ties: bool | None = None,
    masked: bool | None = None,
    dead_depth: bool | None = None,
) -> DraftProposal:
    """A proposal with sorted top-K candidates of random full-vocabulary logits, plus features.

    Args:
        batch, depth, candidates: ranges of B, L and K.
        extra_vocab: the vocabulary has ``K + extra`` tokens.
        hidden_size: width H of ``features``.
        ties: round logits to integers, so many candidates tie (``None``: either).
        masked: set random vocabulary entries to ``-inf`` (``None``: either).
        dead_depth: make every candidate of the last depths ``-inf`` (``None``: either).
    """
    b = draw(st.integers(*batch))
    length = draw(st.integers(*depth))
    k = draw(st.integers(*candidates))
    v = k + draw(st.integers(*extra_vocab))
    use_ties = draw(st.booleans()) if ties is None else ties
    use_mask = draw(st.booleans()) if masked is None else masked
    use_dead = draw(st.booleans()) if dead_depth is None else dead_depth
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    logits = torch.randn(b, length, v, generator=g) * 2.0  # [B, L, V]
    if use_ties:
        logits = logits.round()
    if use_mask:
        logits = logits.masked_fill(torch.rand(b, length, v, generator=g) < 0.3, -math.inf)
    if use_dead:
        first_dead = draw(st.integers(0, length - 1))
        logits[:, first_dead:] = -math.inf
    lse = torch.logsumexp(logits, dim=-1, keepdim=True)
    logprobs = torch.where(torch.isfinite(lse), logits - lse, torch.full_like(logits, -math.inf))
    values, order = torch.sort(logprobs, dim=-1, descending=True, stable=True)
    return DraftProposal(
        root=torch.randint(v, (b,), generator=g),
        tokens=order[..., :k].contiguous(),
        logprobs=values[..., :k].contiguous(),
        logits=logits,
        features=torch.randn(b, length, hidden_size, generator=g),
    )
