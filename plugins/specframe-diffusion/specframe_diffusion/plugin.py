"""The ``diffusion`` plugin: registers the ``dflash`` / ``domino`` / ``dspark`` drafters, the ``ar`` / ``markov`` /
``path_selector`` / ``lilicorr`` correctors, and a cross-stage check (:mod:`specframe_diffusion.validation`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import specframe
from specframe.registry import ComponentRegistry, ComponentSpec, CorrectorCapabilities, DrafterCapabilities
from specframe_diffusion.correctors import (
    ARCorrectorConfig,
    LiLiCorrCorrectorConfig,
    MarkovCorrectorConfig,
    PathSelectorCorrectorConfig,
    build_ar_corrector,
    build_lilicorr_corrector,
    build_markov_corrector,
    build_path_selector_corrector,
)
from specframe_diffusion.drafters import (
    DFlashDrafterConfig,
    DominoDrafterConfig,
    DSparkDrafterConfig,
    build_block_drafter,
)
from specframe_diffusion.validation import pipeline_problems

DRAFTER_CAPABILITIES = DrafterCapabilities(needs_target_hidden=True, parallel_block=True, emits_logits=True,
                                    emits_features=True, needs_target_embeddings=True)


@specframe.hookimpl
def specframe_drafters() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="drafter", name="dflash", config=DFlashDrafterConfig,
        factory=lambda cfg, ctx: build_block_drafter(cfg, ctx, "dflash"),
        capabilities=DRAFTER_CAPABILITIES,
        summary="DFlash block-diffusion drafter (z-lab checkpoints; bs-1 depths from one forward)",
    )
    yield ComponentSpec(
        kind="drafter", name="domino", config=DominoDrafterConfig,
        factory=lambda cfg, ctx: build_block_drafter(cfg, ctx, "domino"),
        capabilities=DRAFTER_CAPABILITIES,
        summary="Domino backbone (shift layout, bs depths); pair with the `ar` corrector",
    )
    yield ComponentSpec(
        kind="drafter", name="dspark", config=DSparkDrafterConfig,
        factory=lambda cfg, ctx: build_block_drafter(cfg, ctx, "dspark"),
        capabilities=DRAFTER_CAPABILITIES,
        summary="DSpark backbone (DeepSeek or z-lab layout, shift); pair with the `markov` corrector",
    )


@specframe.hookimpl
def specframe_correctors() -> Iterator[ComponentSpec]:
    head = CorrectorCapabilities(stateful=True, needs_features=True, path_dependent=True, needs_target_embeddings=True)
    yield ComponentSpec(
        kind="corrector", name="ar", config=ARCorrectorConfig, factory=build_ar_corrector, capabilities=head,
        summary="Domino GRU correction head from a Domino checkpoint (slot 0 pure, low-rank form)",
    )
    yield ComponentSpec(
        kind="corrector", name="markov", config=MarkovCorrectorConfig, factory=build_markov_corrector,
        capabilities=head, summary="DSpark Markov head (vanilla/gated/rnn) from a DSpark checkpoint",
    )
    yield ComponentSpec(
        kind="corrector", name="path_selector", config=PathSelectorCorrectorConfig,
        factory=build_path_selector_corrector,
        capabilities=CorrectorCapabilities(needs_features=True, path_dependent=True, needs_target_embeddings=True),
        summary="DFlash2 path selector (predecessor x candidate bilinear score over the top-16) from a DFlash2 "
                "checkpoint",
    )
    yield ComponentSpec(
        kind="corrector", name="lilicorr", config=LiLiCorrCorrectorConfig, factory=build_lilicorr_corrector,
        capabilities=CorrectorCapabilities(needs_features=True, path_dependent=True, needs_target_embeddings=True),
        summary="LiLiCorr candidate-lattice reranker (2-layer lattice transformer) from a LiLiCorr checkpoint",
    )


@specframe.hookimpl
def specframe_validate_pipeline(config: Any, registry: ComponentRegistry) -> list[str]:
    return list(pipeline_problems(config))
