"""In-test plugin with one small component per stage kind, for host and config tests.

These components are real (they build and run on the toy target) but minimal, so config and plugin-host
tests do not depend on which first-party plugins are installed.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, field_validator

from specframe import (
    Capabilities,
    ComponentConfig,
    ComponentSpec,
    Corrector,
    Drafter,
    DraftProposal,
    DraftTree,
    Pruner,
    TreeBuilder,
    Verifier,
    VerifyResult,
    hookimpl,
)


class FakeTargetConfig(ComponentConfig):
    type: Literal["fake_target"] = "fake_target"
    vocab: int = 8


class RepeatDrafterConfig(ComponentConfig):
    type: Literal["repeat"] = "repeat"
    depth: int = Field(3, ge=0, description="how many times the root is proposed again")


class RepeatDrafter(Drafter):
    """Proposes the root token again at every depth (K = 1)."""

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def propose(self, state):  # type: ignore[no-untyped-def]
        root = state.root
        tokens = root.view(-1, 1, 1).expand(-1, self.depth, 1).clone()
        return DraftProposal(root=root, tokens=tokens, logprobs=torch.zeros(tokens.shape))


class MarginalConfig(ComponentConfig):
    type: Literal["marginal"] = "marginal"


class Marginal(Corrector):
    def child_logprobs(self, proposal, depth, tokens, state):  # type: ignore[no-untyped-def]
        return proposal.logprobs[:, depth - 1 : depth].expand(-1, tokens.shape[1], -1)


class SpineConfig(ComponentConfig):
    type: Literal["spine"] = "spine"
    width: int = Field(1, ge=1)


class Spine(TreeBuilder):
    """The first candidate at every depth, as a chain."""

    def build(self, proposal, corrector, ctx):  # type: ignore[no-untyped-def]
        depth = min(proposal.depth, ctx.budget)
        tokens = [int(proposal.root[0])] + [int(proposal.tokens[0, d, 0]) for d in range(depth)]
        return DraftTree.from_lists(tokens, [-1] + list(range(depth)))


class SampledSpineConfig(ComponentConfig):
    type: Literal["sampled_spine"] = "sampled_spine"


class KeepAllConfig(ComponentConfig):
    type: Literal["keep_all"] = "keep_all"
    beta: float = 0.0

    @field_validator("beta")
    @classmethod
    def _beta(cls, v: float) -> float:
        if v > 0:
            raise ValueError("beta must be <= 0")
        return v


class KeepAll(Pruner):
    def prune(self, tree, ctx):  # type: ignore[no-untyped-def]
        return tree


class ArgmaxConfig(ComponentConfig):
    type: Literal["argmax"] = "argmax"


class Argmax(Verifier):
    """Greedy walk: follow the child equal to the target's argmax."""

    def verify(self, tree, logits, ctx):  # type: ignore[no-untyped-def]
        best = logits[0].argmax(-1).tolist()
        kids = tree.children()[0]
        toks = tree.tokens[0].tolist()
        path, node = [0], 0
        while True:
            nxt = [c for c in kids[node] if toks[c] == best[node]]
            if not nxt:
                break
            node = nxt[0]
            path.append(node)
        return VerifyResult(accepted_nodes=torch.tensor([path]), num_accepted=torch.tensor([len(path) - 1]),
                            bonus_token=torch.tensor([best[node]]))


class LossyConfig(ComponentConfig):
    type: Literal["lossy"] = "lossy"


@hookimpl
def specframe_target_adapters():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="target", name="fake_target", config=FakeTargetConfig,
                        factory=lambda cfg, ctx: None, summary="placeholder target for config tests")


@hookimpl
def specframe_drafters():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="drafter", name="repeat", config=RepeatDrafterConfig,
                        factory=lambda cfg, ctx: RepeatDrafter(cfg.depth), summary="repeat the root")


@hookimpl
def specframe_correctors():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="corrector", name="marginal", config=MarginalConfig,
                        factory=lambda cfg, ctx: Marginal(), summary="marginals")


@hookimpl
def specframe_tree_builders():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="tree_builder", name="spine", config=SpineConfig,
                        factory=lambda cfg, ctx: Spine(), summary="first candidates as a chain")
    yield ComponentSpec(kind="tree_builder", name="sampled_spine", config=SampledSpineConfig,
                        factory=lambda cfg, ctx: Spine(), summary="sampled chain",
                        capabilities=Capabilities(draft_regime="sampled"))


@hookimpl
def specframe_pruners():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="pruner", name="keep_all", config=KeepAllConfig,
                        factory=lambda cfg, ctx: KeepAll(), summary="no pruning")


@hookimpl
def specframe_verifiers():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="verifier", name="argmax", config=ArgmaxConfig,
                        factory=lambda cfg, ctx: Argmax(), summary="greedy walk",
                        capabilities=Capabilities(greedy_only=True))
    yield ComponentSpec(kind="verifier", name="lossy", config=LossyConfig,
                        factory=lambda cfg, ctx: Argmax(), summary="a lossy verifier",
                        capabilities=Capabilities(lossless=False))
