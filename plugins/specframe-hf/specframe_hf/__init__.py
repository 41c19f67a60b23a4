"""specframe-hf: the ``hf`` target adapter for Hugging Face causal LMs and the ``ngram`` drafter.

``HFTarget`` is imported lazily (``from specframe_hf import HFTarget`` works), so that loading the plugin to
list components or to use the model-free drafters does not import transformers.
"""

from __future__ import annotations

from typing import Any

from specframe_hf.config import HFTargetConfig, NgramConfig
from specframe_hf.ngram_drafter import NgramDrafter, lookup_continuation

__all__ = [
    "HFTarget",
    "HFTargetConfig",
    "NgramConfig",
    "NgramDrafter",
    "lookup_continuation",
]


def __getattr__(name: str) -> Any:
    if name == "HFTarget":
        from specframe_hf.target import HFTarget

        return HFTarget
    raise AttributeError(f"module 'specframe_hf' has no attribute '{name}'")
