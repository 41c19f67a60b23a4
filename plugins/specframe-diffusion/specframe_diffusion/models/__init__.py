"""Pure-torch modules of the draft backbone (no transformers classes, no remote code)."""

from specframe_diffusion.models.backbone import DFlashBackbone
from specframe_diffusion.models.draft_cache import DraftKVCache

__all__ = ["DFlashBackbone", "DraftKVCache"]
