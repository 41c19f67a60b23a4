"""`AutoBudget`: the per-round controller behind ``budget: auto``, for every row of the batch at once.

Each round it answers two questions from the measured `CostProfile`, the calibrated `AcceptanceEstimator` and
what earlier requests taught it (`specframe.cost.memory`):

1. **Which rows draft?** Every row keeps its own `RowBudget`: the moving average ``gain`` of the tokens its
   drafted rounds commit in expectation (``1 + S``, calibrated). A drafted round of ``B`` rows costs
   ``R_d`` ms and a plain one ``R_p = T(B) + plain overhead``, so drafting pays for a row when its gain beats
   the break-even ``tau* = R_d / R_p``. A row that does not pay decodes plainly (no draft: a root-only tree)
   and probes with one drafted round after ``probe_interval`` plain rounds; the interval doubles after each
   probe that does not pay (up to ``max_probe_interval``) and resets when one does. Rows that do not draft
   cost nothing in the draft: the drafter runs on the drafting rows only.
2. **How many nodes?** After drafting (its cost is sunk), every drafting row keeps its ``k`` best nodes, ``k``
   maximising ``sum_b S_b(k) - lam * T(B * (k + 1))`` (`specframe.cost.chooser`), ``lam`` the best rate
   achieved so far. The kept set is ancestor-closed, and a child-prefix set chosen from depths and sibling
   ranks only when the verifier is a rejection verifier over sampled siblings (`AcceptanceEstimator` key
   ``rank``), so losslessness is untouched.

A new request starts from memory: the calibration and the gains of earlier requests of the same pipeline, target
and machine (`ControllerMemory`), judged by the earlier requests whose prompts are most like its own (a hashed
token signature of the prompt, `specframe.cost.text_kind`; all of them when none is alike). When they say
drafting pays it drafts at once; when they say it does not, it decodes plainly first and probes after
``min_probe_interval`` rounds, so a chat request to a drafter trained on code pays one probe, not a series of
drafted rounds, even right after many code requests. The probe's calibrated expectation is the drafter's
confidence on this request's own text, and it decides what follows.

Cost of probing (bounded): after ``m`` probes that did not pay, probes are ``min * 2^m`` plain rounds apart
(capped at ``max``), so their extra time is at most ``(R_d / R_p - 1) / interval`` of plain decoding's.

It learns from every round: the verify curve at the size it ran, the overheads, the acceptance of every
verified node, each row's gain, and what rounds really achieved per batch size (`RoundRates`, the guard: where
drafted rounds at ``n`` rows measured fewer tokens per millisecond than plain ones, drafting is held at ``n`` rows
whatever the model predicts).

Example (CPU, steep curve): T(1) = 45 ms, T(5) = 75 ms, draft 25 ms -> R_d = 100 ms, tau* = 2.2; a row whose
trees accept 1 token on average (gain 2) decodes plainly after one round and probes at rounds 4, 12, 28, ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from specframe.cost.acceptance import AcceptanceEstimator
from specframe.cost.chooser import best_width, forward_tokens, keep_first, verification_order
from specframe.cost.draft_cost import DraftCost
from specframe.cost.memory import ControllerMemory
from specframe.cost.profile import CostProfile
from specframe.cost.round_rates import RoundRates
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


@dataclass
class RowBudget:
    """One request's draft-or-not state."""

    drafting: bool
    probe_interval: int
    plain_left: int = 0
    gain: float | None = None  # moving average of expected tokens per drafted round (1 + S)
    signature: tuple[float, ...] | None = None  # the prompt's (`specframe.cost.text_kind`)
    gain_sum: float = 0.0  # expected tokens of this request's drafted rounds, summed
    drafted_rounds: int = 0
    remembered: float | None = None  # the gain its most alike earlier requests predicted when it started

    @property
    def wants_draft(self) -> bool:
        return self.drafting or self.plain_left <= 0


@dataclass(frozen=True)
class Choice:
    """What `AutoBudget.choose` kept for the drafting rows."""

    tree: DraftTree  # [R, k + 1] the kept subtrees
    kept: list[int]  # [R] draft nodes kept per row
    expected: list[float]  # [R] expected tokens of each kept tree (1 + S_b)


class AutoBudget:
    """Chooses per round which rows draft and how many nodes each verifies; see the module docstring."""

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
        self._draft_ms: float | None = self.memory.draft_ms  # moving average of a drafted round's ms per row
        self._draft_tokens: float | None = None  # moving average of a drafted round's committed tokens per row
        self.draft_cost = DraftCost()  # a drafted round's draft cost: fixed + per drafting row
        self.rates = RoundRates(settings.smoothing)  # what rounds really achieved per batch size (the guard)
        #: Whether the target runs a plain row of a drafted round as one token (selective batching); the loop
        #: sets it from its target rows.
        self.packs = False

    # ------------------------------------------------------------------------------------------ rates
    def plain_round_ms(self, rows: int) -> float:
        return self.profile.verify_cost(rows) + self.profile.overhead("plain")

    def plain_rate(self, rows: int) -> float:
        """Tokens per ms of plain decoding (one token per row per root-only round of ``rows`` rows)."""
        return rows / max(self.plain_round_ms(rows), 1e-6)

    def draft_rate(self) -> float | None:
        """Tokens per ms of drafted rounds so far (None before the first): the moving averages of committed tokens per
        row and of the round's ms per row, whose ratio is the round's tokens over its milliseconds. Committed, not
        expected: before the estimator is calibrated its expectations run high, and a bar priced on them would
        stop rows that pay."""
        if self._draft_tokens is None or self._draft_ms is None:
            return None
        return self._draft_tokens / max(self._draft_ms, 1e-6)

    def rate(self, rows: int) -> float:
        """``lam``: the best rate the loop achieves with ``rows`` rows, the bar a round's extra work must clear."""
        drafted = self.draft_rate()
        return max(self.plain_rate(rows), 0.0 if drafted is None else drafted)

    def break_even(self, rows: int) -> float:
        """``tau*``: the expected tokens a row's drafted round must commit for drafting to pay (1 before any drafted
        round was measured, so every row drafts until one is).

        With one row this is a drafted round against a plain one, ``R_d / R_p``. In a batch the question is
        marginal (the other rows decode either way): the row pays its share of the drafter's forward
        (`DraftCost`) and the verify tokens its tree adds to the batch's forward, ``T(B + k) - T(B)`` with
        selective batching or ``T(B (k + 1)) - T(B)`` without (its tree pads every row), and must bring ``lam``
        tokens per such millisecond: ``tau* = 1 + lam * marginal_ms``."""
        if self._draft_ms is None:
            return 1.0
        if not self.draft_cost.observed:  # a remembered draft time, not yet a round of this run
            return self._draft_ms * rows / max(self.plain_round_ms(rows), 1e-6)
        kept = max(self.draft_cost.kept or 1.0, 1.0)
        tokens = rows + kept if self.packs else rows * (kept + 1)
        verify = self.profile.verify_cost(round(tokens)) - self.profile.verify_cost(rows)
        overhead = max(self.profile.overhead("verify") + self.profile.overhead("commit")
                       - self.profile.overhead("plain"), 0.0) / max(self.draft_cost.together or 1.0, 1.0)
        return 1.0 + self.rate(rows) * (self.draft_cost.marginal_ms() + max(verify, 0.0) + overhead)

    # ----------------------------------------------------------------------------------------- rows
    def drafting_rows(self, wanting: list[int], budgets: Sequence[RowBudget | None], rows: int) -> list[int]:
        """Of the rows ``wanting`` to draft (their `RowBudget` s ``budgets``), those that draft in a round of ``rows``
        rows: none while the measured-rate guard holds drafting at this batch size (`RoundRates`), and in a batch
        no probe or first round that cannot pay (:meth:`can_pay`)."""
        if not wanting or not self.rates.allows_drafting(rows, plain_ms=self.plain_round_ms):
            return []
        if rows == 1:
            return wanting
        bar, best = self.break_even(rows), self.memory.best_gain()  # once per round, not per row
        return [i for i, budget in zip(wanting, budgets, strict=True)
                if budget is None or self.can_pay(budget, rows, bar=bar, best=best)]

    def can_pay(self, row: RowBudget, rows: int, *, bar: float | None = None, best: float | None = None) -> bool:
        """Whether ``row`` may draft in a round of ``rows`` rows. A row that drafts by choice may (the guard judges
        that choice). A probe or a request's first drafted round in a batch may only if its most hopeful gain (its
        own or its most alike earlier requests'; the best any remembered request averaged only when neither is
        known) reaches the break-even at this batch size: every row of the batch waits for its forward, and a probe
        that cannot pay cannot change what the row does next, so it waits for a round with fewer rows. Alone
        (``rows`` = 1) a probe always runs: it is how a request finds out that drafting pays again.

        ``bar`` and ``best``: the break-even at ``rows`` rows and the memory's best gain, when the caller has them
        (:meth:`drafting_rows` computes them once per round).

        Example: at 8 rows the break-even is 3.5 tokens and no request has averaged more than 2.9: the rows'
        probes wait, and run once the batch has shrunk to where the break-even is below 2.9."""
        if rows == 1 or (row.drafting and row.drafted_rounds > 0):
            return True
        hopes = [g for g in (row.gain, row.remembered) if g is not None]
        if not hopes:
            hopes = [g for g in (self.memory.best_gain() if best is None else best,) if g is not None]
        return not hopes or max(hopes) >= (self.break_even(rows) if bar is None else bar)

    def start_row(self, signature: tuple[float, ...] | None = None) -> RowBudget:
        """A new request's state, from memory: draft at once when the gains of earlier requests like this one
        (prompt ``signature``; all earlier requests when none is alike) beat the break-even, else decode plainly
        first and probe after ``min_probe_interval`` rounds."""
        s = self.settings
        remembered = self.memory.predict_gain(signature)
        pays = remembered is None or remembered >= self.break_even(1)
        return RowBudget(drafting=pays, probe_interval=s.min_probe_interval,
                         plain_left=0 if pays else s.min_probe_interval, gain=None, signature=signature,
                         remembered=remembered)

    def finish_row(self, row: RowBudget) -> None:
        """A request ended: remember its prompt signature with the mean gain of its drafted rounds."""
        if row.signature is not None and row.drafted_rounds:
            self.memory.observe_request(row.signature, row.gain_sum / row.drafted_rounds)

    def choose(self, tree: DraftTree, rows: int, *, explore: bool = False) -> Choice:
        """Each drafting row's subtree to verify (``tree`` ``[R, N]``; the forward has ``rows`` rows in all, priced by
        what it runs: :attr:`packs` when the target skips the padding of the rows that do not draft,
        :func:`specframe.cost.chooser.forward_tokens`).

        ``explore``: verify at least one node per row even when none is expected to pay, so that a probe (or a
        request's first drafted round) teaches the estimator something; its cost is the probe's.
        """
        p = self.estimator.estimate(tree)  # [R, N]
        order, p_sorted = verification_order(tree, p, sibling_prefix=self.sibling_prefix)
        width = min(self.settings.max_budget, order.shape[1])
        order, p_sorted = order[:, :width], p_sorted[:, :width]
        zero = torch.zeros(p_sorted.shape[0], 1, dtype=p_sorted.dtype, device=p_sorted.device)
        sums = torch.cat([zero, p_sorted.cumsum(dim=1)], dim=1)  # [R, K + 1]
        nodes_dev = tree.num_nodes - 1  # [R] draft nodes per row
        packed = torch.cat([sums, nodes_dev[:, None].to(sums.dtype)], dim=1).tolist()  # the one read
        table = [row[:-1] for row in packed]
        nodes = [int(row[-1]) for row in packed]
        costs = self.profile.verify_costs(forward_tokens(width, len(table), rows, self.packs))
        k = best_width(table, costs, self.rate(rows), rows=rows, packs=self.packs)
        if explore:
            k = max(k, min(1, width))
        kept = [min(k, n) for n in nodes]
        expected = [1.0 + row[n] for row, n in zip(table, kept, strict=True)]
        if k >= max(nodes, default=0) and tree.capacity == max(nodes, default=0) + 1:
            return Choice(tree, kept, expected)
        keep = keep_first(tree, order, torch.clamp(nodes_dev, max=k).to(order.device))
        return Choice(tree.subtree(keep, capacity=max(kept, default=0) + 1), kept, expected)

    # ---------------------------------------------------------------------------------------- learning
    def observe_tree(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        """The drafting rows' verified trees ``[R, N]`` and accepted paths ``[R, D + 1]`` (calibration)."""
        self.estimator.observe(tree, accepted_nodes)

    def observe_plain(self, rows: list[RowBudget], stage_ms: dict[str, float]) -> None:
        """A root-only round of ``rows`` ran with these stage times (target, verify, commit; empty when the round
        was not timed exactly)."""
        if stage_ms:
            self.rates.observe_plain(len(rows), sum(stage_ms.values()))
            self._observe_verify(len(rows), len(rows), stage_ms["target"])
            self.profile.observe_overhead("plain", stage_ms.get("verify", 0.0) + stage_ms.get("commit", 0.0))
        for row in rows:
            row.plain_left -= 1

    def observe_drafted(self, drafted: list[RowBudget], plain: list[RowBudget], expected: list[float],
                        forward_tokens: int, stage_ms: dict[str, float], kept: Sequence[int] = (),
                        committed: int | None = None, judged: bool = True) -> None:
        """A round in which ``drafted`` rows verified trees (``kept`` nodes each, when known) committing ``expected``
        tokens in expectation (and ``plain`` rows their roots alone) ran a forward over ``forward_tokens`` tokens
        (``stage_ms`` empty when the round was not timed exactly: then only the rows' gains are learnt) and
        committed ``committed`` tokens over all its rows: the rate drafting achieves, ``lam`` (:meth:`rate`; without
        it the expectation stands in), and, when ``judged``, the measured-rate guard's evidence (every round of a
        batch, whose rows all wait for its probes; alone, rounds drafted by the controller's choice, not a request's
        probes and first round, which are its own exploration)."""
        rows = len(drafted) + len(plain)
        w = self.settings.smoothing
        if stage_ms and committed is not None and judged:
            self.rates.observe_drafted(rows, sum(stage_ms.values()), committed,
                                       modelled_plain_ms=self.plain_round_ms(rows))
        if stage_ms:
            drafting_ms = sum(stage_ms.get(stage, 0.0) for stage in DRAFT_STAGES)
            if kept:
                mean_kept = sum(kept) / len(kept)
            elif self.packs:  # the drafting rows' share of the tokens that ran, roots excluded
                mean_kept = (forward_tokens - len(plain)) / max(len(drafted), 1) - 1
            else:
                mean_kept = forward_tokens / max(rows, 1) - 1
            self.draft_cost.observe(len(drafted), drafting_ms, max(mean_kept, 0.0))
            self._observe_verify(forward_tokens, rows, stage_ms["target"])
            for stage in (*DRAFT_STAGES, "verify", "commit"):
                if stage in stage_ms:
                    self.profile.observe_overhead(stage, stage_ms[stage])
            other_ms = sum(v for k, v in stage_ms.items() if k != "target")
            ms_per_row = (other_ms + self.profile.verify_cost(forward_tokens)) / rows
            tokens_per_row = (sum(expected) + len(plain) if committed is None else committed) / rows
            if self._draft_ms is None or self._draft_tokens is None:
                self._draft_ms, self._draft_tokens = ms_per_row, tokens_per_row
            else:
                self._draft_ms += w * (ms_per_row - self._draft_ms)
                self._draft_tokens += w * (tokens_per_row - self._draft_tokens)
        bar = self.break_even(rows)
        s = self.settings
        for row, gain in zip(drafted, expected, strict=True):
            row.gain = gain if row.gain is None or not row.drafting else row.gain + w * (gain - row.gain)
            row.gain_sum += gain
            row.drafted_rounds += 1
            self.memory.observe_gain(gain)
            if row.gain >= bar:
                row.drafting = True
                row.probe_interval = s.min_probe_interval
            elif row.drafting:
                row.drafting = False
                row.plain_left = row.probe_interval
            else:  # a probe that did not pay
                row.probe_interval = min(2 * row.probe_interval, s.max_probe_interval)
                row.plain_left = row.probe_interval
        for row in plain:
            row.plain_left -= 1

    def remember(self) -> ControllerMemory:
        """What the next request should start from (saved with the profile after every request)."""
        self.memory.calibration = self.estimator.state()
        self.memory.draft_ms = self._draft_ms
        return self.memory

    def _observe_verify(self, tokens: int, rows: int, ms: float) -> None:
        """Learn the curve; a batch's forward far beyond the measured points becomes a point of its own."""
        top = max(self.profile.verify_ms)
        if rows > 1 and tokens > BEYOND * top:
            self.profile.extend(tokens, ms)
        else:
            self.profile.observe_verify(tokens, ms)
