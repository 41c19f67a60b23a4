"""In-test plugin with one small component per stage kind, for host and config tests.

These components are real (they build and run on the toy target) but minimal, so config and plugin-host
tests do not depend on which first-party plugins are installed. Their implementations are the core's built-in
stages (:mod:`specframe.builtin`) under other names and configs.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, field_validator

from specframe import (
    ComponentConfig,
    ComponentSpec,
    Drafter,
    DraftProposal,
    TreeBuilderCapabilities,
    VerifierCapabilities,
    hookimpl,
)
from specframe.builtin.chain import ChainBuilder, ChainConfig
from specframe.builtin.identity import IdentityCorrector
from specframe.builtin.no_pruner import NoPruner
from specframe.testing.minimal import ArgmaxWalkVerifier


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


class SpineConfig(ComponentConfig):
    type: Literal["spine"] = "spine"
    width: int = Field(1, ge=1)


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


class ArgmaxConfig(ComponentConfig):
    type: Literal["argmax"] = "argmax"


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
                        factory=lambda cfg, ctx: IdentityCorrector(), summary="marginals")


@hookimpl
def specframe_tree_builders():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="tree_builder", name="spine", config=SpineConfig,
                        factory=lambda cfg, ctx: ChainBuilder(ChainConfig()), summary="first candidates as a chain")
    yield ComponentSpec(kind="tree_builder", name="sampled_spine", config=SampledSpineConfig,
                        factory=lambda cfg, ctx: ChainBuilder(ChainConfig()), summary="sampled chain",
                        capabilities=TreeBuilderCapabilities(draft_regime="sampled"))


@hookimpl
def specframe_pruners():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="pruner", name="keep_all", config=KeepAllConfig,
                        factory=lambda cfg, ctx: NoPruner(), summary="no pruning")


@hookimpl
def specframe_verifiers():  # type: ignore[no-untyped-def]
    yield ComponentSpec(kind="verifier", name="argmax", config=ArgmaxConfig,
                        factory=lambda cfg, ctx: ArgmaxWalkVerifier(), summary="greedy walk",
                        capabilities=VerifierCapabilities(lossless=True, greedy_only=True))
    yield ComponentSpec(kind="verifier", name="lossy", config=LossyConfig,
                        factory=lambda cfg, ctx: ArgmaxWalkVerifier(), summary="a lossy verifier",
                        capabilities=VerifierCapabilities(lossless=False))
