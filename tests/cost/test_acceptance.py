"""The acceptance estimator converges to a known acceptance law and never lets p rise along an edge."""

from __future__ import annotations

import math

import torch

from specframe.cost.acceptance import AcceptanceEstimator
from specframe.tree import DraftTree


def true_law(depth: int, prob: float) -> float:
    """Synthetic truth: the drafter is over-confident, and more so deeper in the tree."""
    return prob * (0.7 ** depth)


def synthetic_round(gen: torch.Generator) -> tuple[DraftTree, torch.Tensor]:
    """A random chain of 6 nodes with random path scores; acceptance drawn from ``true_law`` along the path."""
    n = 6
    logq = [0.0] + [math.log(float(torch.rand((), generator=gen)) * 0.9 + 0.1) for _ in range(n - 1)]
    tree = DraftTree.from_lists(list(range(n)), [-1, *range(n - 1)], logq=logq)
    path = [0]
    for i in range(1, n):
        # P(path to i accepted | path to i - 1 accepted) = law(i) / law(i - 1), so the path law is exactly law(i)
        prev = 1.0 if i == 1 else true_law(i - 1, math.exp(float(tree.score[0, i - 1])))
        now = true_law(i, math.exp(float(tree.score[0, i])))
        if float(torch.rand((), generator=gen)) < now / prev:
            path.append(i)
        else:
            break
    accepted = torch.full((n,), -1, dtype=torch.long)
    accepted[: len(path)] = torch.tensor(path)
    return tree, accepted


def test_estimates_converge_to_the_known_acceptance_law() -> None:
    est = AcceptanceEstimator(bins=10, max_depth=8, decay=1.0)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20000):
        tree, accepted = synthetic_round(gen)
        est.observe(tree, accepted[None])
    cells = est.cell_estimates()
    checked = 0
    for depth in (1, 2, 3):
        for j in range(10):
            if est.seen[depth - 1, j] < 400:
                continue
            # The cell holds scores in [j/10, (j+1)/10); its empirical law is the truth at the mean score.
            expected = true_law(depth, (j + 0.5) / 10)
            assert abs(float(cells[depth - 1, j]) - expected) < 0.05 * 0.7 ** depth + 0.02, (depth, j)
            checked += 1
    assert checked >= 8


def test_prior_only_before_observations_and_capped_by_parent() -> None:
    est = AcceptanceEstimator(bins=4, prior_scale=1.0)
    # a child whose own score bin is higher than its parent's estimate cannot exceed it
    tree = DraftTree.from_lists([1, 2, 3], [-1, 0, 1], score=[0.0, math.log(0.3), math.log(0.9)])
    p = est.estimate(tree)[0]
    assert p[0] == 1.0
    assert abs(float(p[1]) - 0.375) < 1e-9  # bin [0.25, 0.5): centre 0.375, no observations yet
    assert float(p[2]) == float(p[1])  # its own bin [0.75, 1) would say 0.875: capped by the parent


def test_a_drafter_that_is_never_accepted_drives_estimates_down() -> None:
    est = AcceptanceEstimator(bins=5, decay=1.0)
    tree = DraftTree.from_lists([1, 2, 3], [-1, 0, 0], logq=[0.0, -0.05, -0.1])
    rejected = torch.tensor([[0, -1, -1]])
    before = est.estimate(tree)[0, 1:].max()
    for _ in range(200):
        est.observe(tree, rejected)
    after = est.estimate(tree)[0, 1:].max()
    assert after < 0.05 < before


def test_rank_keys_ignore_the_drawn_tokens_scores() -> None:
    """Under key "rank" two trees of the same shape get the same estimates whatever their scores: which nodes a
    sampled tree keeps cannot depend on the tokens that were drawn (the rejection verifiers' proof)."""
    est = AcceptanceEstimator(key="rank", bins=4)
    shape = [-1, 0, 0, 1, 1, 2]
    likely = DraftTree.from_lists([1, 2, 3, 4, 5, 6], shape, logq=[0.0, -0.01, -0.02, -0.01, -0.03, -0.01])
    unlikely = DraftTree.from_lists([1, 7, 8, 9, 10, 11], shape, logq=[0.0, -3.0, -0.5, -4.0, -0.1, -2.0])
    assert torch.equal(est.estimate(likely), est.estimate(unlikely))
    est.observe(likely, torch.tensor([[0, 1, 3]]))
    assert torch.equal(est.estimate(likely), est.estimate(unlikely))
    score_keyed = AcceptanceEstimator(key="score", bins=4)
    assert not torch.equal(score_keyed.estimate(likely), score_keyed.estimate(unlikely))


def test_estimates_and_updates_stay_on_the_device_for_all_rows() -> None:
    from specframe.device_sync import HostSyncCounter

    est = AcceptanceEstimator()
    trees = DraftTree.stack([DraftTree.from_lists([1, 2, 3], [-1, 0, 1], logq=[0.0, -0.2, -0.3]),
                             DraftTree.from_lists([4, 5], [-1, 0], logq=[0.0, -1.0])])
    est.estimate(trees)  # moves the tables once
    with HostSyncCounter() as counter:
        p = est.estimate(trees)
        est.observe(trees, torch.tensor([[0, 1, -1], [0, -1, -1]]))
    assert counter.total == 0, counter.by_op
    assert p.shape == (2, 3) and float(p[1, 2]) == 0.0  # padding


def test_state_round_trips_and_refuses_what_does_not_fit() -> None:
    est = AcceptanceEstimator(bins=3, max_depth=2)
    est.observe(DraftTree.from_lists([1, 2], [-1, 0], logq=[0.0, -0.1]), torch.tensor([[0, 1]]))
    other = AcceptanceEstimator(bins=3, max_depth=2)
    assert other.load_state(est.state()) and torch.equal(other.seen, est.seen)
    assert not other.load_state({"seen": [[1.0]], "accepted": [[0.0]]})  # another shape
    bad = est.state()
    bad["accepted"][0][0] = 99.0  # more accepted than seen
    assert not other.load_state(bad)
    assert not other.load_state({"seen": "x"})
