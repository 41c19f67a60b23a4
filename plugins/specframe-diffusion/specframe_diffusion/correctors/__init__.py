"""The ``ar`` (Domino GRU) and ``markov`` (DSpark) correctors, loaded from the drafter checkpoints."""

from specframe_diffusion.correctors.checkpoint_heads import (
    ARCorrectorConfig,
    MarkovCorrectorConfig,
    build_ar_corrector,
    build_markov_corrector,
)

__all__ = ["ARCorrectorConfig", "MarkovCorrectorConfig", "build_ar_corrector", "build_markov_corrector"]
