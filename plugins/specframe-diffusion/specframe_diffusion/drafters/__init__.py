"""The ``dflash``, ``domino`` and ``dspark`` drafters: one block forward per round over a committed-context cache."""

from specframe_diffusion.drafters.block_drafter import BlockDiffusionDrafter
from specframe_diffusion.drafters.configs import DFlashDrafterConfig, DominoDrafterConfig, DSparkDrafterConfig
from specframe_diffusion.drafters.factory import build_block_drafter

__all__ = [
    "BlockDiffusionDrafter",
    "DFlashDrafterConfig",
    "DSparkDrafterConfig",
    "DominoDrafterConfig",
    "build_block_drafter",
]
