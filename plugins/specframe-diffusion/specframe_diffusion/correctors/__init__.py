"""The ``ar`` (Domino GRU), ``markov`` (DSpark), ``path_selector`` (DFlash2) and ``lilicorr`` (LiLiCorr) correctors,
loaded from the drafter checkpoints."""

from specframe_diffusion.correctors.checkpoint_heads import (
    ARCorrectorConfig,
    MarkovCorrectorConfig,
    build_ar_corrector,
    build_markov_corrector,
)
from specframe_diffusion.correctors.selector_heads import (
    LiLiCorrCorrectorConfig,
    PathSelectorCorrectorConfig,
    build_lilicorr_corrector,
    build_path_selector_corrector,
)

__all__ = ["ARCorrectorConfig", "LiLiCorrCorrectorConfig", "MarkovCorrectorConfig", "PathSelectorCorrectorConfig",
           "build_ar_corrector", "build_lilicorr_corrector", "build_markov_corrector",
           "build_path_selector_corrector"]
