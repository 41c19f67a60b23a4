"""The conformance kit has power: each broken variant of a correct toy component fails the contract it breaks,
with a message that names the component and the broken rule."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pytest
import torch
from pydantic import ConfigDict, Field, field_validator

from specframe.config.base import ComponentConfig
from specframe.interfaces import DecodeState, RoundContext
from specframe.registry import ComponentSpec, CorrectorCapabilities, DrafterCapabilities, VerifierCapabilities
from specframe.sampling import inverse_cdf
from specframe.sampling.noise import DRAFT, TARGET
from specframe.testing import conformance as kit
from specframe.testing.toy import ToyCorrector, ToyDrafter, ToyTarget
from specframe.tree import DraftTree
from specframe.types import DraftProposal, TargetOutput, VerifyResult

from .toy_components import (
    GOOD_SPECS,
    ToyChainBuilder,
    ToyChainConfig,
    ToyParallelConfig,
    ToyTruncatePruner,
    ToyWalkVerifier,
)


def good(kind: str) -> ComponentSpec:
    return GOOD_SPECS[kind][0]


def built(spec: ComponentSpec, tmp_path: Path, **case: Any) -> kit.BuiltCase:
    return kit.resolve(kit.ConformanceCase(spec.kind, spec.name, spec=spec, **case), tmp_path)


def broken(kind: str, factory: Any, **changes: Any) -> ComponentSpec:
    return replace(good(kind), factory=factory, **changes)


def fails(check: Any, case: kit.BuiltCase, *fragments: str) -> None:
    with pytest.raises(AssertionError) as info:
        check(case)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


# ------------------------------------------------------------------------------------ declarations, configs
class UndocumentedConfig(ComponentConfig):
    type: Literal["toy_chain"] = "toy_chain"
    width: int = 3


class DriftingConfig(ComponentConfig):
    type: Literal["toy_chain"] = "toy_chain"
    width: int = Field(3, description="grows on every validation")

    @field_validator("width")
    @classmethod
    def _grow(cls, v: int) -> int:
        return v + 1


class MutableConfig(ToyChainConfig):
    model_config = ConfigDict(extra="forbid", frozen=False)


@pytest.mark.parametrize(("config", "fragment"), [
    (UndocumentedConfig, "without a description: width"),
    (DriftingConfig, "model_validate(model_dump())"),
    (MutableConfig, "mutable"),
])
def test_config_contracts(config: type, fragment: str, tmp_path: Path) -> None:
    case = built(replace(good("tree_builder"), config=config), tmp_path)
    with pytest.raises(AssertionError, match="tree_builder 'toy_chain'") as info:
        kit.check_config_round_trip(case.spec, case.config)
    assert fragment in str(info.value)


def test_declaration_contracts() -> None:
    with pytest.raises(AssertionError, match="supported_regimes must be"):
        kit.check_declaration(replace(good("verifier"),
                                      capabilities=VerifierCapabilities(lossless=True, requires_q=True)))
    with pytest.raises(AssertionError, match="summary"):
        kit.check_declaration(replace(good("pruner"), summary=""))
    kit.check_declaration(good("verifier"))


# ------------------------------------------------------------------------------------------------ drafters
class LeakyDrafter(ToyDrafter):
    """Swaps its two best candidates from the fifth proposal on; begin() does not reset the count."""

    calls = 0

    def propose(self, state: DecodeState) -> DraftProposal:
        p = super().propose(state)
        self.calls += 1
        if self.calls <= 5:
            return p
        tokens = p.tokens.clone()
        tokens[..., [0, 1]] = tokens[..., [1, 0]]
        return replace(p, tokens=tokens)


class SharedHistoryDrafter(ToyDrafter):
    """Declares batch support but keeps the context in a list made once in __init__, which forks share."""

    supports_batch = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.history: list[int] = []

    def begin(self, state: DecodeState, prefill: Any) -> None:
        self.history[:] = state.tokens[0].tolist()

    def propose(self, state: DecodeState) -> DraftProposal:
        context = torch.tensor([[self.history[-1], int(state.root[0])]])  # prev2 from the (shared) history
        view = DecodeState(tokens=context, prompt_len=state.prompt_len, sampling=state.sampling, seed=state.seed)
        return replace(super().propose(view), root=state.root)

    def commit(self, state: DecodeState, tree: Any, result: Any, target_out: Any) -> None:
        self.history[:] = state.tokens[0, :-1].tolist()


class UnsortedDrafter(ToyDrafter):
    def propose(self, state: DecodeState) -> DraftProposal:
        p = super().propose(state)
        return replace(p, tokens=p.tokens.flip(-1), logprobs=p.logprobs.flip(-1))


class NoLogitsDrafter(ToyDrafter):
    def propose(self, state: DecodeState) -> DraftProposal:
        return replace(super().propose(state), logits=None)


class WrongRootDrafter(ToyDrafter):
    def propose(self, state: DecodeState) -> DraftProposal:
        p = super().propose(state)
        return replace(p, root=(p.root + 1) % self.vocab_size)


class UnderstatedDepthDrafter(ToyDrafter):
    """Proposes its configured depths but declares one fewer: a chain budget set by max_depth() would cut it."""

    def max_depth(self) -> int:
        return self.depth - 1


def _drafter(cls: type) -> Any:
    return lambda cfg, ctx: cls(ctx.target, depth=cfg.depth, num_candidates=cfg.num_candidates)


def test_drafter_state_leaking_across_requests_is_caught(tmp_path: Path) -> None:
    case = built(broken("drafter", _drafter(LeakyDrafter), capabilities=DrafterCapabilities()), tmp_path)
    fails(kit.check_drafter_reproducible, case, "drafter 'toy_parallel'", "begin() on a used drafter")


def test_per_row_state_shared_between_forks_is_caught(tmp_path: Path) -> None:
    case = built(broken("drafter", _drafter(SharedHistoryDrafter)), tmp_path)
    kit.check_drafter(case)  # one request at a time it is a fine drafter
    kit.check_drafter_reproducible(case)
    fails(kit.check_drafter_batch_rows, case, "drafter 'toy_parallel'", "per-row state leaks between batch rows")


def test_a_drafter_with_per_row_state_passes_the_batch_contract(tmp_path: Path) -> None:
    kit.check_drafter_batch_rows(built(good("drafter"), tmp_path))


def test_unsorted_candidates_are_caught(tmp_path: Path) -> None:
    fails(kit.check_drafter, built(broken("drafter", _drafter(UnsortedDrafter)), tmp_path), "sorted")


def test_a_wrong_root_is_caught(tmp_path: Path) -> None:
    fails(kit.check_drafter, built(broken("drafter", _drafter(WrongRootDrafter)), tmp_path), "root")


def test_a_proposal_deeper_than_the_declared_max_depth_is_caught(tmp_path: Path) -> None:
    fails(kit.check_drafter, built(broken("drafter", _drafter(UnderstatedDepthDrafter)), tmp_path),
          "drafter 'toy_parallel'", "more than its max_depth()")


def test_undelivered_logits_are_caught(tmp_path: Path) -> None:
    fails(kit.check_drafter, built(broken("drafter", _drafter(NoLogitsDrafter)), tmp_path), "emits_logits=True")


# ---------------------------------------------------------------------------------------------- correctors
class UniformCorrector(ToyCorrector):
    """Ignores the base law, so candidates the drafter masked get a finite score."""

    def child_logprobs(self, proposal: DraftProposal, depth: int, tokens: torch.Tensor,
                       state: torch.Tensor) -> torch.Tensor:
        k = proposal.num_candidates
        return torch.full((proposal.batch_size, tokens.shape[1], k), -float(torch.tensor(k).log()))


def test_undeclared_path_dependence_is_caught(tmp_path: Path) -> None:
    case = built(replace(good("corrector"), capabilities=CorrectorCapabilities()), tmp_path)
    fails(kit.check_corrector, case, "path_dependent=False")


def test_unmasked_candidates_are_caught(tmp_path: Path) -> None:
    case = built(broken("corrector", lambda cfg, ctx: UniformCorrector(ctx.target.vocab_size)), tmp_path)
    fails(kit.check_corrector, case, "marked -inf")


# -------------------------------------------------------------------------------------------- tree builders
class RandomPickBuilder(ToyChainBuilder):
    """Declared deterministic but picks a random live candidate at depth 1 from the round's random stream."""

    def build(self, proposal: DraftProposal, corrector: Any, ctx: RoundContext) -> DraftTree:
        rows = []
        for b in range(proposal.batch_size):
            live = proposal.tokens[b, 0][torch.isfinite(proposal.logprobs[b, 0])].tolist()
            u = ctx.noise.uniforms(DRAFT, torch.zeros(proposal.batch_size, dtype=torch.long))[b]
            pick = live[int(u * len(live))]
            rows.append(DraftTree.from_lists([int(proposal.root[b]), pick], [-1, 0]))
        return DraftTree.stack(rows)


class TwinBuilder(ToyChainBuilder):
    """Gives the root two children with the same token."""

    def build(self, proposal: DraftProposal, corrector: Any, ctx: RoundContext) -> DraftTree:
        root, token = int(proposal.root[0]), int(proposal.tokens[0, 0, 0])
        row = DraftTree.from_lists([root, token, token], [-1, 0, 0])
        return DraftTree.stack([row] * proposal.batch_size)


class ForkBuilder(ToyChainBuilder):
    """Gives the root its two best candidates (declared a chain builder)."""

    def build(self, proposal: DraftProposal, corrector: Any, ctx: RoundContext) -> DraftTree:
        rows = [DraftTree.from_lists([int(proposal.root[b]), int(proposal.tokens[b, 0, 0]),
                                      int(proposal.tokens[b, 0, 1])], [-1, 0, 0])
                for b in range(proposal.batch_size)]
        return DraftTree.stack(rows)


@pytest.mark.parametrize(("builder", "fragment"), [
    (RandomPickBuilder, "declares draft_regime='deterministic'"),
    (TwinBuilder, "repeats token"),
    (ForkBuilder, "produces_tree=False"),
])
def test_builder_contracts(builder: type, fragment: str, tmp_path: Path) -> None:
    fails(kit.check_tree_builder, built(broken("tree_builder", lambda c, x: builder()), tmp_path), fragment)


# ------------------------------------------------------------------------------------------------- pruners
class OverBudgetPruner(ToyTruncatePruner):
    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        return super().prune(tree, replace(ctx, budget=ctx.budget + 2))


class LaterSiblingPruner(ToyTruncatePruner):
    """Keeps the root's last child and drops the earlier ones."""

    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        keep = torch.zeros_like(tree.valid)
        keep[:, 0] = True
        for b, row in enumerate(tree.children()):
            if row[0]:
                keep[b, row[0][-1]] = True
        return tree.subtree(keep)


def test_pruner_over_budget_is_caught(tmp_path: Path) -> None:
    fails(kit.check_pruner, built(broken("pruner", lambda c, x: OverBudgetPruner()), tmp_path), "over the budget")


def test_pruner_dropping_earlier_siblings_is_caught(tmp_path: Path) -> None:
    case = built(broken("pruner", lambda c, x: LaterSiblingPruner()), tmp_path)
    fails(kit.check_pruner, case, "keeps_child_prefix=True")


# ----------------------------------------------------------------------------------------------- verifiers
class AlwaysAcceptVerifier(ToyWalkVerifier):
    """Accepts the first child at every node and emits the target's draw after it: not lossless."""

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        u = ctx.noise.uniforms(TARGET, tree.depth)  # [B, N]
        draws = inverse_cdf(torch.softmax(logits.double(), -1), u)  # [B, N]
        nodes = []
        for row in tree.children():
            path = [0]
            while row[path[-1]]:
                path.append(row[path[-1]][0])
            nodes.append(path)
        width = max(len(p) for p in nodes)
        accepted = torch.tensor([p + [-1] * (width - len(p)) for p in nodes])
        return VerifyResult(accepted_nodes=accepted, num_accepted=torch.tensor([len(p) - 1 for p in nodes]),
                            bonus_token=torch.stack([draws[b, p[-1]] for b, p in enumerate(nodes)]))


class GlobalRNGVerifier(ToyWalkVerifier):
    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        torch.rand(1)
        return super().verify(tree, logits, ctx)


class SiblingJumpVerifier(ToyWalkVerifier):
    """Reports the root's second child as the child of its first one."""

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        b = tree.batch_size
        nodes = torch.tensor([[0, 1, 2]] * b)
        return VerifyResult(accepted_nodes=nodes, num_accepted=torch.full((b,), 2), bonus_token=torch.zeros(b).long())


def test_a_lossy_verifier_declared_lossless_fails_the_distribution_test(tmp_path: Path) -> None:
    case = built(broken("verifier", lambda c, x: AlwaysAcceptVerifier()), tmp_path)
    fails(kit.check_verifier_lossless, case, "declares lossless=True", "deterministic trees")
    fails(kit.check_verifier_greedy, case, "greedy oracle accepts")


def test_the_correct_walk_passes_the_distribution_test_it_is_compared_with() -> None:
    res = kit.lossless_g_test(ToyWalkVerifier(), "sampled", kit.verifiers.SETTINGS["T1"])
    assert res.impossible == 0 and res.p_value >= kit.verifiers.ALPHA


def test_global_rng_use_is_caught(tmp_path: Path) -> None:
    fails(kit.check_verifier, built(broken("verifier", lambda c, x: GlobalRNGVerifier()), tmp_path),
          "global torch RNG")


def test_paths_that_are_not_tree_paths_are_caught(tmp_path: Path) -> None:
    fails(kit.check_verifier, built(broken("verifier", lambda c, x: SiblingJumpVerifier()), tmp_path),
          "is not a path of the tree")


# ------------------------------------------------------------------------------------------------- targets
class FlatTarget(ToyTarget):
    """Scores tree nodes as one causal sequence (node i sees nodes 0..i-1, not only its ancestors)."""

    def forward_tree(self, tree: DraftTree) -> TargetOutput:
        tokens = tree.tokens.cpu()
        prev2 = torch.cat([torch.tensor([[self.cached_tokens()[-1]]]), tokens[:, :-1]], dim=1)
        return TargetOutput(logits=self.next_logits(prev2, tokens))


class KeepAllTarget(ToyTarget):
    """Commits every node of the tree instead of the accepted path."""

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        super().commit(tree, torch.arange(tree.capacity)[None, :])


@pytest.mark.parametrize(("cls", "fragment"), [
    (FlatTarget, "differ from the causal prefill"),
    (KeepAllTarget, "cache_len"),
])
def test_target_contracts(cls: type, fragment: str, tmp_path: Path) -> None:
    spec = broken("target", lambda cfg, ctx: cls.random(cfg.vocab_size, seed=cfg.seed, scale=2.0))
    fails(kit.check_target, built(spec, tmp_path), "target 'toy_table'", fragment)


class OneLengthBatch(ToyTarget):
    """Commits the first row's accepted count in every row (as if the rows shared one cache length)."""

    def commit(self, tree: DraftTree, accepted_nodes: torch.Tensor) -> None:
        count = int((accepted_nodes[0] >= 0).sum())
        same = torch.full_like(accepted_nodes, -1)
        same[:, :count] = torch.arange(count)
        super().commit(tree, same)


class OneLengthRows(ToyTarget):
    """A correct single-request target whose ragged batch is :class:`OneLengthBatch`."""

    def ragged_batch(self) -> ToyTarget:
        return OneLengthBatch(self.table, start_token=self.start_token)


def test_ragged_rows_sharing_one_length_are_caught(tmp_path: Path) -> None:
    spec = broken("target", lambda cfg, ctx: OneLengthRows.random(cfg.vocab_size, seed=cfg.seed, scale=2.0))
    case = built(spec, tmp_path)
    kit.check_target(case)  # one request at a time it is a fine target
    fails(kit.check_target_ragged, case, "target 'toy_table'", "ragged batch row")


def test_good_parallel_config_round_trips(tmp_path: Path) -> None:
    case = built(good("drafter"), tmp_path, config={"distance": 0.25})
    assert case.config == ToyParallelConfig(distance=0.25)
    kit.check_config_round_trip(case.spec, case.config)
