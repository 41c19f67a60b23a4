"""One correct toy component per stage kind, registered by the in-process plugin :data:`GOOD`, for the
conformance kit's own tests. Broken variants in ``test_conformance_kit.py`` subclass them.

* ``toy_table`` target: :class:`~specframe.testing.toy.ToyTarget`;
* ``toy_parallel`` drafter: :class:`~specframe.testing.toy.ToyDrafter` on the target's table;
* ``toy_path`` corrector: :class:`~specframe.testing.toy.ToyCorrector` (path dependent);
* ``toy_chain`` builder: the built-in ``chain`` builder (the best corrected candidate at each depth);
* ``toy_truncate`` pruner: the first ``budget`` nodes in index order;
* ``toy_walk`` verifier: WALK (draw the target at every node, follow the matching child), lossless.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Literal

import torch
from pydantic import Field

from specframe import hookimpl
from specframe.builtin.chain import ChainBuilder, ChainConfig
from specframe.config.base import ComponentConfig
from specframe.interfaces import BuildContext, Pruner, RoundContext, Verifier
from specframe.registry import (
    ComponentSpec,
    CorrectorCapabilities,
    DrafterCapabilities,
    PrunerCapabilities,
    TreeBuilderCapabilities,
    VerifierCapabilities,
)
from specframe.sampling import sample
from specframe.sampling.noise import TARGET
from specframe.testing.toy import ToyCorrector, ToyDrafter, ToyTarget
from specframe.tree import DraftTree
from specframe.types import VerifyResult


class ToyTableConfig(ComponentConfig):
    type: Literal["toy_table"] = "toy_table"
    vocab_size: int = Field(16, ge=4, description="V: vocabulary size")
    seed: int = Field(0, description="seed of the logits table")


class ToyParallelConfig(ComponentConfig):
    type: Literal["toy_parallel"] = "toy_parallel"
    depth: int = Field(3, ge=1, description="L: depths per round")
    num_candidates: int = Field(4, ge=1, description="K: candidates per depth")
    distance: float = Field(0.5, ge=0.0, description="noise added to the target's table")


class ToyPathConfig(ComponentConfig):
    type: Literal["toy_path"] = "toy_path"
    strength: float = Field(1.0, description="scale of the parent-token bias")


class ToyChainConfig(ComponentConfig):
    type: Literal["toy_chain"] = "toy_chain"


class ToyTruncateConfig(ComponentConfig):
    type: Literal["toy_truncate"] = "toy_truncate"


class ToyWalkConfig(ComponentConfig):
    type: Literal["toy_walk"] = "toy_walk"


class ToyChainBuilder(ChainBuilder):
    """The built-in ``chain`` builder (the best corrected candidate at every depth) under the toy name."""

    def __init__(self) -> None:
        super().__init__(ChainConfig())


class ToyTruncatePruner(Pruner):
    """The first ``budget + 1`` nodes (root included): ancestor-closed because parents precede children."""

    def prune(self, tree: DraftTree, ctx: RoundContext) -> DraftTree:
        keep = torch.arange(tree.capacity)[None, :] <= ctx.budget
        return tree.subtree(tree.valid & keep)


class ToyWalkVerifier(Verifier):
    """WALK: one target draw per node (position-keyed, ``ctx.noise``); follow the child holding the draw."""

    def verify(self, tree: DraftTree, logits: torch.Tensor, ctx: RoundContext) -> VerifyResult:
        u = None if ctx.sampling.greedy else ctx.noise.uniforms(TARGET, tree.depth)  # [B, N]
        draws = sample(logits, ctx.sampling, u)  # [B, N]
        b = tree.batch_size
        rows = torch.arange(b)
        node = torch.zeros(b, dtype=torch.long)
        path = [node]
        alive = torch.ones(b, dtype=torch.bool)
        for _ in range(tree.max_depth):
            want = draws[rows, node]  # [B]
            match = tree.valid & (tree.parent == node[:, None]) & (tree.tokens == want[:, None])  # [B, N]
            alive = alive & match.any(dim=1)
            node = torch.where(alive, match.long().argmax(dim=1), node)
            path.append(torch.where(alive, node, torch.full_like(node, -1)))
        nodes = torch.stack(path, dim=1)  # [B, D + 1]
        count = (nodes >= 0).sum(dim=1) - 1
        return VerifyResult(accepted_nodes=nodes, num_accepted=count, bonus_token=draws[rows, node])


def _good_specs() -> dict[str, list[ComponentSpec]]:
    def target(cfg: ToyTableConfig, ctx: BuildContext) -> ToyTarget:
        return ToyTarget.random(cfg.vocab_size, seed=cfg.seed, scale=2.0)

    def drafter(cfg: ToyParallelConfig, ctx: BuildContext) -> ToyDrafter:
        assert isinstance(ctx.target, ToyTarget)
        return ToyDrafter(ctx.target, depth=cfg.depth, num_candidates=cfg.num_candidates, distance=cfg.distance)

    return {
        "target": [ComponentSpec("target", "toy_table", ToyTableConfig, target, summary="exact toy target")],
        "drafter": [ComponentSpec("drafter", "toy_parallel", ToyParallelConfig, drafter,
                                  DrafterCapabilities(emits_logits=True), summary="toy parallel drafter")],
        "corrector": [ComponentSpec("corrector", "toy_path", ToyPathConfig,
                                    lambda cfg, ctx: ToyCorrector(ctx.target.vocab_size, strength=cfg.strength),
                                    CorrectorCapabilities(path_dependent=True), summary="path-aware toy corrector")],
        "tree_builder": [ComponentSpec("tree_builder", "toy_chain", ToyChainConfig, lambda c, x: ToyChainBuilder(),
                                       TreeBuilderCapabilities(produces_tree=False), summary="greedy corrected chain")],
        "pruner": [ComponentSpec("pruner", "toy_truncate", ToyTruncateConfig, lambda c, x: ToyTruncatePruner(),
                                 PrunerCapabilities(keeps_child_prefix=True), summary="first nodes up to the budget")],
        "verifier": [ComponentSpec("verifier", "toy_walk", ToyWalkConfig, lambda c, x: ToyWalkVerifier(),
                                   VerifierCapabilities(lossless=True,
                                                        supported_regimes=frozenset({"deterministic", "sampled"})),
                                   summary="WALK verification")],
    }


def plugin(specs: dict[str, list[ComponentSpec]], name: str) -> types.ModuleType:
    """An in-process plugin module whose registration hooks yield ``specs`` (by kind)."""
    module = types.ModuleType(name)
    hooks = {"target": "specframe_target_adapters", "drafter": "specframe_drafters",
             "corrector": "specframe_correctors", "tree_builder": "specframe_tree_builders",
             "pruner": "specframe_pruners", "verifier": "specframe_verifiers"}
    for kind, hook in hooks.items():
        if kind in specs:
            setattr(module, hook, hookimpl(specname=hook)(_yielding(specs[kind])))
    return module


def _yielding(specs: list[ComponentSpec]) -> Callable[[], Iterator[ComponentSpec]]:
    def impl() -> Iterator[ComponentSpec]:
        yield from specs

    return impl


GOOD_SPECS = _good_specs()
GOOD = plugin(GOOD_SPECS, "toy_components")
