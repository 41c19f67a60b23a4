"""`budget: auto` keeps rejection verification lossless, end to end, with the real controller.

A real pipeline (toy target, toy drafter and corrector, the `sampled_tree` builder, `tree_rejection`) decodes
thousands of requests with `budget: auto`: the real `AcceptanceEstimator` calibrates online and a steep
synthetic cost curve (50 ms + 5 ms per node) makes the controller trim every round's tree to the nodes it
expects to pay. Under a rejection verifier the controller keys its estimates by depth and sibling rank, never by
the drawn tokens' scores, so which children a node keeps is independent of their tokens given the history. Every
token a drafted round emits is G-tested against the target's exact conditional law given its context.

Negative controls, at the same number of requests as the positive tests (a control that needs more requests
than its test says the test could not see the bug at its own size), one per variant:

* tree: a controller whose decision depends on this round's draws (each row keeps, up to its planned count, the
  nodes whose drawn path probability reaches :data:`DRAWN_CUT`: an earlier version chose the count after
  drafting, from the drawn tokens' scores). Its emitted law must be rejected. Choosing *which* nodes by score with
  the count planned before the round (score-keyed estimates alone) was no longer detectable: G 149.4 / 180, p 0.95.
* chain: the classic verifier bug: after a rejection, sampling from the target's law rather than from the
  residual ``normalize(max(p - q, 0))``.

Measured at 800 requests each with the planner of `specframe.cost.planner` (G, degrees of freedom, n, p; each
test prints its own, busy 2-core machine): tree 171.2 / 180 / 18400 / 0.67 and its control 766.5 / 180 / 7646 /
2e-73; chain 177.3 / 180 / 18400 / 0.54 and its control 1681.0 / 180 / 18400 / 1e-241.

The test: counts of (two previous tokens, token) against the target's conditional law, each context's count
taken as given, so the statistic is the sum of per-context G statistics with cells - contexts degrees of freedom
(:func:`specframe.testing.stats.conditional_g_test`; the former cells - 1 made it conservative). Each test prints
its statistics and the margin to α (orders of magnitude between α and the p-value).
"""

from __future__ import annotations

import math
import types
from collections.abc import Sequence
from typing import Any, Literal

import pytest
import torch
from verifier_scenarios import PROMPT, make_corrector, make_drafter, make_target

import specframe.decode.loop as loop_module
from specframe import ComponentConfig, ComponentSpec, PluginHost, hookimpl
from specframe.cost.acceptance import AcceptanceEstimator
from specframe.cost.auto_budget import AutoBudget
from specframe.cost.chooser import keep_first, verification_order
from specframe.decode.request import Request
from specframe.pipeline import Pipeline
from specframe.sampling import probs
from specframe.testing.clock import TickClock
from specframe.testing.frozen_budget import freeze_auto_budget
from specframe.testing.stats import GTestResult, conditional_g_test
from specframe.testing.toy import ToyTarget
from specframe.tree import DraftTree
from specframe.types import SamplingParams

ALPHA = 1e-6
#: Requests of every test here, positive and negative alike.
REQUESTS = 800
NEW_TOKENS = 24
PARAMS = SamplingParams(temperature=1.0)
#: A cost model on which the controller trims most rounds (a node pays from p = 0.1 on); at 12 ms a node the
#: score-keyed control's pessimistic outlook (p about 0.12 a node) left it almost no drafted round to test.
STEEP = {n: 50.0 + 5.0 * (n - 1) for n in (1, 2, 3, 5, 9, 17)}


class _ToyDrafterConfig(ComponentConfig):
    type: Literal["toy"] = "toy"


class _ToyCorrectorConfig(ComponentConfig):
    type: Literal["toy_head"] = "toy_head"


def _host(target: ToyTarget) -> PluginHost:
    mod = types.ModuleType("auto_lossless_toys")

    @hookimpl
    def specframe_drafters():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="drafter", name="toy", config=_ToyDrafterConfig, summary="toy drafter",
                            factory=lambda c, ctx: make_drafter(target))

    @hookimpl
    def specframe_correctors():  # type: ignore[no-untyped-def]
        yield ComponentSpec(kind="corrector", name="toy_head", config=_ToyCorrectorConfig, summary="toy head",
                            factory=lambda c, ctx: make_corrector())

    mod.specframe_drafters = specframe_drafters  # type: ignore[attr-defined]
    mod.specframe_correctors = specframe_correctors  # type: ignore[attr-defined]
    host = PluginHost(autoload=True, allowlist=["verifiers"], disabled=(), trace=False)
    host.register(mod, "auto_lossless_toys")
    return host


#: (tree builder, verifier) pairs that need q: a sampled tree under tree rejection, a sampled chain under chain
#: rejection.
SAMPLED = {"tree": ({"type": "sampled_tree", "branching": [3, 2]}, "tree_rejection"),
           "chain": ({"type": "sampled_chain", "depth": 3}, "chain_rejection")}


def decode_many(key: str, shape: str = "tree", requests: int = REQUESTS) -> tuple[ToyTarget, list[Any]]:
    """``requests`` requests of ``NEW_TOKENS`` tokens (each with its own seed), the estimator keyed by ``key``, on
    the sampled ``shape`` of :data:`SAMPLED`."""
    builder, verifier = SAMPLED[shape]
    target = make_target()
    target.max_length = 256
    data = {"sampling": {"temperature": PARAMS.temperature}, "budget": "auto",
            "auto_budget": {"max_budget": 6},
            "drafter": {"type": "toy"}, "corrector": {"type": "toy_head"},
            "tree_builder": builder, "pruner": {"type": "none"},
            "verifier": {"type": verifier}, "generation": {"stop_at_eos": False}}
    pipe = Pipeline.from_dict(data, target=target, host=_host(target))
    auto = freeze_auto_budget(pipe, STEEP, list(PROMPT))
    assert auto.estimator.key == "rank"  # what the pipeline chose for a rejection verifier
    if key == "score":
        auto.estimator = AcceptanceEstimator(key="score")
    batch = [Request(list(PROMPT), max_new_tokens=NEW_TOKENS, seed=i) for i in range(requests)]
    return target, pipe.generate_batch(batch, batch_size=1)


def drafted_round_counts(results: list[Any], vocab: int) -> torch.Tensor:  # [V, V, V]
    """Counts of (two previous tokens, token) over every token that a drafted round emitted.

    A lossless loop emits every token from the target's conditional law given its prefix; whether a round drafts
    is decided before its draws, so the tokens of drafted rounds follow that law too (the toy target is second
    order: the law depends on the two previous tokens).
    """
    counts = torch.zeros(vocab, vocab, vocab, dtype=torch.float64)
    for res in results:
        seq = [*PROMPT, *res.tokens]
        pos = len(PROMPT) + 1  # the round tokens start after the prefill's
        for rnd in res.rounds:
            if rnd.drafted:
                for j in range(pos, pos + rnd.committed):
                    counts[seq[j - 2], seq[j - 1], seq[j]] += 1
            pos += rnd.committed
    return counts


def emitted_law_test(target: ToyTarget, counts: torch.Tensor) -> GTestResult:
    """The conditional G-test of the (two previous tokens, token) counts ``[V, V, V]`` against the target's law."""
    v = target.vocab_size
    law = probs(target.next_logits(torch.arange(v).repeat_interleave(v), torch.arange(v).repeat(v)), PARAMS)
    return conditional_g_test(counts.view(v * v, v), law.double().view(v * v, v))


def margin(res: GTestResult) -> str:
    """The statistics and the p-value's distance to α in orders of magnitude (positive: on the side asserted)."""
    log_p = -math.inf if res.p_value == 0 else math.log10(res.p_value)
    return (f"G {res.statistic:.1f} on {res.dof} degrees of freedom, n {res.n}, p {res.p_value:.3g} "
            f"(log10 p - log10 α = {log_p - math.log10(ALPHA):+.1f})")


#: The tree control keeps the nodes whose drawn path probability reaches this.
DRAWN_CUT = 0.3


def keep_by_drawn_scores(self: AutoBudget, tree: DraftTree, counts: Sequence[int]) -> tuple[DraftTree, torch.Tensor]:
    """The tree control's `AutoBudget.keep`: each row keeps (up to its planned count) the nodes whose drawn path
    probability is at least :data:`DRAWN_CUT`, so the count depends on what this round drew (the outlook it reports
    is the calibrated one, as `AutoBudget.keep`'s)."""
    drawn = torch.exp(tree.score.double().clamp(max=0.0))  # [R, N] the drawn tokens' path probabilities
    order, drawn_sorted = verification_order(tree, drawn, sibling_prefix=self.sibling_prefix)
    planned = torch.tensor(list(counts), dtype=torch.long, device=order.device)
    k = torch.minimum((drawn_sorted >= DRAWN_CUT).sum(dim=1), planned)  # [R] chosen after the draws
    kept = tree.subtree(keep_first(tree, order, k), capacity=min(max(counts, default=0) + 1, tree.capacity))
    _, p_sorted = verification_order(tree, self.estimator.estimate(tree), sibling_prefix=self.sibling_prefix)
    return kept, p_sorted[:, :self.settings.max_budget]


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SPECFRAME_CACHE", str(tmp_path))
    monkeypatch.setattr(loop_module, "StageClock", TickClock)  # the controller's decisions do not depend on load


@pytest.mark.parametrize("shape", list(SAMPLED))
def test_auto_trimmed_rejection_rounds_stay_lossless(shape: str, record_property: Any) -> None:
    target, results = decode_many("rank", shape)
    rounds = [r for res in results for r in res.rounds if r.drafted]
    assert len(rounds) > REQUESTS * 5 and len({r.budget for r in rounds}) >= 3  # drafted, trimmed to many sizes
    counts = drafted_round_counts(results, target.vocab_size)
    assert counts.sum() > 5000
    res = emitted_law_test(target, counts)
    record_property("g_test", margin(res))
    print(f"{shape}, rank-keyed (positive): {margin(res)}")
    assert res.impossible == 0 and res.p_value >= ALPHA, margin(res)


@pytest.mark.parametrize("shape", list(SAMPLED))
def test_negative_controls_are_rejected_at_the_same_size(shape: str, record_property: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Tree: a controller whose decision depends on this round's draws (how many nodes a row keeps set by the
    probabilities of the tokens it drew: the rule of an earlier version, which chose the count after drafting)
    biases the emitted law by a few percent per drafted token. Chain: a residual drawn from the target's law after
    a rejection. At the positive tests' own size the test must see each."""
    import specframe_verifiers.tree_rejection as tree_rejection

    if shape == "chain":
        monkeypatch.setattr(tree_rejection, "residual_law", lambda p, q: p)
    else:
        monkeypatch.setattr(AutoBudget, "keep", keep_by_drawn_scores)
    target, results = decode_many("score" if shape == "tree" else "rank", shape)
    res = emitted_law_test(target, drafted_round_counts(results, target.vocab_size))
    record_property("g_test", margin(res))
    print(f"{shape}, negative control: {margin(res)}")
    assert res.p_value < ALPHA, margin(res)
