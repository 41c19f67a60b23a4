"""Random block-drafter checkpoints for benchmarks and tests: the published z-lab layout, filled with seeded noise.

:func:`random_checkpoint` writes a DFlash or Domino (GRU head) drafter for a given target model: one tensor per
slot of :func:`~specframe_diffusion.checkpoint.key_layout.checkpoint_layout`, norms set to one and every other
weight drawn from a private ``torch.Generator`` (the global RNG is untouched), so the same arguments always write
the same files. The drafter shares the target's embeddings and LM head, as published z-lab drafters do.

Example::

    model = tiny_causal_lm("llama", num_layers=4)                     # specframe_hf.testing
    random_checkpoint(tmp / "draft", target=model, family="domino", block_size=8, taps=(1, 2))

(The loader tests keep their own hand-written layout in ``tests/diffusion_testkit.py``, so they check the loader
against the published description, not against this module.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from specframe_diffusion.checkpoint.key_layout import checkpoint_layout
from specframe_diffusion.checkpoint.safetensors_dir import write_checkpoint_dir
from specframe_diffusion.draft_config import DraftModelConfig


def random_checkpoint(directory: str | Path, *, target: Any, family: Literal["dflash", "domino"] = "dflash",
                      layers: int = 2, block_size: int = 8, taps: Sequence[int] = (1,), seed: int = 0,
                      std: float = 0.1, mask_token_id: int | None = None, gru_hidden_dim: int = 32,
                      emb_dim: int = 16) -> Path:
    """Write a random ``family`` drafter for the transformers causal LM ``target``; return the directory.

    The drafter's hidden size, heads and vocabulary follow the target's config; ``taps`` are target layers.
    """
    tc = target.config
    hidden, heads, kv_heads = int(tc.hidden_size), int(tc.num_attention_heads), int(tc.num_key_value_heads)
    head_dim = int(getattr(tc, "head_dim", None) or hidden // heads)
    vocab = int(target.get_output_embeddings().weight.shape[0])
    dflash: dict[str, Any] = {"mask_token_id": vocab - 1 if mask_token_id is None else int(mask_token_id),
                              "target_layer_ids": [int(t) for t in taps], "shift_label": True}
    if family == "domino":
        dflash.update({"projector_type": "domino", "emb_dim": emb_dim, "gru_hidden_dim": gru_hidden_dim,
                       "pure_draft_prefix_len": 1})
    config: dict[str, Any] = {
        "architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": hidden,
        "intermediate_size": int(tc.intermediate_size), "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": head_dim,
        "rms_norm_eps": float(getattr(tc, "rms_norm_eps", 1e-6)), "rope_theta": 10000.0,
        "max_position_embeddings": int(tc.max_position_embeddings), "vocab_size": vocab, "attention_bias": False,
        "hidden_act": "silu", "tie_word_embeddings": False, "layer_types": ["full_attention"] * layers,
        "block_size": block_size, "num_target_layers": int(tc.num_hidden_layers), "dflash_config": dflash,
        "torch_dtype": "float32",
    }
    if family == "domino":
        config["emb_dim"] = emb_dim
    cfg = DraftModelConfig.from_dict(config, source="random_checkpoint")
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for slot in checkpoint_layout(cfg):
        if slot.local.endswith("norm.weight"):
            tensors[slot.key] = torch.ones(slot.shape)
        else:
            tensors[slot.key] = torch.randn(slot.shape, generator=gen) * std
    return write_checkpoint_dir(directory, config, tensors)
