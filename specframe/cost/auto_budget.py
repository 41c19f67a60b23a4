"""`AutoBudget`: the per-round controller behind ``budget: auto``, for every row of the batch at once.

Before a round (from the statistics as they stood after the previous round, so nothing this round draws can
change them), :meth:`AutoBudget.plan` decides which rows draft and how many nodes each verifies by the two rules
of `specframe.cost.planner`, priced on the one cost model ``C(B, n)`` (`CostProfile`) and the draft cost
``a + b R`` (`DraftCost`). The forward's shape is then known before drafting; after drafting,
:meth:`AutoBudget.keep` keeps each drafting row's best nodes on the device (no read), and the round's one
device-to-host read (the outcome) also brings back each drafted tree's sorted ``p`` (:meth:`AutoBudget.profile`),
which is what the next round plans with.

What a row's nodes are predicted to bring:

* ``p_j``: the calibrated path-acceptance probability of the row's ``j``-th best node in its last drafted tree
  (`AcceptanceEstimator`; by depth and sibling rank for rejection verifiers, which keeps them lossless), or of
  the last drafted tree of any row when the row never drafted (a request's first round);
* ``rho``: the row's own calibration, the ratio of the draft tokens its rounds accepted to the ``sum p`` they were
  predicted. With a Gamma prior of mean 1 and strength :data:`ROW_PRIOR_TOKENS` (accepted tokens are Poisson in
  the prediction), the posterior after ``A`` accepted of ``E`` predicted tokens is ``Gamma(k + A, k + E)``. Both
  counts decay by :data:`ROW_DECAY` every round, so evidence ages while a row decodes plainly.

**Exploration by optimism** (no probe schedule): a row is planned with ``max(mean, draw)`` of its ``rho``
posterior (a Thompson draw from a seeded generator on the host, never this round's random numbers). A row whose
mean does not pay still drafts now and then while its evidence is thin or old, ever more rarely as evidence
accumulates; a row whose mean pays always drafts.

**Why a row decodes plainly** (:data:`specframe.cost.reasons.PLAIN_REASONS`, in every round record):
``no_gain`` (even its optimistic bound, mean plus two standard deviations of ``rho``, does not pay),
``explore_declined`` (that bound would pay but this round's draw did not), ``context_full`` (no room for a draft
node), ``drafter_refused`` (it drafted no node).

The decision constants, all here or next to what they weigh: :data:`ROW_PRIOR_TOKENS`, :data:`ROW_DECAY`,
`CostProfile.smoothing` (0.2 per timed round), :data:`specframe.cost.draft_cost.DRAFT_COST_DECAY` and the
calibration's :data:`specframe.cost.acceptance.DEFAULT_DECAY` and prior strength (4 pseudo-nodes).

Example (CPU, ``C(1, 1) = 45`` ms, ``C(1, 4) = 66``, draft 25 ms, one row): ``lambda_1 = 1/45`` per ms; a row
whose best nodes are predicted ``p = [0.8, 0.6, 0.4]`` (``rho = 1``) brings 1.8 tokens for ``25 + 21 = 46`` ms,
worth ``46 / 45 = 1.02`` tokens: it drafts 3 nodes. After its rounds accept a quarter of what was predicted
(``rho -> 0.25``) it brings 0.45: plain, ``no_gain`` once the posterior is tight, ``explore_declined`` before.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specframe.cost.acceptance import AcceptanceEstimator
from specframe.cost.chooser import keep_first, verification_order
from specframe.cost.draft_cost import DraftCost
from specframe.cost.memory import ControllerMemory
from specframe.cost.planner import plan_counts
from specframe.cost.profile import CostProfile
from specframe.tree import DraftTree

DRAFT_STAGES = ("draft", "build", "prune")
#: Strength of the prior on a row's calibration ``rho`` (mean 1), in predicted draft tokens (decision constant).
ROW_PRIOR_TOKENS = 2.0
#: Factor a row's calibration counts are multiplied by every round (decision constant): evidence half-lives of
#: about 35 rounds, so a row that went plain is retried once its evidence has aged.
ROW_DECAY = 0.98
#: Standard deviations of ``rho`` above its mean that label a plain row ``explore_declined`` rather than
#: ``no_gain`` (a label for records, not a decision).
OPTIMISM_SDS = 2.0
#: ``p`` travels through the round's one read as integers of this resolution.
P_SCALE = 1 << 20


@dataclass(frozen=True)
class AutoBudgetSettings:
    """Knobs of the controller (the pipeline's ``auto_budget:`` section)."""

    max_budget: int = 32
    seed: int = 0  # of the host generator that draws the exploration


@dataclass
class RowBudget:
    """One request's calibration: decayed accepted and predicted draft tokens, and its last tree's outlook."""

    accepted: float = 0.0
    predicted: float = 0.0
    outlook: list[float] | None = None  # its last drafted tree's p, descending
    drafted_rounds: int = 0

    def _shape_rate(self) -> tuple[float, float]:
        return ROW_PRIOR_TOKENS + self.accepted, ROW_PRIOR_TOKENS + self.predicted

    def mean(self) -> float:
        shape, rate = self._shape_rate()
        return shape / rate

    def upper(self) -> float:
        shape, rate = self._shape_rate()
        return (shape + OPTIMISM_SDS * math.sqrt(shape)) / rate

    def draw(self, rng: random.Random) -> float:
        shape, rate = self._shape_rate()
        return rng.gammavariate(shape, 1.0 / rate)

    def age(self) -> None:
        self.accepted *= ROW_DECAY
        self.predicted *= ROW_DECAY


@dataclass(frozen=True)
class RoundPlan:
    """What a round does, decided before it drafts."""

    counts: list[int]  # [B] nodes each row verifies (0: plain)
    reasons: list[str | None]  # [B] why a row decodes plainly (None: it drafts)
    explored: list[bool] = field(default_factory=list)  # [B] drafts on optimism only (its mean would not)

    @property
    def drafting(self) -> list[int]:
        return [b for b, k in enumerate(self.counts) if k > 0]


class AutoBudget:
    """Plans every round's drafting rows and node counts; see the module docstring."""

    def __init__(self, profile: CostProfile, settings: AutoBudgetSettings,
                 estimator: AcceptanceEstimator | None = None, *, sibling_prefix: bool = False,
                 memory: ControllerMemory | None = None, memory_file: Path | None = None) -> None:
        self.profile = profile
        self.memory_file = memory_file  # where `specframe.cost.setup.save_learned` keeps the memory
        self.settings = settings
        self.sibling_prefix = sibling_prefix
        self.memory = memory or ControllerMemory()
        self.estimator = estimator or AcceptanceEstimator(key="rank" if sibling_prefix else "score")
        if self.memory.calibration is not None:
            self.estimator.load_state(self.memory.calibration)
        self.outlook: list[float] | None = self.memory.outlook  # the last drafted tree's p (any row)
        self.draft_cost = DraftCost()
        self.rng = random.Random(settings.seed)
        #: Whether the target skips the padding of short rows (selective batching); the loop sets it.
        self.packs = False
        #: Node counts the device runs fast (shape buckets); None: any. The loop sets it from the target.
        self.allowed: tuple[int, ...] | None = None

    # ------------------------------------------------------------------------------------------- plan
    def start_row(self) -> RowBudget:
        return RowBudget()

    def freeze(self) -> None:
        """Stop learning costs (the cost model and the draft cost): decisions then come from the numbers as given."""
        self.profile.frozen = True
        self.draft_cost.frozen = True

    def plan(self, budgets: Sequence[RowBudget], rooms: Sequence[int]) -> RoundPlan:
        """Which rows draft and how many nodes each verifies, from the statistics after the previous round.

        ``rooms[b]``: the deepest draft node row ``b``'s context still holds (0: none)."""
        batch = len(budgets)
        cap = self.settings.max_budget
        if self.allowed is not None:
            cap = max((a for a in self.allowed if a <= cap), default=0)
        outlooks = [(b.outlook if b.outlook is not None else self.outlook) for b in budgets]
        if self.outlook is None and all(o is None for o in outlooks):  # nothing drafted yet: one round to learn
            counts = [cap if room > 0 else 0 for room in rooms]
            return RoundPlan(counts, [None if k else "context_full" for k in counts], [k > 0 for k in counts])
        means = [b.mean() for b in budgets]
        draws = [max(m, b.draw(self.rng)) for m, b in zip(means, budgets, strict=True)]
        used = self._counts(outlooks, draws, rooms, cap)
        explored = [False] * batch
        if any(k and d > m for k, d, m in zip(used, draws, means, strict=True)):
            mean_counts = self._counts(outlooks, means, rooms, cap)
            explored = [bool(k and not mk) for k, mk in zip(used, mean_counts, strict=True)]
        reasons: list[str | None] = [None] * batch
        if not all(used):
            upper = self._counts(outlooks, [b.upper() for b in budgets], rooms, cap)
            for i, k in enumerate(used):
                if not k:
                    reasons[i] = "context_full" if rooms[i] <= 0 else "explore_declined" if upper[i] else "no_gain"
        return RoundPlan(used, reasons, explored)

    def _counts(self, outlooks: Sequence[list[float] | None], scales: Sequence[float], rooms: Sequence[int],
                cap: int) -> list[int]:
        p = [[] if o is None or room <= 0 else [v * s for v in o[:cap]]
             for o, s, room in zip(outlooks, scales, rooms, strict=True)]
        batch = len(p)
        fixed, per_row = self.draft_cost.split()
        extra = max(self.profile.overhead("verify") + self.profile.overhead("commit") - self.profile.overhead("plain"),
                    0.0)  # a drafted round's verify and commit beyond a plain round's
        return plan_counts(p, batch, self.profile.cost, self.profile.plain_rate(batch), fixed + extra, per_row,
                           packs=self.packs, allowed=self.allowed)

    # ---------------------------------------------------------------------------------------- on device
    def keep(self, tree: DraftTree, counts: Sequence[int]) -> tuple[DraftTree, torch.Tensor]:
        """Each drafting row's ``counts[r]`` best nodes of ``tree`` ``[R, N]`` (by ``p``, ancestor-closed; by depth
        and sibling rank only for rejection verifiers), and every row's sorted ``p`` ``[R, K]`` for the round's read
        (:meth:`profile`). Runs on the tree's device; nothing is read back."""
        p = self.estimator.estimate(tree)  # [R, N]
        order, p_sorted = verification_order(tree, p, sibling_prefix=self.sibling_prefix)  # [R, N - 1] each
        width = min(self.settings.max_budget, order.shape[1])
        k = torch.tensor(list(counts), dtype=torch.long, device=order.device)  # [R] host -> device, no read
        capacity = min(max(counts, default=0) + 1, tree.capacity)
        kept = tree.subtree(keep_first(tree, order, k), capacity=capacity)
        return kept, p_sorted[:, :width]

    @staticmethod
    def packed_profile(p_sorted: torch.Tensor, drafting: Sequence[int], rows: int) -> torch.Tensor:  # [B, K] int64
        """The drafting rows' sorted ``p`` ``[R, K]`` at their rows of the batch, as integers for the one read."""
        out = torch.zeros(rows, p_sorted.shape[1], dtype=torch.long, device=p_sorted.device)
        index = torch.tensor(list(drafting), dtype=torch.long, device=p_sorted.device)
        return out.index_copy(0, index, (p_sorted.double() * P_SCALE).round().long())

    # ---------------------------------------------------------------------------------------- learning
    def observe_tree(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        """The drafting rows' verified trees ``[R, N]`` and accepted paths ``[R, D + 1]`` (calibration)."""
        self.estimator.observe(tree, accepted_nodes)

    def observe_round(self, budgets: Sequence[RowBudget], plan: RoundPlan, profile: Sequence[Sequence[int]] | None,
                      verified: Sequence[int], accepted: Sequence[int], stage_ms: dict[str, float],
                      forward_tokens: int) -> None:
        """What the round did: ``profile[b]`` the drafted rows' sorted ``p`` (integers of :data:`P_SCALE`, from the
        round's read), ``verified[b]`` and ``accepted[b]`` their nodes and accepted draft tokens, ``stage_ms`` the
        stage times (empty when the round was not timed exactly), ``forward_tokens`` what the forward carried."""
        batch = len(budgets)
        for b, budget in enumerate(budgets):
            budget.age()
            if plan.counts[b] and profile is not None:
                outlook = [v / P_SCALE for v in profile[b] if v > 0]
                budget.predicted += sum(outlook[:verified[b]])
                budget.accepted += accepted[b]
                budget.drafted_rounds += 1
                if outlook:
                    budget.outlook = outlook
                    self.outlook = outlook
        if not stage_ms:
            return
        self.profile.observe(batch, forward_tokens, stage_ms.get("target", 0.0))
        if plan.drafting:
            self.draft_cost.observe(len(plan.drafting), sum(stage_ms.get(s, 0.0) for s in DRAFT_STAGES))
            for stage in ("verify", "commit"):
                if stage in stage_ms:
                    self.profile.observe_overhead(stage, stage_ms[stage])
        else:
            self.profile.observe_overhead("plain", stage_ms.get("verify", 0.0) + stage_ms.get("commit", 0.0))

    def remember(self) -> ControllerMemory:
        """What the next request should start from (saved beside the profile after every request)."""
        self.memory.calibration = self.estimator.state()
        self.memory.outlook = self.outlook
        return self.memory
