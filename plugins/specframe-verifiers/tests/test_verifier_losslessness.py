"""Distributional losslessness of every verifier in its declared regime, with negative controls.

Each test runs one toy round over ``ROWS = 20000`` batch rows (independent repetitions sharing one generator
per stream, fixed seeds, so the test is deterministic) and compares the joint law of the **first two emitted
tokens** with the exact law from the toy target's tables, by a G-test. A real verifier must give
``p >= 1e-6``; every negative control must give ``p < 1e-6`` at the same sample size, which shows the test has
the power to catch that mistake.

When a round emits only its bonus token, the second token is drawn from the exact target conditional
``p(. | root, bonus)`` with a separate generator (see ``first_two_tokens``): that is what the next round emits
if the pipeline is lossless, and it keeps the second-token check meaningful for every row.

Settings: temperature 1 (no filtering) and temperature 0.7 with top-p 0.9. Regimes: a fixed deterministic
tree (``walk``), sampled chains (``chain_rejection``, ``walk``) and sampled trees with branching ``[3, 2]``
(``tree_rejection``, ``walk``).

Negative controls (small variants defined below):

* ``always_accept``: accepts every draft (walk: always follows the first child);
* ``ignore_q``: accepts with probability ``p`` alone, as if ``q(x) = 1``;
* ``off_by_one_parent``: reads each node's decision from its parent's logits;
* ``skip_residual``: after a rejection draws from ``p`` instead of the residual;
* ``keep_tried`` (tree, temperature 1): does not remove rejected siblings from ``q``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from specframe_verifiers import ChainRejectionVerifier, TreeRejectionVerifier, WalkVerifier
from verifier_scenarios import SETTINGS, Round, deterministic_round, sampled_round

from specframe.interfaces import RoundContext, Verifier
from specframe.tree import DraftTree
from specframe.types import VerifyResult

ALPHA = 1e-6


# ------------------------------------------------------------------------------------ negative controls
class OffByOneParent(Verifier):
    """Runs a verifier on logits shifted to each node's parent (the root keeps its own)."""

    def __init__(self, inner: Verifier) -> None:
        self.inner = inner

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        index = tree.parent.clamp(min=0)[:, :, None].expand_as(logits)
        return self.inner.verify(tree, torch.gather(logits, 1, index), ctx)


class WalkAlwaysAccept(WalkVerifier):
    def matches(self, tree: DraftTree, y: torch.Tensor) -> torch.Tensor:  # [B, N] bool
        return tree.valid & (tree.sibling_rank() == 0)  # the first child, whatever the target drew


def always_accept(base: type[Verifier]) -> Verifier:
    class AlwaysAccept(base):  # type: ignore[valid-type, misc]
        def accepts(self, u: torch.Tensor, p_tok: torch.Tensor, q_tok: torch.Tensor) -> torch.Tensor:
            return torch.ones_like(u, dtype=torch.bool)

    return AlwaysAccept()


def ignore_q(base: type[Verifier]) -> Verifier:
    class IgnoreQ(base):  # type: ignore[valid-type, misc]
        def accepts(self, u: torch.Tensor, p_tok: torch.Tensor, q_tok: torch.Tensor) -> torch.Tensor:
            return u < p_tok

    return IgnoreQ()


def skip_residual(base: type[Verifier]) -> Verifier:
    class SkipResidual(base):  # type: ignore[valid-type, misc]
        def residual(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
            return p

    return SkipResidual()


class KeepTried(TreeRejectionVerifier):
    def drop_tried(self, q: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
        return q


RoundFactory = Callable[[str], Round]
CASES: dict[str, tuple[RoundFactory, Callable[[], Verifier]]] = {
    "walk-deterministic": (deterministic_round, WalkVerifier),
    "walk-sampled_chain": (lambda s: sampled_round(s, (1, 1)), WalkVerifier),
    "walk-sampled_tree": (lambda s: sampled_round(s, (3, 2)), WalkVerifier),
    "chain_rejection": (lambda s: sampled_round(s, (1, 1)), ChainRejectionVerifier),
    "tree_rejection": (lambda s: sampled_round(s, (3, 2)), TreeRejectionVerifier),
}
CONTROLS: dict[str, tuple[str, Callable[[], Verifier], tuple[str, ...]]] = {
    "walk-always_accept": ("walk-deterministic", WalkAlwaysAccept, tuple(SETTINGS)),
    "walk-off_by_one_parent": ("walk-deterministic", lambda: OffByOneParent(WalkVerifier()), tuple(SETTINGS)),
    "walk_sampled-always_accept": ("walk-sampled_tree", WalkAlwaysAccept, tuple(SETTINGS)),
    "walk_sampled-off_by_one_parent": ("walk-sampled_tree", lambda: OffByOneParent(WalkVerifier()),
                                       tuple(SETTINGS)),
    "chain-always_accept": ("chain_rejection", lambda: always_accept(ChainRejectionVerifier), tuple(SETTINGS)),
    "chain-ignore_q": ("chain_rejection", lambda: ignore_q(ChainRejectionVerifier), tuple(SETTINGS)),
    "chain-off_by_one_parent": ("chain_rejection", lambda: OffByOneParent(ChainRejectionVerifier()),
                                tuple(SETTINGS)),
    "chain-skip_residual": ("chain_rejection", lambda: skip_residual(ChainRejectionVerifier), tuple(SETTINGS)),
    "tree-always_accept": ("tree_rejection", lambda: always_accept(TreeRejectionVerifier), tuple(SETTINGS)),
    "tree-ignore_q": ("tree_rejection", lambda: ignore_q(TreeRejectionVerifier), tuple(SETTINGS)),
    "tree-off_by_one_parent": ("tree_rejection", lambda: OffByOneParent(TreeRejectionVerifier()),
                               tuple(SETTINGS)),
    "tree-skip_residual": ("tree_rejection", lambda: skip_residual(TreeRejectionVerifier), tuple(SETTINGS)),
    "tree-keep_tried": ("tree_rejection", KeepTried, ("T1",)),
}


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("case", list(CASES))
def test_verifier_is_lossless(case: str, setting: str) -> None:
    make_round, make_verifier = CASES[case]
    res, result = make_round(setting).g_test(make_verifier())
    assert res.impossible == 0, f"{case}: {res.impossible} tokens outside the target's support"
    assert res.p_value >= ALPHA, f"{case} at {setting}: G = {res.statistic:.1f}, dof {res.dof}, p = {res.p_value:.3g}"
    # The second token is tested inside the round often enough (not only through the exact conditional).
    assert float((result.num_accepted >= 2).double().mean()) > 0.05, f"{case} rarely accepts two drafts"


@pytest.mark.parametrize(
    ("control", "setting"),
    [(name, s) for name, (_, _, settings) in CONTROLS.items() for s in settings],
)
def test_negative_control_fails(control: str, setting: str) -> None:
    case, make_control, _ = CONTROLS[control]
    make_round, _ = CASES[case]
    res, _ = make_round(setting).g_test(make_control())
    assert res.p_value < ALPHA, f"control {control} at {setting} passed: G = {res.statistic:.1f}, p = {res.p_value:.3g}"

