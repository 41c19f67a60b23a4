"""`AutoBudget`: the per-round controller behind ``budget: auto``.

Each round it answers two questions, from the measured `CostProfile` and the calibrated
`AcceptanceEstimator`:

1. **Draft at all?** It compares the rate of drafted rounds (expected tokens per ms, an exponential moving
   average of the rounds it has seen, draft time included; the expectation comes from the calibrated
   estimator) with the rate of plain decoding, ``1 / (T(1) + plain overhead)``. While drafting does not pay
   it decodes plainly (no draft, no tree: the root alone) and probes with one drafted round after
   ``probe_interval`` plain rounds; the interval doubles after each probe that does not pay (up to
   ``max_probe_interval``) and resets when one does. The loop is then never slower than plain decoding by
   more than the probes' cost (at most one drafted round in ``min_probe_interval``, fewer as the interval
   grows).
2. **How many nodes?** After drafting (its cost is sunk), it verifies the ``k`` nodes that maximise
   ``S_k - lam * T(k + 1)`` (`specframe.cost.chooser`), with ``lam`` the best rate achieved so far. The kept
   set is ancestor-closed, and a child-prefix set when the verifier needs one, so losslessness is untouched:
   any such subtree is a legal draft tree for every verifier.

It learns from every round: the verify curve at the size it ran, the overheads, the acceptance of every
verified node.

Example (CPU, steep curve): T(1) = 45 ms, T(5) = 75 ms, draft 25 ms; trees accept 1 token on average ->
drafted rounds make 2 tokens / 110 ms < 1 / 45 ms, so after one round it decodes plainly and probes at rounds
4, 12, 28, ... (each probe drafts once). A new request probes within ``min_probe_interval`` rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from specframe.cost.acceptance import AcceptanceEstimator
from specframe.cost.chooser import best_verify_size, keep_mask, verification_order
from specframe.cost.profile import CostProfile
from specframe.tree import DraftTree

DRAFT_STAGES = ("draft", "build", "prune")
#: A batched forward over more than this many times the largest measured size adds a curve point.
BEYOND = 1.25


@dataclass(frozen=True)
class AutoBudgetSettings:
    """Knobs of the controller (the pipeline's ``auto_budget:`` section)."""

    max_budget: int = 32
    min_probe_interval: int = 4
    max_probe_interval: int = 64
    smoothing: float = 0.3


class AutoBudget:
    """Chooses per round whether to draft and how many nodes to verify; see the module docstring."""

    def __init__(self, profile: CostProfile, settings: AutoBudgetSettings,
                 estimator: AcceptanceEstimator | None = None, *, sibling_prefix: bool = False) -> None:
        self.profile = profile
        self.settings = settings
        self.estimator = estimator or AcceptanceEstimator()
        self.sibling_prefix = sibling_prefix
        self.drafting = True
        self.probe_interval = settings.min_probe_interval
        self.plain_left = 0
        self._draft_tokens: float | None = None  # moving average of tokens per drafted round
        self._draft_ms: float | None = None  # moving average of a drafted round's milliseconds
        self._chosen_expected: float | None = None  # 1 + S_k of the tree `choose` kept this round
        self.rows = 1  # rows of the batch the loop decodes now (`specframe.cost.batch_budget`)

    # ------------------------------------------------------------------------------------------ rates
    @property
    def plain_rate(self) -> float:
        """Tokens per ms of plain decoding (one token per row per root-only round of ``rows`` rows)."""
        return self.rows / max(self.profile.verify_cost(self.rows) + self.profile.overhead("plain"), 1e-6)

    @property
    def draft_rate(self) -> float | None:
        """Tokens per ms of drafted rounds so far (None before the first)."""
        if self._draft_tokens is None or self._draft_ms is None:
            return None
        return self._draft_tokens / max(self._draft_ms, 1e-6)

    @property
    def rate(self) -> float:
        """``lam``: the best rate the loop achieves, the bar a round's extra work must clear."""
        return max(self.plain_rate, self.draft_rate or 0.0)

    # ----------------------------------------------------------------------------------------- choices
    def start_request(self) -> None:
        """A new request: probe soon, since its text may suit the drafter better than the last one's.

        What was learnt is kept (profile, calibration, drafted-round rate, probe interval), so a drafter that
        did not pay costs one probe per request, not a fresh series of probes.
        """
        self.plain_left = min(self.plain_left, self.settings.min_probe_interval)

    def should_draft(self) -> bool:
        return self.drafting or self.plain_left <= 0

    def choose(self, tree: DraftTree, row: int = 0) -> tuple[DraftTree, int]:
        """The subtree to verify (root + the ``k`` best nodes) and ``k``."""
        p = self.estimator.estimate(tree, row)
        order, p_sorted = verification_order(tree, p, sibling_prefix=self.sibling_prefix, row=row)
        order, p_sorted = order[: self.settings.max_budget], p_sorted[: self.settings.max_budget]
        costs = self.profile.verify_costs(len(order) + 1)
        k = best_verify_size(p_sorted, costs, self.rate)
        self._chosen_expected = 1.0 + sum(p_sorted[:k])  # the kept tree's expected tokens (observe_drafted)
        if k == len(order) and k == int(tree.num_nodes[row]) - 1:
            return tree, k
        return tree.subtree(keep_mask(tree, order[:k], row)), k

    # ---------------------------------------------------------------------------------------- learning
    def observe_plain(self, stage_ms: dict[str, float]) -> None:
        """A root-only round ran with these stage times (target, verify, commit)."""
        self._observe_verify(self.rows, stage_ms.get("target", 0.0))
        self.profile.observe_overhead("plain", stage_ms.get("verify", 0.0) + stage_ms.get("commit", 0.0))
        self.plain_left -= 1

    def observe_drafted(self, tree: DraftTree, accepted_nodes_row: object, accepted: int,
                        stage_ms: dict[str, float], row: int = 0) -> None:
        """A drafted round verified ``tree`` and accepted ``accepted`` draft tokens.

        ``accepted_nodes_row`` is the row's ``[D + 1]`` accepted path (root first, -1 padded).
        """
        nodes = int(tree.num_nodes[row])
        # The expectation `choose` computed for this tree, before this round's outcome is counted.
        expected = self._chosen_expected if self._chosen_expected is not None else self.expected_tokens(tree, row)
        self._chosen_expected = None
        self.estimator.observe(tree, accepted_nodes_row, row)  # type: ignore[arg-type]
        self.observe_round(nodes, expected, stage_ms)

    def expected_tokens(self, tree: DraftTree, row: int = 0) -> float:
        """Tokens a round verifying ``tree`` commits in expectation: ``1 + sum of p(v)`` over its nodes.

        The draft-or-not decision uses this calibrated expectation rather than the tokens a round happened to
        commit: a round's acceptance is noisy (zero or the whole tree), so a moving average of realised tokens
        dips below the plain rate by chance and stops a drafter that pays; the estimator is itself fitted to
        every realised acceptance, so the expectation stays honest.
        """
        return float(self.estimator.estimate(tree, row)[1:].sum()) + 1.0

    def observe_round(self, forward_tokens: int, tokens: float, stage_ms: dict[str, float]) -> None:
        """A drafted round ran a target forward over ``forward_tokens`` tokens and commits ``tokens`` in
        expectation (:meth:`expected_tokens`, summed over a batch's rows)."""
        self._observe_verify(forward_tokens, stage_ms.get("target", 0.0))
        for stage in (*DRAFT_STAGES, "verify", "commit"):
            if stage in stage_ms:
                self.profile.observe_overhead(stage, stage_ms[stage])
        # The target's share comes from the (just updated) curve, like the plain rate it is compared with.
        other_ms = sum(v for k, v in stage_ms.items() if k != "target")
        ms = other_ms + self.profile.verify_cost(forward_tokens)
        w = self.settings.smoothing if self.drafting else max(self.settings.smoothing, 0.5)
        if self._draft_tokens is None or self._draft_ms is None:
            self._draft_tokens, self._draft_ms = tokens, ms
        else:
            self._draft_tokens += w * (tokens - self._draft_tokens)
            self._draft_ms += w * (ms - self._draft_ms)
        pays = (self.draft_rate or 0.0) >= self.plain_rate
        if pays:
            self.drafting = True
            self.probe_interval = self.settings.min_probe_interval
        elif self.drafting:
            self.drafting = False
            self.plain_left = self.probe_interval * self.rows
        else:  # a probe that did not pay
            self.probe_interval = min(2 * self.probe_interval, self.settings.max_probe_interval)
            # A batch's probe drafts every row, so it costs about `rows` drafts: probes are spaced `rows` times
            # further apart, which keeps their share of the time bounded as the batch grows.
            self.plain_left = self.probe_interval * self.rows

    def _observe_verify(self, tokens: int, ms: float) -> None:
        """Learn the curve; a batch's forward far beyond the measured points becomes a point of its own."""
        top = max(self.profile.verify_ms)
        if self.rows > 1 and tokens > BEYOND * top:
            self.profile.extend(tokens, ms)
        else:
            self.profile.observe_verify(tokens, ms)
