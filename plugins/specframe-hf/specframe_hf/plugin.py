"""Entry point ``hf`` of the ``specframe`` group: registers the ``hf`` target and the ``ngram`` drafter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import specframe
from specframe.interfaces import BuildContext
from specframe.registry import ComponentSpec, TargetCapabilities
from specframe_hf.config import HFTargetConfig, NgramConfig, kv_memory_bytes
from specframe_hf.device_map import DeviceMap
from specframe_hf.ngram_drafter import NgramDrafter

if TYPE_CHECKING:
    from specframe_hf.target import HFTarget


def build_hf_target(config: HFTargetConfig, ctx: BuildContext) -> HFTarget:
    """Load the target from ``config.model`` (transformers is imported only here)."""
    from specframe_hf.target import HFTarget

    placement = DeviceMap(config.device_map, config.max_memory, config.offload_folder, config.tensor_parallel)
    return HFTarget.from_pretrained(config.model, dtype=config.dtype, device=config.device, attn=config.attn,
                                    taps=config.taps, cpu_linear=config.cpu_linear, logits_dtype=config.logits_dtype,
                                    placement=placement, engine=config.engine, compile=config.compile,
                                    kv_memory=kv_memory_bytes(config.kv_memory), capture=config.capture,
                                    prefill_chunk=config.prefill_chunk)


@specframe.hookimpl
def specframe_target_adapters() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="target", name="hf", config=HFTargetConfig, factory=build_hf_target,
        capabilities=TargetCapabilities(exposes_taps=True, shares_embeddings=True),
        summary="Hugging Face causal LM (Llama, Mistral, Qwen2, Qwen3) with tree attention and KV compaction",
    )


@specframe.hookimpl
def specframe_drafters() -> Iterator[ComponentSpec]:
    yield ComponentSpec(
        kind="drafter", name="ngram", config=NgramConfig, factory=lambda cfg, ctx: NgramDrafter(cfg),
        summary="prompt lookup: continue the most recent earlier match of the context's suffix",
    )
