"""Entry point ``hf`` of the ``specframe`` group: registers the ``hf`` target and the ``ngram`` / ``none`` drafters."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import specframe
from specframe.interfaces import BuildContext
from specframe.registry import Capabilities, ComponentSpec
from specframe_hf.config import HFTargetConfig, NgramConfig, NoDraftConfig
from specframe_hf.device_map import DeviceMap
from specframe_hf.ngram_drafter import NgramDrafter
from specframe_hf.no_drafter import NoDrafter

if TYPE_CHECKING:
    from specframe_hf.target import HFTarget


def build_hf_target(config: HFTargetConfig, ctx: BuildContext) -> HFTarget:
    """Load the target from ``config.model`` (transformers is imported only here)."""
    from specframe_hf.target import HFTarget

    placement = DeviceMap(config.device_map, config.max_memory, config.offload_folder, config.tensor_parallel)
    return HFTarget.from_pretrained(config.model, dtype=config.dtype, device=config.device, attn=config.attn,
                                    taps=config.taps, cpu_linear=config.cpu_linear, placement=placement)


@specframe.hookimpl
def specframe_target_adapters() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="target", name="hf", config=HFTargetConfig, factory=build_hf_target,
        capabilities=Capabilities(exposes_taps=True),
        summary="Hugging Face causal LM (Llama, Mistral, Qwen2, Qwen3) with tree attention and KV compaction",
    )


@specframe.hookimpl
def specframe_drafters() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="drafter", name="ngram", config=NgramConfig, factory=lambda cfg, ctx: NgramDrafter(cfg),
        summary="prompt lookup: continue the most recent earlier match of the context's suffix",
    )
    yield ComponentSpec(
        kind="drafter", name="none", config=NoDraftConfig, factory=lambda cfg, ctx: NoDrafter(),
        summary="no draft: plain autoregressive decoding through the same loop (the speedup baseline)",
    )
